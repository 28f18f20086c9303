"""Data-parallel training: ``accelerate launch`` with two CPU processes (gloo) on the tiny model.

Both ranks must end with the same adapter, and it must be the adapter a single process trains
from the same config (up to float summation order): the update is the same update, split.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file
from trainer_helpers import install_fake_judge, save_tiny_model, tiny_config, to_toml

from rankgym.cli import main

ROOT = Path(__file__).parents[2]
LAUNCHER = """import sys
sys.path[:0] = [{helpers!r}, {tests!r}]  # trainer_helpers, and the tests/fakes it imports
from trainer_helpers import install_fake_judge
install_fake_judge()
from rankgym.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _adapter(out: Path) -> dict:
    return load_file(str(out / "adapter" / "adapter_model.safetensors"))


@pytest.mark.skipif(shutil.which("accelerate", path=str(Path(sys.executable).parent)) is None, reason="accelerate not installed")  # fmt: skip
def test_two_processes_train_the_same_adapter_as_one(tmp_path: Path, one_torch_thread):
    model = save_tiny_model(tmp_path / "tiny")
    cfg = tmp_path / "train.toml"
    cfg.write_text(to_toml(tiny_config(model, tmp_path / "unused", steps=2, optim={"micro_batch_size": 1})))  # fmt: skip
    install_fake_judge()
    assert (
        main(["train", "--config", str(cfg), "--out", str(tmp_path / "one"), "--json", "-q"]) == 0
    )
    launcher = tmp_path / "launch_rankgym.py"
    launcher.write_text(
        LAUNCHER.format(helpers=str(Path(__file__).parent), tests=str(Path(__file__).parents[1]))
    )
    accelerate = str(Path(sys.executable).parent / "accelerate")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RANKGYM_THREADS": "1"}
    run = subprocess.run(
        [accelerate, "launch", "--config_file", str(ROOT / "samples" / "accelerate-cpu-2proc.yaml"),
         str(launcher), "train", "--config", str(cfg), "--out", str(tmp_path / "two"), "--json", "-q"],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    one, two = _adapter(tmp_path / "one"), _adapter(tmp_path / "two")
    other = _adapter(tmp_path / "two" / "ranks" / "rank1")
    assert set(one) == set(two) == set(other)
    for k in one:
        assert (two[k] == other[k]).all(), f"ranks disagree on {k}"
        delta = (one[k] - two[k]).abs().max().item()
        scale = one[k].abs().max().item() or 1.0
        assert delta <= 1e-3 * scale, f"{k}: 2-process adapter differs by {delta} (scale {scale})"
