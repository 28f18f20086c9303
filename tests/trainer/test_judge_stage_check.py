"""The stage's held-out check: enough pairs to decide, no lean to the shorter of two tied
trajectories, and better than a judge that reads length only."""

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


def test_the_held_out_check_does_not_pass_on_a_handful_of_pairs():
    def summary(pairs: int, tasks: int) -> dict:
        row = {"all": {"pairwise_accuracy": 1.0, "pairwise_accuracy_ci": [1.0, 1.0]}}
        return {"comparison": {"n_pairs": pairs, "n_tasks": tasks, "judges": {"j": row}}}

    assert not stage_check(summary(2, 1), 0.5)["passed"]  # [1.00, 1.00] on 2 pairs decides nothing
    assert not stage_check(summary(MIN_CHECK_PAIRS, MIN_CHECK_TASKS - 1), 0.5)["passed"]
    ok = stage_check(summary(MIN_CHECK_PAIRS, MIN_CHECK_TASKS), 0.5)
    assert ok["passed"] and ok["enough_evidence"]


def test_the_held_out_check_fails_a_judge_shown_to_prefer_the_shorter_of_two_tied_trajectories():
    def summary(tie_pairs: int, shorter: float) -> dict:
        row = {"all": {"pairwise_accuracy": 0.92, "pairwise_accuracy_ci": [0.83, 0.98]}}
        ties = {"J": {"pairs": tie_pairs, "prefers_shorter": shorter}} if tie_pairs else {}
        return {"judge": "J", "ties": ties,
                "comparison": {"n_pairs": 80, "n_tasks": 18, "judges": {"J": row}}}  # fmt: skip

    c = stage_check(summary(80, 0.68), 0.5, 0.5)  # session 5's judge C: 0.68 of 80 held-out ties
    assert not c["passed"] and c["tied_lean_shown"] and c["tied_pairs"] == 80
    assert 0.5 < c["tied_shorter_ci"][0] < 0.68 < c["tied_shorter_ci"][1]
    why = failed_because(c)
    assert "min_pairwise" not in why  # its decided pairs were fine: only the lean failed it
    assert "0.68" in why and "80 pairs" in why and "max_tied_shorter 0.5" in why
    assert stage_check(summary(80, 0.55), 0.5, 0.5)["passed"]  # a lean not shown on 80 pairs
    assert stage_check(summary(80, 0.68), 0.5, 1.0)["passed"]  # 1.0: the gate is off
    none = stage_check(summary(0, 0.0), 0.5, 0.5)  # no tie pairs checked: nothing shown
    assert none["passed"] and none["tied_shorter"] is None and none["tied_shorter_ci"] is None
    few = stage_check(summary(6, 1.0), 0.5, 0.5)  # 6 of 6: Wilson [0.61, 1.00] lies above 0.5
    assert not few["passed"]
    assert "not above min_pairwise" in failed_because(stage_check(summary(80, 0.9), 0.99, 0.5))
