"""The ``[judge_train]`` stage's held-out check: may the judge it trained judge GRPO?

:func:`stage_check` turns a judge-train summary into the check's verdict: the pairwise
accuracy's CI above ``min_pairwise`` on at least :data:`MIN_CHECK_PAIRS` held-out pairs in
:data:`MIN_CHECK_TASKS` tasks; no lean to the shorter of two verifier-tied trajectories shown
(``max_tied_shorter``); and better than a rule that reads length only. :func:`skipped_check`
is the verdict where no judge was trained (too few pairs to decide one);
:func:`on_policy_message` and :func:`failed_because` say it in a sentence.

What it does not do: judge anything (judge-train's held-out comparison did), or decide what the
run does with the verdict (``judge_stage`` does).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rankgym.trainer.config import JudgeTrainSection
    from rankgym.trainer.judge_job import TooFewPairs

__all__ = [
    "MIN_CHECK_PAIRS",
    "MIN_CHECK_TASKS",
    "failed_because",
    "on_policy_message",
    "skipped_check",
    "stage_check",
    "tie_clause",
]


MIN_CHECK_PAIRS = 20
MIN_CHECK_TASKS = 3
"""The held-out check passes only on at least this many pairs in this many tasks: a CI over
one or two tasks (the bootstrap resamples tasks) says nothing, e.g. 2 pairs judged right give
[1.00, 1.00]."""


def stage_check(summary: dict[str, Any], min_pairwise: float, max_tied_shorter: float = 1.0) -> dict[str, Any]:  # fmt: skip
    """The held-out numbers of the trained judge and whether they pass: the pairwise CI above
    ``min_pairwise`` on at least ``MIN_CHECK_PAIRS`` pairs in ``MIN_CHECK_TASKS`` tasks, and,
    where judge-train checked held-out tie pairs, no lean to the shorter of two tied
    trajectories shown above ``max_tied_shorter`` (:func:`_tie_lean`), and an accuracy above
    the better length rule's on the same pairs (:func:`_length_rule`)."""
    comp = summary.get("comparison") or {}
    judges: dict[str, Any] = comp.get("judges") or {}
    first: dict[str, Any] = next(iter(judges.values()), {})
    row = first.get("all", {})
    ci = row.get("pairwise_accuracy_ci")
    enough = (comp.get("n_pairs") or 0) >= MIN_CHECK_PAIRS and (comp.get("n_tasks") or 0) >= MIN_CHECK_TASKS  # fmt: skip
    lean = _tie_lean(summary, max_tied_shorter)
    pairwise_passed = bool(enough and ci and ci[0] > min_pairwise)
    rule = _length_rule(comp.get("baselines"), row.get("pairwise_accuracy"))
    return {
        "heldout_pairs": comp.get("n_pairs"),
        "heldout_tasks": comp.get("n_tasks"),
        "pairwise_accuracy": row.get("pairwise_accuracy"),
        "pairwise_accuracy_ci": ci,
        "position_consistency": row.get("position_consistency"),
        "position_consistency_ci": row.get("position_consistency_ci"),
        "baselines": comp.get("baselines"),
        "min_pairwise": min_pairwise,
        "enough_evidence": enough,
        "pairwise_passed": pairwise_passed,
        **lean,
        **rule,
        "passed": pairwise_passed
        and not lean["tied_lean_shown"]
        and not rule["length_rule_as_good"],
    }


def _length_rule(baselines: dict[str, Any] | None, accuracy: float | None) -> dict[str, Any]:
    """The better content-blind length rule on the held-out pairs (pick the longer, or the
    shorter, trajectory; ``baselines["longer_wins"]``) and whether the judge did no better.
    The length balance keeps near misses, so the held-out pairs can lean one way (e.g. a
    policy whose failures run to the turn limit: "shorter wins" 0.80), and a judge that only
    reads length would pass a check against 0.5 alone."""
    longer = (baselines or {}).get("longer_wins")
    if longer is None or accuracy is None:
        return {"length_rule": None, "length_rule_picks": None, "length_rule_as_good": False}
    picks = "longer" if longer >= 0.5 else "shorter"
    best = max(longer, 1.0 - longer)
    return {
        "length_rule": best,
        "length_rule_picks": picks,
        "length_rule_as_good": accuracy <= best,
    }


def _tie_lean(summary: dict[str, Any], max_tied_shorter: float) -> dict[str, Any]:
    """The trained judge's lean on held-out tie pairs (``summary["ties"]``, judge-train's tie
    check): the share of pairs where it scored the shorter higher, its 95% Wilson interval
    (pairs counted as independent, an even split as half rounded down), and whether that
    interval lies above ``max_tied_shorter``. Nothing is shown without tie pairs."""
    from rankgym.trainer.evaluate import wilson

    ties = (summary.get("ties") or {}).get(summary.get("judge")) or {}
    n, share = int(ties.get("pairs") or 0), ties.get("prefers_shorter")
    ci = list(wilson(math.floor(share * n), n)) if n and share is not None else None
    return {
        "tied_pairs": n,
        "tied_shorter": share if n else None,
        "tied_shorter_ci": ci,
        "max_tied_shorter": max_tied_shorter,
        "tied_lean_shown": bool(ci and ci[0] > max_tied_shorter),
    }


def skipped_check(e: TooFewPairs, jt: JudgeTrainSection) -> dict[str, Any]:
    """The stage's check when it trained no judge: failed for lack of evidence, and why."""
    return {
        "heldout_pairs": e.heldout, "heldout_tasks": e.heldout_tasks, "pairwise_accuracy": None,
        "pairwise_accuracy_ci": None, "min_pairwise": jt.min_pairwise, "enough_evidence": False,
        "pairwise_passed": False, "tied_lean_shown": False, "passed": False, "trained": False,
        "skipped": f"no judge trained, as this policy's judge-split groups are too few to check one: {e}",
        "advice": (
            "for more judge data raise judge_train.group_size or judge_train.tasks, widen "
            "judge_train.env_kwargs (more tasks) or add judge_train.stores (people's rankings)"
        ),
    }  # fmt: skip


def tie_clause(check: dict[str, Any]) -> str:
    """``held-out ties: ...; `` when the stage checked tie pairs, else empty."""
    ci = check.get("tied_shorter_ci")
    if not ci:
        return ""
    return (
        f"held-out ties: prefers the shorter in {check['tied_shorter']:.2f} [{ci[0]:.2f}, "
        f"{ci[1]:.2f}] of {check['tied_pairs']} pairs"
        + (f" (a lean above {check['max_tied_shorter']})" if check["tied_lean_shown"] else "")
        + "; "
    )


def failed_because(check: dict[str, Any]) -> str:
    """Why a failed check failed, as the tail of :func:`on_policy_message`'s sentence."""
    out: list[str] = []
    if check.get("skipped"):
        return ""
    if not check.get("pairwise_passed"):  # also a check written before this field existed
        out.append(f", not above min_pairwise {check.get('min_pairwise')}")
    if check.get("tied_lean_shown"):
        lo, hi = check["tied_shorter_ci"]
        out.append(
            f"{',' if not out else ' and'} it prefers the shorter of two verifier-tied held-out "
            f"trajectories in {check['tied_shorter']:.2f} [{lo:.2f}, {hi:.2f}] of "
            f"{check['tied_pairs']} pairs, above max_tied_shorter {check['max_tied_shorter']} "
            "(a judge-only reward would teach the policy to stop early)"
        )
    if check.get("length_rule_as_good"):
        out.append(
            f"{',' if not out else ' and'} it does no better than always picking the "
            f"{check['length_rule_picks']} trajectory, which orders {check['length_rule']:.2f} of "
            "these pairs right (a judge that reads length only)"
        )
    return "".join(out)


def on_policy_message(check: dict[str, Any], who: str = "the stage's judge") -> str:
    """The numbers of the stage's held-out check on this policy's groups, in one sentence
    (why no judge was trained, where none was)."""
    if check.get("skipped"):
        return str(check["skipped"])
    ci = check.get("pairwise_accuracy_ci") or [float("nan")] * 2
    acc = check.get("pairwise_accuracy")
    few = (
        f" (too few to decide: fewer than {MIN_CHECK_PAIRS} pairs or {MIN_CHECK_TASKS} tasks)"
        if check.get("enough_evidence") is False
        else ""
    )
    return (
        f"{who} ranks {check.get('heldout_pairs')} held-out "
        f"pairs in {check.get('heldout_tasks')} tasks of this policy at pairwise "
        f"{acc if acc is None else f'{acc:.2f}'} [{ci[0]:.2f}, {ci[1]:.2f}]{few}"
    )
