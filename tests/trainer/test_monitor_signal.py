"""The monitor's signal row: the cosine between the judge reward's group-centred advantages and
the verifier's, per step and over the run."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankgym.step_metrics import StepMetrics
from rankgym.trainer.config import MonitorSection
from rankgym.trainer.demo import monitor_fields, monitor_sentence
from rankgym.trainer.monitor import JudgeMonitor
from rankgym.trainer.monitor_signal import judge_signal, signal_unit
from rankgym.trainer.step_report import monitor_line
from rankgym.types import Group, Judgement, Message, Trajectory, TrajectoryScore


def _group(rows: list[tuple[float | None, float]], gid: str = "g", *, truncated: int = -1,
           error: int = -1) -> Group:  # fmt: skip
    """rows: (verifiable reward, judge score); ``truncated`` / ``error``: that row's episode."""
    trajs = [
        Trajectory(
            id=f"{gid}-t{i}",
            env_id="e",
            task_id="t",
            verifiable_reward=v,
            truncated=i == truncated,
            error="boom" if i == error else None,
            messages=[Message(role="user", content=f"q{i}")],
        )  # fmt: skip
        for i, (v, _) in enumerate(rows)
    ]
    scores = [TrajectoryScore(trajectory_id=t.id, score=s) for t, (_, s) in zip(trajs, rows, strict=True)]  # fmt: skip
    return Group(id=gid, env_id="e", task_id="t", trajectories=trajs,
                 judgement=Judgement(group_id=gid, spec_hash="h", scores=scores))  # fmt: skip


def _signal(groups: list[Group], cut: float | None = None) -> float | None:
    return judge_signal([u for g in groups if (u := signal_unit(g, 0, cut)) is not None])


def test_a_verdict_that_matches_the_verifier_is_plus_one_and_a_reversed_one_minus_one():
    g = _group([(1.0, 0.9), (0.0, 0.2), (0.0, 0.1)])
    assert _signal([g], cut=0.5) == pytest.approx(1.0)
    assert _signal([g]) == pytest.approx(0.99, abs=0.01)  # graded: the same direction, nearly
    assert _signal([_group([(1.0, 0.1), (0.0, 0.9)])], cut=0.5) == pytest.approx(-1.0)


def test_a_cut_above_every_score_is_no_signal_and_a_judge_splitting_a_tied_group_lowers_it():
    g = _group([(1.0, 0.6), (0.0, 0.3)])
    assert _signal([g], cut=0.8) is None  # every score below the cut: nothing to learn
    tied = _group([(0.0, 0.9), (0.0, 0.1)], "tied")  # the verifier ties; the judge does not
    assert _signal([g, tied], cut=0.5) == pytest.approx(2**-0.5)
    assert _signal([tied], cut=0.5) == 0.0  # pushes where the verifier has no push at all


def test_a_truncated_episode_is_a_failure_and_an_errored_one_is_left_out():
    g = _group([(None, 0.9), (1.0, 0.2), (0.0, 0.5)], truncated=0)
    # the judge passed the cut-off episode and the failure, and failed the one pass
    assert _signal([g], cut=0.4) == pytest.approx(-1.0)
    e = _group([(1.0, 0.1), (1.0, 0.8), (0.0, 0.2)], error=0)  # errored row: not a label
    assert _signal([e], cut=0.5) == pytest.approx(1.0)
    assert signal_unit(_group([(1.0, 0.9)]), 0) is None  # one labelled row: no group


@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, None]), st.floats(0, 1)), min_size=2, max_size=8),
       st.none() | st.floats(0, 1))  # fmt: skip
def test_the_signal_is_a_cosine(rows, cut):
    s = _signal([_group(rows)], cut)
    assert s is None or -1 - 1e-9 <= s <= 1 + 1e-9


def test_the_monitor_reports_it_per_step_and_over_the_run_at_each_steps_cut():
    mon = JudgeMonitor(MonitorSection(resamples=100), "judge")
    good = _group([(1.0, 0.9), (0.0, 0.2)], "a")
    m0 = mon.observe(0, [good], {}, cut=0.5).metrics()
    assert m0["judge_signal"] == pytest.approx(1.0) and m0["judge_signal_run"] == pytest.approx(1.0)
    bad = _group([(1.0, 0.3), (0.0, 0.7)], "b")
    m1 = mon.observe(1, [bad], {}, cut=0.5).metrics()
    assert m1["judge_signal"] == pytest.approx(-1.0) and m1["judge_signal_run"] == pytest.approx(
        0.0
    )
    assert mon.observe(1, [bad], {}, cut=0.95).metrics()["judge_signal"] is None  # step replaced
    summary = mon.summary()
    # the push the verifier made at step 1 and the judge missed (no signal) counts against it
    assert summary["signal"] == pytest.approx(2**-0.5)
    assert monitor_fields(summary)["judge_signal"] == summary["signal"]
    assert "its reward made +0.71 of the verifier's push toward success" in monitor_sentence(
        summary
    )
    m = StepMetrics.from_dict({"policy": "p", **mon.observe(2, [good], {}).metrics()})
    assert monitor_line(m).endswith(f"signal {m.judge_signal_run:+.2f}")


def test_a_training_step_measures_the_judge_at_the_cut_its_reward_reads():
    from types import SimpleNamespace

    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.monitor_step import watch_judge

    g = _group([(1.0, 0.6), (0.0, 0.4), (0.0, 0.45)])
    for cut, expected in ((0.5, 1.0), (None, _signal([g]))):
        cfg = TrainConfig.model_validate({"reward": {"kind": "judge"}})
        trainer = SimpleNamespace(
            cfg=cfg, monitor=JudgeMonitor(cfg.monitor, "judge"),
            reward=SimpleNamespace(judge_threshold=cut),
            store=SimpleNamespace(human_rankings=lambda **_k: []),
        )  # fmt: skip
        assert watch_judge(trainer, 0, [g])["judge_signal"] == pytest.approx(expected)
    assert _signal([g]) < 0.99  # graded, the same group keeps less of the verifier's push


def test_a_resumed_run_refills_the_signal_at_each_logged_steps_cut():
    from types import SimpleNamespace

    from rankgym.trainer.monitor_step import restore

    g = _group([(1.0, 0.6), (0.0, 0.4), (0.0, 0.45)])
    store = SimpleNamespace(get_group=lambda gid, _h=None: g, human_rankings=lambda **_k: [])
    for cuts, expected in (({0: 0.5}, 1.0), ({}, _signal([g]))):
        mon = JudgeMonitor(MonitorSection(resamples=100), "judge")
        restore(mon, store, [(0, {"group_ids": [g.id]})], cuts)
        assert mon.summary()["signal"] == pytest.approx(expected)


def test_against_the_verifiers_pass_fail_partial_credit_is_a_failure():
    g = _group([(1.0, 0.9), (0.5, 0.1), (0.0, 0.5)])  # 0.5: partial credit, not a success
    assert _signal([g], cut=0.4) < 1.0  # against the reward, the verdict misses the half-credit
    assert judge_signal([signal_unit(g, 0, 0.4, pass_at=1.0)]) == pytest.approx(0.5)
