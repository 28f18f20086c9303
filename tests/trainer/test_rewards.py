"""Training rewards: the blend, the hack penalty, and where the penalty shows (metrics, Runs page)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankgym.trainer.rewards import blend_reward, step_rewards
from rankgym.types import Group, Judgement, Message, Trajectory, TrajectoryScore


def _group(verifiable: list[float], judge: list[float] | None, signals: list[list[str]]) -> Group:
    trajs = [
        Trajectory(
            env_id="e",
            task_id="t",
            messages=[Message(role="user", content="q")],
            verifiable_reward=v,
            hack_signals=s,
        )
        for v, s in zip(verifiable, signals, strict=True)
    ]
    g = Group(run_id="r", env_id="e", task_id="t", trajectories=trajs)
    if judge is not None:
        g.judgement = Judgement(
            group_id=g.id,
            spec_hash="h",
            scores=[
                TrajectoryScore(trajectory_id=t.id, score=s)
                for t, s in zip(trajs, judge, strict=True)
            ],
        )
    return g


def test_blend_needs_both_parts_and_weights_them():
    assert blend_reward(0.2, 1.0, "judge+verifiable", 0.5) == pytest.approx(0.6)
    assert blend_reward(None, 1.0, "judge+verifiable", 0.5) is None
    assert blend_reward(0.2, None, "judge", 0.5) == 0.2
    assert blend_reward(None, 0.0, "verifiable", 0.5) == 0.0


def test_a_flagged_trajectory_gets_its_groups_lowest_reward():
    g = _group([1.0, 0.0, 1.0], [0.9, 0.1, 0.5], [["answer_spam"], [], []])
    on = step_rewards([g], judged=True, kind="judge+verifiable", verifiable_weight=0.5, hack_penalty=True)  # fmt: skip
    assert on.rewards[0] == pytest.approx([0.05, 0.05, 0.75])
    assert (on.hack_flagged, on.hack_penalized) == (1, 1)
    off = step_rewards([g], judged=True, kind="judge+verifiable", verifiable_weight=0.5, hack_penalty=False)  # fmt: skip
    assert off.rewards[0] == pytest.approx([0.95, 0.05, 0.75])
    assert (off.hack_flagged, off.hack_penalized) == (1, 0)


def test_the_judges_own_signals_do_not_lower_the_reward():
    g = _group([0.0, 1.0], [0.9, 0.2], [["judge_top_verifier_failed", "judge_hack_suspected"], []])
    sr = step_rewards([g], judged=True, kind="judge", verifiable_weight=0.5, hack_penalty=True)
    assert sr.rewards[0] == pytest.approx([0.9, 0.2]) and sr.hack_flagged == 0


def test_unjudged_groups_are_counted_and_have_no_reward():
    g = _group([1.0, 0.0], None, [["answer_spam"], []])
    sr = step_rewards([g], judged=True, kind="judge", verifiable_weight=0.5, hack_penalty=True)
    assert sr.rewards == [[None, None]] and sr.unjudged_groups == 1 and sr.hack_penalized == 0


def test_runs_page_shows_the_hack_penalty_per_step(tmp_path: Path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from rankgym.store import Store

    path = tmp_path / "s.db"
    with Store(path) as s:
        s.create_run(name="t", kind="train", run_id="t")
        for step in range(3):
            s.put_groups([_group([1.0, 0.0], None, [["answer_spam"], []]).model_copy(update={"step": step})])  # fmt: skip
            s.log_step("t", step, {"reward_mean": 0.5, "hack_flagged": 2, "hack_penalized": step})
    monkeypatch.setenv("RANKGYM_STORE", str(path))
    app = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
    at = AppTest.from_file(str(app), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("hack_penalty" in c.value for c in at.caption)
