"""Training configs: the samples load, and errors name the bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankgym.config import ConfigError
from rankgym.trainer.config import TrainConfig, load_train_config

SAMPLES = Path(__file__).parents[2] / "samples" / "configs"


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_sample_configs_load(path: Path):
    cfg = load_train_config(path)
    assert isinstance(cfg, TrainConfig)
    assert cfg.env.group_size >= 2


def test_every_builtin_env_has_a_cpu_and_a_gpu_sample():
    names = {p.stem for p in SAMPLES.glob("*.toml")}
    for env in ("tooluse", "email"):
        assert {f"{env}-cpu", f"{env}-gpu"} <= names


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("stepz = 3\n", "unknown key 'stepz'"),
        ("[loss]\ntype = 'ppo'\n", "loss.type"),
        ("[loss]\ntype = 'ppo'\n", "grpo, dr_grpo, dapo"),
        ("[reward]\nkind = 'human'\n", "reward.kind"),
        ("[env]\ngroup_size = 1\n", "env.group_size"),
        ("[optim]\nlr = -1\n", "optim.lr"),
        ("[optim]\nbf16 = 'maybe'\n", "auto, on, off"),
        ("[loss]\nimportance_sampling_level = 'word'\n", "loss.importance_sampling_level"),
        ("[lora]\nrank = 8\n", "unknown key 'lora.rank'"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, toml: str, needle: str):
    p = tmp_path / "c.toml"
    p.write_text(toml)
    with pytest.raises(ConfigError) as e:
        load_train_config(p)
    assert needle in str(e.value)
    assert str(p) in str(e.value)


def test_store_defaults_to_out_dir(tmp_path: Path):
    p = tmp_path / "c.toml"
    p.write_text("out_dir = 'x/y'\n")
    assert load_train_config(p).store_path == str(Path("x/y/store.db"))
