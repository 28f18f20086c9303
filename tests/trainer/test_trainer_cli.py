"""`rankgym train` and `rankgym eval` end to end on a tiny random model (fake judge)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from peft import PeftModel
from trainer_helpers import install_fake_judge, save_tiny_model, tiny_config, to_toml

from rankgym.cli import main
from rankgym.model import load_causal_lm
from rankgym.store import Store

SAMPLES = Path(__file__).parents[2] / "samples" / "configs"


def test_train_then_eval(tmp_path: Path, capsys):
    model_dir = save_tiny_model(tmp_path / "tiny")
    install_fake_judge()
    cfg = tmp_path / "train.toml"
    cfg.write_text(to_toml(tiny_config(model_dir, tmp_path / "ignored", steps=2)))
    out = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--out", str(out), "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps_run"] == 2 and Path(summary["adapter"]) == out / "adapter"

    # a standard peft adapter
    base, _ = load_causal_lm(str(model_dir))
    PeftModel.from_pretrained(base, str(out / "adapter"))

    # metrics per step, including the ones the issue names
    store = Store(out / "store.db", readonly=True)
    steps = store.steps(summary["run_id"])
    assert [s["step"] for s in steps] == [0, 1]
    m = steps[0]["metrics"]
    for key in (
        "reward_mean", "reward_std", "judge_score_mean", "verifiable_mean", "judge_input_tokens",
        "judge_cost_usd", "judge_latency_s_mean", "kl", "clip_fraction", "update_tokens_per_s",
        "zero_variance_groups", "no_signal", "time_rollout_s", "time_judge_s", "time_update_s",
    ):  # fmt: skip
        assert key in m, key
    assert m["policy"] == "tiny@step0" and steps[1]["metrics"]["policy"] == "tiny@step1"
    assert set(m["threads"]) == {"rollout", "judge", "update"}  # re-chosen before each phase
    turns = {tu.policy for g in (store.get_group(i) for i in store.group_ids(step=1)) for t in g.trajectories for tu in t.turns}  # fmt: skip
    assert turns == {"tiny@step1"}

    # resuming a finished run does nothing and says so
    assert main(["train", "--config", str(cfg), "--out", str(out), "--resume", "--json", "-q"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["steps_run"] == 0 and again["start_step"] == 2

    rc = main(["eval", "--adapter", str(out / "adapter"), "--tasks", "3", "--samples", "2", "--json", "-q", "--env-kwargs", "difficulty=easy families=calc"])  # fmt: skip
    assert rc == 0
    ev = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert ev["env"] == "rankgym/ToolUse-v0" and ev["env_kwargs"]["difficulty"] == "easy"
    assert ev["n"] == 6 and 0 <= ev["base_ci"][0] <= ev["base_success"] <= ev["base_ci"][1] <= 1
    assert "trained_success" in ev and len(ev["difference_ci"]) == 2


def test_train_errors_are_user_errors(tmp_path: Path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[loss]\ntype = 'ppo'\n")
    assert main(["train", "--config", str(bad)]) == 2
    assert "loss.type" in capsys.readouterr().err
    assert main(["eval", "--adapter", str(tmp_path)]) == 2
    assert "--env is required" in capsys.readouterr().err
    assert main(["eval", "--adapter", str(tmp_path), "--env", "rankgym/ToolUse-v0"]) == 2
    assert "adapter_config.json" in capsys.readouterr().err
    for flag, value in (("--samples", "100000000"), ("--tasks", "0"), ("--max-new-tokens", "-5")):
        with pytest.raises(SystemExit) as e:
            main(["eval", "--adapter", str(tmp_path), flag, value])
        assert e.value.code == 2 and flag in capsys.readouterr().err
    assert main(["eval", "--adapter", str(tmp_path), "--env-kwargs", "difficulty"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    huge = tmp_path / "huge.toml"
    huge.write_text("[env]\ngroup_size = 100000000\n")
    assert main(["train", "--config", str(huge)]) == 2
    assert "env.group_size" in capsys.readouterr().err


def test_train_preflight_fails_before_writing_anything(tmp_path: Path, capsys, monkeypatch):
    """A GPU config on a CPU-only torch, or an API judge without its key: clear error, no run dir."""
    import torch

    base = tomllib.loads((SAMPLES / "tooluse-gpu.toml").read_text())
    out = tmp_path / "run"
    if not torch.cuda.is_available():
        cfg = tmp_path / "gpu.toml"
        cfg.write_text(to_toml(base))
        assert main(["train", "--config", str(cfg), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "policy.device" in err and "'cuda'" in err and "cpu" in err
        assert not out.exists()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base["policy"]["device"] = "cpu"
    cfg = tmp_path / "nokey.toml"
    cfg.write_text(to_toml(base))
    assert main(["train", "--config", str(cfg), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "judge.model" in err and "OPENAI_API_KEY" in err
    assert not out.exists()
