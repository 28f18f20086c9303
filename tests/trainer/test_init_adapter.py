"""`rankgym train --init-adapter DIR` / `[policy] adapter`: GRPO starts from an SFT adapter, and a
time-capped SFT says it stopped on its cap (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from trainer_helpers import install_fake_judge, save_tiny_model, tiny_config, to_toml

from rankgym.cli import main
from rankgym.config import validate_config
from rankgym.trainer.config import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")
HARD = {"difficulty": "hard", "families": ["lookup"]}


@pytest.fixture
def sft_adapter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, Path]:
    """A train config dict for the tiny model and an adapter `rankgym sft` wrote for it."""
    model_dir = save_tiny_model(tmp_path / "tiny")
    install_fake_judge()
    cfg = tiny_config(model_dir, tmp_path / "ignored", steps=1)
    cfg["env"]["kwargs"] = HARD
    cfg["env"]["max_turns"] = 4
    toml = tmp_path / "sft.toml"
    toml.write_text(to_toml({**cfg, "sft": {"steps": 2, "batch_size": 2, "tasks": 4}}))
    out = tmp_path / "sft"
    assert main(["sft", "--config", str(toml), "--out", str(out), "--json", "-q"]) == 0
    capsys.readouterr()
    return cfg, out


def _weights(model) -> dict[str, torch.Tensor]:
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model)


def test_train_with_init_adapter_starts_from_the_sft_adapter_and_skips_its_own_sft(
    tmp_path: Path, sft_adapter: tuple[dict, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, adapter = sft_adapter
    toml = tmp_path / "train.toml"  # an [sft] section too: --init-adapter replaces it
    toml.write_text(to_toml({**cfg, "sft": {"steps": 50, "batch_size": 2, "tasks": 4}}))
    out = tmp_path / "run"
    argv = ["train", "--config", str(toml), "--out", str(out), "--init-adapter", str(adapter)]
    assert main([*argv, "--json", "-q"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["init_adapter"] == str(adapter) and summary["steps_run"] == 1
    assert summary["sft"] is None and not (out / "sft").exists()  # no second SFT


def test_policy_adapter_key_loads_the_adapter_before_the_first_step(
    tmp_path: Path, sft_adapter: tuple[dict, Path]
) -> None:
    from safetensors.torch import load_file

    from rankgym.trainer.loop import Trainer

    cfg, adapter = sft_adapter
    cfg["policy"]["adapter"] = str(adapter)
    t = Trainer(validate_config(cfg, TrainConfig), out_dir=str(tmp_path / "run"), progress=False)
    t.setup()
    try:
        saved = load_file(str(adapter / "adapter_model.safetensors"))
        live = _weights(t.model)
        assert saved and all(torch.equal(live[k], v) for k, v in saved.items())
        assert any(v.abs().sum() > 0 for k, v in saved.items() if "lora_B" in k)  # trained
    finally:
        t.store.close()


def test_init_adapter_without_an_adapter_is_a_clear_error(
    tmp_path: Path, sft_adapter: tuple[dict, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, _ = sft_adapter
    toml = tmp_path / "train.toml"
    toml.write_text(to_toml(cfg))
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = ["train", "--config", str(toml), "--out", str(tmp_path / "run")]
    assert main([*argv, "--init-adapter", str(empty)]) != 0
    err = capsys.readouterr().err
    assert "holds no adapter_config.json" in err and str(empty) in err
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_sft_says_when_it_stopped_on_its_time_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model_dir = save_tiny_model(tmp_path / "tiny")
    cfg = tiny_config(model_dir, tmp_path / "ignored", steps=1)
    cfg["env"]["kwargs"] = HARD
    cfg["env"]["max_turns"] = 4
    toml = tmp_path / "sft.toml"
    toml.write_text(to_toml({**cfg, "sft": {"steps": 500, "batch_size": 2, "tasks": 4}}))
    argv = ["sft", "--config", str(toml), "--out", str(tmp_path / "sft"), "--max-minutes", "1e-6"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "sft: stopped on its time cap (max_minutes = 1e-06) after 1 of 500 steps" in out
    meta = json.loads((tmp_path / "sft" / "meta.json").read_text())["sft"]
    assert meta["stopped_on_time_cap"] and meta["steps"] == 1 and meta["steps_planned"] == 500


def test_judge_train_says_when_it_stopped_on_its_time_cap() -> None:
    from rankgym.trainer.judge_pipeline import time_cap_line

    line = time_cap_line({"max_train_seconds": 90.0, "train_steps": 7, "planned_steps": 40})
    assert (
        line == "judge-train: stopped on its time cap (max_train_seconds = 90) after 7 of 40 steps"
    )
