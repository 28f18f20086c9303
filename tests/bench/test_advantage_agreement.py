"""bench/advantage_agreement.py: the monitor's signal row (tests/trainer/test_monitor_signal.py)
for three rules over a finished run's stored judgements, step by step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_loader import load_script

from rankgym.judges.spec import default_spec
from rankgym.store import Store
from rankgym.types import Group, Judgement, Message, Trajectory, TrajectoryScore

adv = load_script("bench/advantage_agreement.py")


def test_a_store_read_step_by_step_with_fitted_cuts(tmp_path: Path):
    store = Store(tmp_path / "s.db")
    spec = default_spec("fakejudge/m", rubric="r")
    store.put_judge_spec(spec)
    for step, (scores, rewards) in enumerate([([0.9, 0.6, 0.1], [1.0, None, 0.0]),
                                               ([0.7, 0.2, 0.5], [0.0, 1.0, 0.0])]):  # fmt: skip
        trs = [Trajectory(env_id="e", task_id=f"t{step}", verifiable_reward=r,
                          truncated=r is None, messages=[Message(role="user", content=str(i))])
               for i, r in enumerate(rewards)]  # fmt: skip
        g = Group(run_id="r", step=step, env_id="e", task_id=f"t{step}", trajectories=trs)
        store.put_group(g)
        store.put_judgement(Judgement(group_id=g.id, spec_hash=spec.spec_hash, scores=[
            TrajectoryScore(trajectory_id=t.id, score=s) for t, s in zip(trs, scores, strict=True)]))  # fmt: skip
    jt = tmp_path / "judge_train"
    jt.mkdir()
    (jt / "stage.json").write_text(json.dumps({"cut": {"cut": 0.8}}))
    (jt / "refreshes.json").write_text(json.dumps([{"cut": None}]))  # keeps 0.8
    cuts = adv.fitted_cuts(jt)
    assert cuts == [0.8, 0.8]
    rows = adv.report(store, "r", cuts)
    store.close()
    # step 1: the truncated episode is a failure; the judge's top passes and is the verifier's
    assert rows[0]["cut"] == pytest.approx(1.0) and rows[0]["top1"] == pytest.approx(1.0)
    # step 2: the judge's top (0.7) failed; nothing reaches the cut
    assert rows[1]["cut"] is None and rows[1]["top1"] == pytest.approx(-0.5)
    assert rows[1]["graded"] < 0 and rows[1]["threshold"] == 0.8
