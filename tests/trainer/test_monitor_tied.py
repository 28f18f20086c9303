"""The monitor's tied-pair row: the judge's lean to the shorter of two verifier-tied trajectories."""

from __future__ import annotations

from rankgym.step_metrics import StepMetrics
from rankgym.trainer.config import MonitorSection
from rankgym.trainer.monitor import JudgeMonitor
from rankgym.trainer.monitor_tied import tied_shorter, tied_unit
from rankgym.trainer.step_report import monitor_line
from rankgym.types import Group, Judgement, Message, Trajectory, TrajectoryScore


def _group(rows: list[tuple[float | None, str, float]], gid: str = "g", truncated: int = -1) -> Group:  # fmt: skip
    """rows: (verifiable reward, assistant text, judge score); ``truncated``: that row was cut."""
    trajs = [
        Trajectory(id=f"{gid}-t{i}", env_id="e", task_id="t", verifiable_reward=v,
                   truncated=i == truncated,
                   messages=[Message(role="user", content="q"), Message(role="assistant", content=text)])  # fmt: skip
        for i, (v, text, _) in enumerate(rows)
    ]  # fmt: skip
    scores = [TrajectoryScore(trajectory_id=t.id, score=s) for t, (_, _, s) in zip(trajs, rows, strict=True)]  # fmt: skip
    return Group(id=gid, env_id="e", task_id="t", trajectories=trajs,
                 judgement=Judgement(group_id=gid, spec_hash="h", scores=scores))  # fmt: skip


def test_tied_pairs_count_where_the_judge_prefers_the_shorter_and_judge_ties_count_half():
    g = _group([(0.0, "no", 0.9), (0.0, "a longer wrong try", 0.1), (0.0, "mid try", 0.1),
                (1.0, "right", 0.5)])  # fmt: skip
    u = tied_unit(g, step=0)
    # tied (both 0.0): no/longer (shorter wins), no/mid (shorter wins), longer/mid (judge tie)
    assert u is not None and u.pairs == 3 and u.shorter == 2.5
    assert tied_shorter([u]) == (3, 2.5 / 3)


def test_a_constant_reward_group_counts_and_a_truncated_episode_is_a_failure():
    g = _group([(None, "still calling tools, never answered", 0.2), (0.0, "7", 0.8)], truncated=0)
    u = tied_unit(g, step=1)
    assert u is not None and u.pairs == 1 and u.shorter == 1.0
    unknown = _group([(None, "x", 0.2), (0.0, "longer", 0.8)])  # no reward and not cut: skipped
    assert tied_unit(unknown, step=1) is None


def test_the_monitor_reports_the_row_per_step_and_over_the_run_in_metrics_and_step_line():
    mon = JudgeMonitor(MonitorSection(resamples=100), "judge")
    shorter = _group([(0.0, "no", 0.9), (0.0, "a long wrong answer", 0.1), (1.0, "ok", 0.95)], "a")
    longer = _group([(0.0, "no", 0.2), (0.0, "a long wrong answer", 0.8)], "b")
    m0 = mon.observe(0, [shorter], {}).metrics()
    assert m0["monitor_tied_pairs"] == 1 and m0["judge_tied_shorter"] == 1.0
    m1 = mon.observe(1, [longer], {}).metrics()
    assert m1["judge_tied_shorter"] == 0.0 and m1["monitor_tied_pairs_run"] == 2
    assert m1["judge_tied_shorter_run"] == 0.5
    assert mon.summary()["tied_shorter"] == 0.5 and mon.summary()["tied_pairs"] == 2
    line = monitor_line(StepMetrics.from_dict({"policy": "p@1", **m1}))
    assert "tied-shorter 0.50 signal " in line
    assert StepMetrics.from_dict({"policy": "p", **m1}).to_dict()["judge_tied_shorter_run"] == 0.5
