"""Training rewards: the blend, the hack penalty, and where the penalty shows (metrics, Runs page)."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trainer_helpers import runs_page

from rankgym.config import ConfigError, validate_config
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.grpo import UpdateStats, group_advantages
from rankgym.trainer.rewards import (
    BlendedReward,
    JudgeReward,
    StepMetrics,
    StepRewards,
    blend_reward,
    build_reward,
    judge_verdict,
)
from rankgym.trainer.step_report import history_summary, step_line, step_metrics
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
    on = BlendedReward(verifiable_weight=0.5, hack_penalty=True).score([g])
    assert on.rewards[0] == pytest.approx([0.05, 0.05, 0.75])
    assert (on.hack_flagged, on.hack_penalized) == (1, 1)
    off = BlendedReward(verifiable_weight=0.5, hack_penalty=False).score([g])
    assert off.rewards[0] == pytest.approx([0.95, 0.05, 0.75])
    assert (off.hack_flagged, off.hack_penalized) == (1, 0)


def test_the_judges_own_signals_do_not_lower_the_reward():
    g = _group([0.0, 1.0], [0.9, 0.2], [["judge_top_verifier_failed", "judge_hack_suspected"], []])
    sr = JudgeReward().score([g])
    assert sr.rewards[0] == pytest.approx([0.9, 0.2]) and sr.hack_flagged == 0


def test_unjudged_groups_are_counted_and_have_no_reward():
    g = _group([1.0, 0.0], None, [["answer_spam"], []])
    sr = JudgeReward().score([g])
    assert sr.rewards == [[None, None]] and sr.unjudged_groups == 1 and sr.hack_penalized == 0


def test_a_judge_threshold_trains_on_the_verdict_and_the_monitor_keeps_the_graded_score():
    cfg = validate_config({"reward": {"kind": "judge", "judge_threshold": 0.5}}, TrainConfig)
    reward = build_reward(cfg.reward)
    split = _group([0.0, 0.0, 1.0, 0.0], [0.9, 0.5, 0.45, 0.1], [[], [], [], []])
    one_side = _group([0.0, 0.0, 0.0], [0.3, 0.1, 0.2], [[], [], []])  # all "no": no signal
    sr = reward.score([split, one_side])
    assert sr.rewards == [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert sr.judge_scores == [0.9, 0.5, 0.45, 0.1, 0.3, 0.1, 0.2]  # what the monitor reads
    adv = group_advantages(sr.rewards, "batch")
    assert any(adv.values[0]) and not any(adv.values[1])
    graded = build_reward(cfg.reward.model_copy(update={"judge_threshold": None})).score([one_side])
    assert any(group_advantages(graded.rewards, "batch").values[0])  # the order among "no"s


def test_a_blend_with_a_judge_threshold_blends_the_verdict():
    cfg = validate_config({"reward": {"kind": "judge+verifiable", "verifiable_weight": 0.25,
                                      "judge_threshold": 0.7}}, TrainConfig)  # fmt: skip
    sr = build_reward(cfg.reward).score([_group([1.0, 0.0], [0.6, 0.7], [[], []])])
    assert sr.rewards[0] == pytest.approx([0.25, 0.75])


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high"])
def test_a_judge_threshold_outside_0_to_1_is_refused_naming_the_key(bad):
    with pytest.raises(ConfigError, match="judge_threshold"):
        validate_config({"reward": {"kind": "judge", "judge_threshold": bad}}, TrainConfig)


def test_a_judge_threshold_without_a_judge_is_refused():
    with pytest.raises(ConfigError, match="judge_threshold.*runs no judge"):
        validate_config({"reward": {"kind": "verifiable", "judge_threshold": 0.5}}, TrainConfig)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_the_verdict_is_0_or_1_and_never_reverses_an_order(a, b, cut):
    va, vb = judge_verdict(a, cut), judge_verdict(b, cut)
    assert va in (0.0, 1.0) and vb in (0.0, 1.0)
    assert (va - vb) * (a - b) >= 0
    assert judge_verdict(None, cut) is None


def test_runs_page_shows_the_hack_penalty_per_step(tmp_path: Path, monkeypatch):
    from rankgym.store import Store

    path = tmp_path / "s.db"
    with Store(path) as s:
        s.create_run(name="t", kind="train", run_id="t")
        for step in range(3):
            s.put_groups([_group([1.0, 0.0], None, [["answer_spam"], []]).model_copy(update={"step": step})])  # fmt: skip
            s.log_step("t", step, {"reward_mean": 0.5, "hack_flagged": 2, "hack_penalized": step})
    at = runs_page(path, monkeypatch)
    assert any("hack_penalty" in c.value for c in at.caption)


# A row exactly as the dict-building step_metrics (before StepMetrics) wrote it to the store,
# with a vLLM adapter sync's stats and an evaluation.
OLD_ROW = (
    '{"policy": "m@step0", "reward_kind": "judge+verifiable", "reward_mean": 0.75, '
    '"reward_std": 0.25, "judge_score_mean": 0.55, "judge_score_std": 0.35, '
    '"verifiable_mean": 0.5, "verifiable_std": 0.5, "success_rate": 0.5, "groups": 1, '
    '"trajectories": 2, "zero_variance_groups": 0, "unscored_trajectories": 0, '
    '"unjudged_groups": 1, "hack_flagged": 2, "hack_penalized": 1, "no_signal": false, '
    '"trained_trajectories": 2, "loss": 0.12, "grad_norm": 1.5, "clip_fraction": 0.1, '
    '"kl": 0.003, "lr": 1e-05, "update_tokens": 100, "update_tokens_per_s": 50.0, '
    '"rollout_completion_tokens": 60, "rollout_tokens_per_s": 20.0, "judge_input_tokens": 5, '
    '"judge_output_tokens": 6, "judge_cost_usd": null, "judge_latency_s_mean": 0.4, '
    '"judge_calls": 2, "time_rollout_s": 3.0, "time_judge_s": 1.0, "time_update_s": 2.0, '
    '"reused_rollout": false, "threads": {"rollout": 1}, "bf16": false, "adapter": "x", '
    '"adapter_sync_s": 0.1, "time_step_s": 7.0, "time_checkpoint_s": 0.5, "checkpoint": "/x", '
    '"eval": {"tag": "step1"}}'
)


def _metrics() -> StepMetrics:
    sr = StepRewards([[0.5, 1.0]], [0.2, 0.9], [1.0, 0.0], [0.5, 1.0], 1, 2, 1)
    update = UpdateStats(loss=0.12, grad_norm=1.5, clip_fraction=0.1, kl=0.003, trained_trajectories=2, tokens=100, seconds=2.0)  # fmt: skip
    timing = {"reused_rollout": False, "rollout_s": 3.0, "rollout_completion_tokens": 60, "judge_s": 1.0, "threads": {"rollout": 1},
              "judge": {"input_tokens": 5, "output_tokens": 6, "cost_usd": None, "latency_s_mean": 0.4, "calls": 2}}  # fmt: skip
    return step_metrics(
        policy="m@step0", reward_kind="judge+verifiable", rewards=sr, n_groups=1,
        n_trajectories=2, success_threshold=1.0, zero_variance_groups=0, unscored=0,
        update=update, lr=1e-5, timing=timing, bf16=False,
    )  # fmt: skip


def test_step_metrics_serialise_to_the_bytes_the_old_dict_code_stored():
    m = replace(
        _metrics(),
        extra={"adapter": "x", "adapter_sync_s": 0.1},
        time_step_s=7.0,
        time_checkpoint_s=0.5,
        checkpoint="/x",
        eval={"tag": "step1"},
    )
    assert json.dumps(m.to_dict()) == OLD_ROW
    # before the checkpoint is written, the late keys are simply not there yet
    assert "checkpoint" not in replace(_metrics(), time_step_s=7.0).to_dict()


def test_a_store_row_written_by_the_old_dict_code_reads_back_into_the_record(tmp_path: Path):
    from rankgym.store import Store

    with Store(tmp_path / "s.db") as s:
        s.log_step("r", 0, json.loads(OLD_ROW))
        (row,) = s.steps("r")
    m = StepMetrics.from_dict(row["metrics"])
    assert (m.reward_mean, m.hack_penalized, m.no_signal, m.kl) == (0.75, 1, False, 0.003)
    assert m.threads == {"rollout": 1} and m.eval == {"tag": "step1"}
    assert m.extra == {"adapter": "x", "adapter_sync_s": 0.1}
    assert json.dumps(m.to_dict()) == OLD_ROW
    assert step_line(m, 0, 3) == (
        "step 1/3  reward 0.750  verifiable 0.500  success 0.500  zero-var 0/1  "
        "hack-penalized 1  7s (rollout 3s, judge 1s, update 2s)"
    )


def test_a_partial_row_reads_with_none_and_writes_back_without_the_missing_keys():
    row = {"kl": 0.01, "tokens_per_s": 80.0, "reward_mean": 0.5}  # an older or foreign writer
    m = StepMetrics.from_dict(row)
    assert m.reward_mean == 0.5 and m.hack_penalized is None and m.extra == {"tokens_per_s": 80.0}
    assert list(m.to_dict().items()) == list(row.items())
    assert m.kl == 0.01 and "loss" not in m.to_dict()
    assert history_summary([m])["reward_first"] == 0.5
    assert replace(m, eval={"tag": "s1"}).to_dict() == {**row, "eval": {"tag": "s1"}}


def test_series_are_the_numeric_metrics_in_stored_order_with_bools_as_numbers():
    row = {"reward_mean": 0.5, "policy": "p", "no_signal": True, "threads": {"a": 1}, "k": 3}
    assert StepMetrics.from_dict(row).series() == {"reward_mean": 0.5, "no_signal": 1.0, "k": 3}
    assert list(StepMetrics.from_dict(row).series()) == ["reward_mean", "no_signal", "k"]
    full = _metrics().series()
    assert full["bf16"] == 0.0 and "policy" not in full and "kl" in full


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=6,
)
_keys = st.sampled_from([f.name for f in fields(StepMetrics)]) | st.text(max_size=12)


@given(st.dictionaries(_keys, _json, max_size=12))
def test_any_stored_metrics_dict_survives_a_round_trip_in_order(row):
    assert list(StepMetrics.from_dict(row).to_dict().items()) == list(row.items())


def test_runs_page_reads_rows_the_old_dict_code_stored(tmp_path: Path, monkeypatch):
    from rankgym.store import Store

    row = json.loads(OLD_ROW)
    path = tmp_path / "s.db"
    with Store(path) as s:
        s.create_run(name="t", kind="train", run_id="t")
        for step in range(2):
            s.log_step("t", step, {**row, "reward_mean": 0.25 * step})
    at = runs_page(path, monkeypatch)
    logged = at.dataframe[-1].value  # the trainer's metrics, one row per step
    numeric = [k for k, v in row.items() if isinstance(v, int | float)]
    assert list(logged.columns) == numeric and list(logged["reward_mean"]) == [0.0, 0.25]
    assert list(logged["no_signal"]) == [0.0, 0.0] and "policy" not in logged.columns
