"""bench/pool_ablation.py: the paired gains it prints are the counts' differences, and the
evaluations it refuses are named."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from script_loader import load_script

pool = load_script("bench/pool_ablation.py")


def _write(path: Path, tables: dict) -> str:
    path.write_text(json.dumps({"tables": tables}))
    return str(path)


def test_pooled_points_are_the_success_differences_over_all_episodes():
    # seed A: 2 tasks x 5 episodes; seed B: 1 task x 5. sft 3/15, verifiable 9/15, arm 6/15.
    a = {"sft": {"t1": [1, 0, 0, 0, 0], "t2": [1, 0, 0, 0, 0]},
         "verifiable": {"t1": [1, 1, 1, 0, 0], "t2": [1, 1, 0, 0, 0]},
         "arm": {"t1": [1, 1, 0, 0, 0], "t2": [1, 0, 0, 0, 0]}}  # fmt: skip
    b = {"sft": {"t9": [1, 0, 0, 0, 0]}, "verifiable": {"t9": [1, 1, 1, 1, 0]},
         "arm": {"t9": [1, 1, 1, 0, 0]}}  # fmt: skip
    out = pool.pooled([a, b], "sft", "verifiable", "arm", n_boot=500)
    assert out["n"] == 15
    assert out["arm - sft"]["points"] == pytest.approx(100 * 3 / 15, abs=0.05)
    assert out["verifiable - sft"]["points"] == pytest.approx(100 * 6 / 15, abs=0.05)
    assert out["arm - verifiable"]["points"] == pytest.approx(-100 * 3 / 15, abs=0.05)
    assert out["ratio"]["value"] == 0.5
    lo, hi = out["arm - sft"]["ci95"]
    assert lo <= out["arm - sft"]["points"] <= hi


outcomes = st.lists(st.integers(0, 1), min_size=3, max_size=3)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["t1", "t2", "t3", "t4"]), st.tuples(outcomes, outcomes), min_size=1))  # fmt: skip
def test_an_arm_identical_to_its_peer_has_ratio_one_and_no_difference(tasks):
    table = {"sft": {k: v[0] for k, v in tasks.items()},
             "verifiable": {k: v[1] for k, v in tasks.items()},
             "arm": {k: v[1] for k, v in tasks.items()}}  # fmt: skip
    out = pool.pooled([table], "sft", "verifiable", "arm", n_boot=200)
    assert out["arm - verifiable"] == {"points": 0.0, "ci95": [0.0, 0.0]}
    assert out["arm - sft"] == out["verifiable - sft"]
    if out["verifiable - sft"]["points"]:
        assert out["ratio"]["value"] == 1.0
    else:  # no gain to divide by: no ratio, and no interval (it once crashed here)
        assert math.isnan(out["ratio"]["value"])


def test_refuses_an_evaluation_without_tables_or_policy_or_with_uneven_episodes(tmp_path):
    with pytest.raises(SystemExit, match="no per-task tables"):
        pool._load(_write(tmp_path / "a.json", {}), ["sft", "verifiable", "arm"])
    path = _write(tmp_path / "b.json", {"sft": {"t": [1]}, "verifiable": {"t": [0]}})
    with pytest.raises(SystemExit, match=r"no policy \['arm'\]"):
        pool._load(path, ["sft", "verifiable", "arm"])
    path = _write(tmp_path / "c.json", {"sft": {"t": [1, 0]}, "verifiable": {"t": [0]}, "arm": {"t": [0, 1]}})  # fmt: skip
    with pytest.raises(SystemExit, match=r"different numbers of episodes on task\(s\) \['t'\]"):
        pool._load(path, ["sft", "verifiable", "arm"])


def test_main_prints_each_file_and_the_pool(tmp_path, monkeypatch, capsys):
    t = {"sft": {"t": [0, 0, 1]}, "verifiable": {"t": [1, 1, 1]}, "arm": {"t": [1, 0, 1]}}
    files = [_write(tmp_path / f"eval-seed{i}.json", t) for i in (1, 2)]
    monkeypatch.setattr(sys, "argv", ["pool_ablation.py", *files, "--arm", "arm"])
    pool.main()
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {*files, "pooled"}
    assert report["pooled"]["n"] == 6 and report["pooled"]["ratio"]["value"] == 0.5
