"""``[vllm]`` and ``[router]`` in a training config: parsed, and mistakes named by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankgym.config import ConfigError
from rankgym.trainer.config import load_train_config
from rankgym.trainer.loop import RESUMABLE_CHANGES

TOML = """
steps = 2

[judge]
model = "judge"

[vllm]
url = "http://127.0.0.1:8000"
concurrency = 16

[router]
retry_budget_min = 2.5
fallbacks = { judge = ["backup"] }

[[router.deployments]]
model_name = "judge"
model = "openai/gpt-4o-mini"
rpm = 60

[[router.deployments]]
model_name = "backup"
model = "hosted_vllm/qwen"
api_base = "http://gpu:8000/v1"
"""


def test_vllm_and_router_tables_are_read_from_the_training_config(tmp_path: Path):
    path = tmp_path / "train.toml"
    path.write_text(TOML)
    cfg = load_train_config(path)
    assert cfg.vllm is not None and cfg.vllm.url == "http://127.0.0.1:8000"
    assert cfg.vllm.concurrency == 16 and cfg.vllm.verify is True
    assert cfg.router is not None and cfg.router.budget_s == 150.0
    assert [d.model_name for d in cfg.router.deployments] == ["judge", "backup"]
    assert {"vllm", "router"} <= RESUMABLE_CHANGES  # a restarted server may move


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ('[vllm]\nurll = "http://x"\n', "vllm.urll"),
        ('[router]\nretry_budget_min = 0\n[[router.deployments]]\nmodel_name = "a"\nmodel = "b"\n', "router.retry_budget_min"),
        ("[router]\ndeployments = []\n", "router.deployments"),
    ],
)  # fmt: skip
def test_a_wrong_vllm_or_router_key_is_named(tmp_path: Path, extra: str, key: str):
    path = tmp_path / "train.toml"
    path.write_text("steps = 2\n" + extra)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_train_config(path)
