"""No credential reaches the disk: refused at config load (naming the field, never echoing it),
refused in judge URLs, and redacted by the run.json / runs.config writers (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankgym.config import ConfigError, parse_config, validate_config
from rankgym.credentials import REDACTED, find_credentials, is_credential_key, redact
from rankgym.errors import UserError
from rankgym.store import Store

SECRET = "sk-test-0123456789abcdef"
DEPLOY = '[[router.deployments]]\nmodel_name = "judge"\nmodel = "openai/gpt-4o-mini"\n'


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        (DEPLOY + f'params = {{api_key = "{SECRET}"}}\n', "router.deployments.0.params.api_key"),
        (
            DEPLOY + f'params = {{aws_secret_access_key = "{SECRET}"}}\n',
            "router.deployments.0.params.aws_secret_access_key",
        ),  # fmt: skip
        (
            DEPLOY + f'api_base = "http://user:{SECRET}@host/v1"\n',
            "router.deployments.0.api_base",
        ),  # fmt: skip
        (f'[judge]\napi_base = "http://user:{SECRET}@host/v1"\n', "judge.api_base"),
        (f'[judge]\napi_base = "https://host/v1?api_key={SECRET}"\n', "judge.api_base"),
        (f'[env]\nkwargs = {{token = "{SECRET}"}}\n', "env.kwargs.token"),
        (f'[vllm]\nurl = "http://u:{SECRET}@host:8000"\n', "vllm.url"),
    ],
)
def test_a_credential_in_a_train_config_is_refused_naming_the_key_not_the_value(
    toml: str, key: str
):
    from rankgym.trainer.config import TrainConfig

    with pytest.raises(ConfigError) as e:
        parse_config(toml, TrainConfig, source="t.toml")
    assert f"'{key}' holds a credential" in str(e.value) and "api_key_env" in str(e.value)
    assert SECRET not in str(e.value)


def test_key_names_and_env_variable_names_are_told_apart():
    for name in ("api_key", "API-KEY", "openai_api_key", "password", "client_secret", "token"):
        assert is_credential_key(name), name
    for name in ("api_key_env", "max_tokens", "tokenizer", "keep_checkpoints", "key", "tokens"):
        assert not is_credential_key(name), name
    assert find_credentials({"api_key_env": "OPENAI_API_KEY", "max_tokens": 5, "api_key": ""}) == []


def test_redact_keeps_everything_but_the_credentials():
    cfg = {
        "judge": {"api_base": f"http://me:{SECRET}@gpu:8000/v1", "model": "hosted_vllm/x"},
        "router": {"deployments": [{"params": {"api_key": SECRET, "api_version": "2024"}}]},
    }
    out = redact(cfg)
    assert SECRET not in json.dumps(out)
    assert out["judge"] == {"api_base": f"http://{REDACTED}@gpu:8000/v1", "model": "hosted_vllm/x"}
    assert out["router"]["deployments"][0]["params"] == {"api_key": REDACTED, "api_version": "2024"}
    assert cfg["router"]["deployments"][0]["params"]["api_key"] == SECRET  # a copy


def test_a_judge_api_base_with_credentials_is_refused():
    from rankgym.judges.spec import spec_from_options

    with pytest.raises(UserError, match="--api-base: credentials in the URL are refused") as e:
        spec_from_options("hosted_vllm/x", api_base=f"http://u:{SECRET}@h/v1")
    assert SECRET not in str(e.value)


def test_the_store_never_keeps_a_credential_in_runs_config(tmp_path: Path):
    with Store(tmp_path / "s.db") as store:
        rid = store.create_run(name="r", kind="judge", config={"judge": {"api_key": SECRET}})
        (run,) = [r for r in store.runs() if r["id"] == rid]
    assert run["config"] == {"judge": {"api_key": REDACTED}}
    assert SECRET.encode() not in (tmp_path / "s.db").read_bytes()


@given(st.dictionaries(st.sampled_from(["api_key", "token", "model", "api_base", "x"]), st.text(min_size=1, max_size=30)))  # fmt: skip
def test_fuzzed_configs_found_secrets_are_all_redacted(data: dict[str, Any]):
    out = redact(data)
    assert find_credentials(out) == [] or all(
        out[k] == REDACTED or REDACTED in out[k] for k in find_credentials(out)
    )
    for key in find_credentials(data):
        assert out[key] != data[key]


def _every_file_bytes(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_training_run_writes_no_credential_anywhere(tmp_path: Path, one_torch_thread: None):
    """The config is built in Python without validation (a bug upstream): every file the run
    writes (run.json, store.db and its WAL, checkpoints, manifests, adapter) is grepped."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "trainer"))
    from trainer_helpers import install_fake_judge, save_tiny_model, tiny_config

    from rankgym.judges.router import RouterConfig, uninstall
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.loop import Trainer

    install_fake_judge()
    model_dir = save_tiny_model(tmp_path / "tiny")
    cfg = validate_config(tiny_config(model_dir, tmp_path / "run", steps=1), TrainConfig)
    router = RouterConfig.model_validate(
        {
            "deployments": [
                {
                    "model_name": "other",
                    "model": "openai/gpt-4o-mini",
                    "params": {"api_key": SECRET},
                }
            ]
        }  # fmt: skip
    )
    trainer = Trainer(cfg.model_copy(update={"router": router}), progress=False)
    try:
        trainer.run()
    finally:
        uninstall()
    files = _every_file_bytes(tmp_path / "run")
    assert any(name.endswith("run.json") for name in files) and any("store.db" in n for n in files)
    leaked = [name for name, data in files.items() if SECRET.encode() in data]
    assert leaked == []
    saved = json.loads((tmp_path / "run" / "run.json").read_text())
    assert saved["config"]["router"]["deployments"][0]["params"]["api_key"] == REDACTED


def test_an_old_store_with_a_key_in_runs_config_shows_it_redacted(tmp_path: Path):
    import sqlite3

    with Store(tmp_path / "s.db") as store:
        store.create_run(name="old", kind="train", config={})
    with sqlite3.connect(tmp_path / "s.db") as c:  # as written before redaction existed
        c.execute("UPDATE runs SET config = ?", (json.dumps({"params": {"api_key": SECRET}}),))
    with Store(tmp_path / "s.db", readonly=True) as store:
        assert store.runs()[0]["config"] == {"params": {"api_key": REDACTED}}
