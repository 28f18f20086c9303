"""The stage's held-out check refuses a judge that does no better than reading length."""

from __future__ import annotations

from rankgym.trainer.judge_stage_check import (
    MIN_CHECK_PAIRS,
    MIN_CHECK_TASKS,
    failed_because,
    on_policy_message,
    stage_check,
)


def _summary(accuracy: float, ci: list[float], longer_wins: float) -> dict:
    row = {"all": {"pairwise_accuracy": accuracy, "pairwise_accuracy_ci": ci}}
    return {"comparison": {"n_pairs": MIN_CHECK_PAIRS + 10, "n_tasks": MIN_CHECK_TASKS + 2,
                           "baselines": {"first_wins": 0.5, "longer_wins": longer_wins},
                           "judges": {"j": row}}}  # fmt: skip


def test_a_judge_no_better_than_picking_the_shorter_trajectory_fails_the_check():
    # held-out pairs where the shorter trajectory won 80% of the time: "shorter wins" scores 0.80
    lazy = stage_check(_summary(0.80, [0.62, 0.95], longer_wins=0.20), 0.5)
    assert lazy["pairwise_passed"] and lazy["length_rule_as_good"] and not lazy["passed"]
    assert (lazy["length_rule"], lazy["length_rule_picks"]) == (0.80, "shorter")
    why = on_policy_message(lazy) + failed_because(lazy)
    assert "no better than always picking the shorter trajectory, which orders 0.80" in why
    assert "min_pairwise" not in failed_because(lazy)  # its CI was above 0.5
    better = stage_check(_summary(0.90, [0.80, 0.97], longer_wins=0.20), 0.5)
    assert better["passed"] and not better["length_rule_as_good"]


def test_on_balanced_pairs_the_length_rule_is_a_coin_and_changes_nothing():
    ok = stage_check(_summary(0.70, [0.56, 0.84], longer_wins=0.5), 0.5)
    assert ok["passed"] and ok["length_rule"] == 0.5
    longer = stage_check(_summary(0.70, [0.56, 0.84], longer_wins=0.75), 0.5)
    assert longer["length_rule_picks"] == "longer" and not longer["passed"]
    no_baseline = stage_check({"comparison": {"n_pairs": 30, "n_tasks": 5, "judges": {
        "j": {"all": {"pairwise_accuracy": 0.7, "pairwise_accuracy_ci": [0.6, 0.8]}}}}}, 0.5)  # fmt: skip
    assert no_baseline["passed"] and no_baseline["length_rule"] is None
