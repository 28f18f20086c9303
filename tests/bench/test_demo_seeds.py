"""bench/demo_seeds.py: seed lists, and a finished run is reused only for the same demo arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_loader import load_script

seeds = load_script("bench/demo_seeds.py")


def test_seed_lists():
    assert seeds.seeds_of("0-4") == [0, 1, 2, 3, 4]
    assert seeds.seeds_of("0,3,5-6") == [0, 3, 5, 6]


def _finished(tmp_path: Path, demo_args: list[str] | None) -> Path:
    summary = {"trained_success": 0.5, "sft_success": 0.3}
    if demo_args is not None:
        summary["demo_args"] = demo_args
    (tmp_path / "seed-0.json").write_text(json.dumps(summary))
    return tmp_path


def test_a_finished_run_of_the_same_arm_is_read_not_rerun(tmp_path):
    out = _finished(tmp_path, ["--chain-credit", "0.3"])
    got = seeds.run_one(tmp_path / "no-snapshot", out, 0, 2, ["--chain-credit", "0.3"])
    assert got["trained_success"] == 0.5


def test_a_finished_run_of_another_arm_is_refused_by_name(tmp_path):
    out = _finished(tmp_path, ["--steps", "10"])
    with pytest.raises(RuntimeError, match="give this one its own --out") as e:
        seeds.run_one(tmp_path / "no-snapshot", out, 0, 2, ["--chain-credit", "0.3"])
    assert "--steps 10" in str(e.value) and "seed-0.json" in str(e.value)


def test_a_run_from_before_the_arguments_were_recorded_is_read(tmp_path):
    out = _finished(tmp_path, None)
    assert seeds.run_one(tmp_path / "no-snapshot", out, 0, 2, [])["sft_success"] == 0.3
