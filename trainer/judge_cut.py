"""A trained judge's pass/fail cut, fitted on labelled episodes: ``[reward] judge_threshold = "fit"``.

A fixed cut (``judge_threshold = 0.5``) is right only for a judge whose score is a calibrated
pass probability; a judge trained on a few dozen pairs of one policy is not one, and its scale
moves with every refresh (bench/RESULTS.md, issue 22, session 23). With ``"fit"`` the
``[judge_train]`` stage, and every refresh after it, has its new judge score the judge-split
rollout it was trained on (train tasks GRPO never draws, labelled by the verifier), in groups
as GRPO's judge scores a step, and GRPO trains on the verdict at the cut that classifies those
episodes best (:func:`fit_cut`) until the next refit.

What it does not do: look at GRPO's own groups (a judge-only run has no labels there), hold
out tasks (most of the episodes are the judge's training data, so the fitted accuracy is
optimistic), or change what the monitor reads (the graded score).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rankgym.trainer.config import TrainConfig

__all__ = ["FIT", "FittedCut", "apply_cut", "cut_line", "fit_cut", "fit_judge_cut", "labelled_scores"]  # fmt: skip

FIT = "fit"
"""The ``[reward] judge_threshold`` value that fits the cut to each trained judge."""
PASS_AT = 1.0
"""An episode passes when its verifier reward is at least this (the evaluation's success)."""


@dataclass(frozen=True)
class FittedCut:
    """A cut and how it classifies the episodes it was fitted on (pass: score >= cut)."""

    cut: float
    accuracy: float
    passes: int
    failures: int
    passes_missed: int
    failures_passed: int
    auroc: float | None
    """P(a pass scores above a failure), ties counted half; None without both classes."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_cut(scores: Sequence[float], passed: Sequence[bool]) -> FittedCut:
    """The accuracy-optimal cut for ``scores`` against the labels ``passed``.

    Candidates: the lowest score (pass everything), each midpoint between two neighbouring
    distinct scores, and just above the highest (pass nothing). Among equally accurate cuts
    the highest wins: the one that passes the fewest episodes, since a false pass is a full
    reward for a failure. Raises ``ValueError`` on no episodes or unequal lengths.
    """
    if len(scores) != len(passed):
        raise ValueError(f"{len(scores)} scores but {len(passed)} labels")
    if not scores:
        raise ValueError("no labelled episodes to fit a cut on")
    if any(not math.isfinite(s) for s in scores):
        raise ValueError("judge scores must be finite numbers")
    distinct = sorted(set(scores))
    cuts = [distinct[0], *((a + b) / 2 for a, b in zip(distinct, distinct[1:], strict=False))]
    cuts.append(math.nextafter(distinct[-1], math.inf))
    pos = [s for s, p in zip(scores, passed, strict=True) if p]
    neg = [s for s, p in zip(scores, passed, strict=True) if not p]

    def errors(c: float) -> tuple[int, int]:
        return sum(s < c for s in pos), sum(s >= c for s in neg)

    best = max(cuts, key=lambda c: (-sum(errors(c)), c))
    missed, false_pass = errors(best)
    auroc = None
    if pos and neg:  # Mann-Whitney U / (n_pos n_neg): P(pass scores above a failure), ties half
        from scipy.stats import mannwhitneyu

        auroc = float(mannwhitneyu(pos, neg).statistic) / (len(pos) * len(neg))
    return FittedCut(
        cut=best,
        accuracy=1 - (missed + false_pass) / len(scores),
        passes=len(pos),
        failures=len(neg),
        passes_missed=missed,
        failures_passed=false_pass,
        auroc=auroc,
    )


def labelled_scores(
    cfg: TrainConfig, judge: str, store_path: str | Path, *, pass_at: float = PASS_AT
) -> tuple[list[float], list[bool]]:
    """Judge every group of the store at ``store_path`` with ``judge`` (the config's other
    ``[judge]`` settings, the env's tools shown, nothing written to the store) and return the
    score and pass label of each labelled episode: verifier reward >= ``pass_at`` passes; an
    episode cut at its turn limit fails; one with an error or no reward is left out. Groups
    the judge could not score are left out too."""
    from rankgym.judges.group_judge import judge_groups_sync
    from rankgym.store import Store
    from rankgym.trainer.setup import judge_spec

    spec = judge_spec(cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"model": judge})}))  # fmt: skip
    with Store(store_path, readonly=True) as store:
        groups = list(store.iter_groups())
    js = judge_groups_sync(
        groups,
        spec,
        None,
        permutations=cfg.judge.permutations,
        concurrency=cfg.judge.concurrency,
        tools={g.id: g.tools for g in groups if g.tools},
    )
    scores: list[float] = []
    passed: list[bool] = []
    for g, j in zip(groups, js, strict=True):
        by_id = {s.trajectory_id: s.score for s in j.scores} if j.status == "ok" else {}
        for t in g.trajectories:
            outcome = t.verifier_outcome()
            if t.id not in by_id or outcome is None:
                continue
            scores.append(by_id[t.id])
            passed.append(outcome >= pass_at)
    return scores, passed


def fit_judge_cut(
    cfg: TrainConfig, judge: str, store_path: str | Path, say: Callable[[str], None]
) -> dict[str, Any] | None:
    """With ``[reward] judge_threshold = "fit"``: the cut of ``judge`` fitted on the labelled
    episodes of ``store_path`` (:func:`labelled_scores`, :func:`fit_cut`) as a dict (plus the
    ``store``), said in one line; None (said too) when the setting is off or the episodes hold
    no pass or no failure, so there is no boundary to fit."""
    if cfg.reward.judge_threshold != FIT:
        return None
    scores, passed = labelled_scores(cfg, judge, store_path)
    if all(passed) or not any(passed):
        say(
            f"judge_train: no cut fitted for {judge}: its {len(passed)} labelled episodes in "
            f"{store_path} are all {'passes' if passed and all(passed) else 'failures'}"
        )
        return None
    fitted = {**fit_cut(scores, passed).to_dict(), "judge": judge, "store": str(store_path)}
    say(cut_line(fitted))
    return fitted


def cut_line(fitted: dict[str, Any]) -> str:
    """One line on a fitted cut: where it sits and how it classified its episodes."""
    auroc = fitted.get("auroc")
    return (
        f"judge_train: pass/fail cut fitted at {fitted['cut']:.3f} on "
        f"{fitted['passes'] + fitted['failures']} labelled judge-split episodes (accuracy "
        f"{fitted['accuracy']:.2f}; {fitted['passes_missed']} of {fitted['passes']} passes "
        f"missed, {fitted['failures_passed']} of {fitted['failures']} failures passed"
        + (f"; AUROC {auroc:.2f}" if auroc is not None else "")
        + ")"
    )


def apply_cut(trainer: Any, fitted: dict[str, Any] | None) -> None:
    """GRPO's next steps train on the verdict at ``fitted["cut"]``; with no fit (None) the cut
    stays where it was: the last one fitted, or the graded score before the first. The caller
    applies it only while GRPO judges with a ``[judge_train]`` judge (not after a fall-back to
    the configured one)."""
    if fitted is not None and trainer.cfg.reward.judge_threshold == FIT:
        trainer.reward.judge_threshold = float(fitted["cut"])
