"""The judge monitor, its guard, and the no-signal refusal: checks on every training step.

**Monitor.** Every step, each judged group whose trajectories the verifier orders (at least
two known verifiable rewards, not all equal), or, failing that, that a person ranked in the
store, is one *unit*: the judge's scores against that truth. Per step and running over the
run (and over the last ``window`` steps), with 95% cluster-bootstrap CIs over groups:

- ``pairwise``: over the pairs the truth orders, the share the judge orders the same way; a
  judge tie counts half, so a judge that knows nothing (random or constant) scores 0.5;
- ``tau``: Kendall tau-b per group, averaged over groups (``judges.metrics.aggregate``, the
  judge-check's estimator); undefined for a group whose judge scores are all equal;
- ``top_fail_rate``: in groups where some trajectories pass the verifier
  (``verifiable_reward >= success_threshold``) and some fail, the share of the judge's top
  trajectories (ties at the top included) that fail: how often the judge's favourite is a
  failure although a success was there (a gaming signal);
- ``tied_shorter``: over pairs the verifier *ties* (equal rewards, an episode cut at its turn
  limit counting 0, as in judge-train's data) whose judge-visible lengths differ, the share
  where the judge scores the shorter trajectory higher (a judge tie counts half), in every
  judged group, constant-reward groups included. The pairwise numbers never see these pairs,
  but GRPO follows the judge inside them: near 0.5 the judge is indifferent there; well above
  it, a judge-only reward pays the policy for stopping early (session 4's arm: 0.61, mean turns
  3.43 -> 2.48). Not used by the guard.
- ``signal``: the cosine between the group-centred judge reward (the score, or the verdict at
  the step's cut) and the group-centred verifier pass/fail (``success_threshold``), over every
  judged group, constant-reward groups included (``monitor_signal.py``): how much of the push
  toward success the judge's reward makes (+1 all of it, 0 none, None no judge signal at all).
  Not used by the guard.

**Guard** (``[monitor] guard``; ``auto`` = on when ``reward.kind = "judge"``). After a step's
groups are judged and before the update, the run stops (:class:`JudgeGuardStop`) when the
run-wide or the last-``window``-steps agreement has at least ``min_pairs`` ordered pairs in at
least ``min_groups`` groups and the *upper* bound of its 95% pairwise CI is <= 0.5: the data
then say the judge orders trajectories no better than a coin, so a judge-only reward would
train on noise (or against the task). A judge truly at 0.5 + d is stopped by one look with
probability below 2.5% (one-sided bound); looking every step makes false stops more likely
than that, which is why both ``min_*`` floors exist. The guard never stops a run for too
*little* evidence, and it says nothing about a judge that agrees with a verifier the policy
has learnt to game.

**Below chance in a blend.** With the guard off (a blended reward under ``auto``, or ``guard =
"off"``) the same test still runs every step: when it holds, the step warns that the judge's
share of the reward is noise or pushes against the verifier, and is flagged
(``judge_below_chance`` in ``StepMetrics``, ``JUDGE BELOW CHANCE`` on the step line,
``below_chance`` in the summary). The run goes on. With ``[monitor] below_chance = "drop"``
(``rankgym demo``) the first such step instead takes the judge out of the reward
(``Reward.without_judge``: a blend becomes the verifier alone) for that step and the rest of
the run, flagged ``judge_dropped``; the judge keeps judging, so the monitor keeps reporting.

What the trainer does with it each step (warn, stop, drop, resume) is ``monitor_step.py``.

**No-signal refusal** (``no_signal.py``, after the step is scored). A step whose groups (those
with a verifier) all have constant verifier rewards, trained on a reward that uses the judge,
and whose judge *failed* its preflight judge-check (tau CI not above 0), would move the policy
on judge noise alone. By default (``monitor.no_signal = "stop"``) it is refused with
:class:`NoSignalStep` (a one-line error naming the step and the ways out); with ``"skip"`` its
update is skipped and the run goes on (``skipped_no_signal``; ``rankgym demo`` does this); with
``"train"`` or ``--force`` it trains.
Both warn on every such step and flag it in ``StepMetrics`` (``no_verifier_signal``,
``skipped_no_signal`` / ``forced_no_signal``).

What this does not do: correct for position bias (the judge-check does), check the judge where
no verifier or label exists (those groups are not counted), or retry anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankgym.errors import RankgymError
from rankgym.judges.metrics import aggregate, none_if_nan
from rankgym.trainer.monitor_signal import SignalUnit, judge_signal, signal_unit
from rankgym.trainer.monitor_tied import TiedUnit, tied_shorter, tied_unit
from rankgym.trainer.no_signal import (  # re-exported: one import path for the monitor's API
    NoSignalStep,
    check_failed,
    no_signal_message,
    verifier_constant,
)
from rankgym.trainer.rewards import reward_class
from rankgym.types import SCORE_TIE, Group

if TYPE_CHECKING:
    from rankgym.trainer.config import MonitorSection

__all__ = [
    "CHANCE",
    "Agreement",
    "GroupUnit",
    "JudgeGuardStop",
    "JudgeMonitor",
    "MonitorStep",
    "NoSignalStep",
    "SignalUnit",
    "TiedUnit",
    "agreement",
    "check_failed",
    "group_unit",
    "judge_signal",
    "signal_unit",
    "tied_shorter",
    "tied_unit",
    "no_signal_message",
    "verifier_constant",
]

CHANCE = 0.5
"""Pairwise agreement of a judge that knows nothing (ties count half)."""


class JudgeGuardStop(RankgymError):
    """The guard stopped the run: the judge's agreement is shown to be no better than chance."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


@dataclass(frozen=True)
class GroupUnit:
    """One group's judge scores against its truth (verifier rewards or a person's ranking)."""

    group_id: str
    step: int
    source: str
    """``verifier`` or ``human``."""
    judge: tuple[float, ...]
    truth: tuple[float, ...]
    pairs: int
    """Pairs the truth orders (not tied)."""
    agree: float
    """Of those, pairs the judge orders the same way, plus half of those it ties."""
    top_fail: float | None
    """Share of the judge's top trajectories that fail the verifier, where passes and fails
    both occur; None otherwise (and for human truth)."""


def _truth_from_ranking(ranking: dict[str, float], ids: list[str]) -> list[float] | None:
    if not all(i in ranking for i in ids):
        return None
    return [-float(ranking[i]) for i in ids]  # rank 1 = best


def group_unit(
    group: Group,
    step: int,
    success_threshold: float = 1.0,
    rankings: Sequence[dict[str, float]] = (),
) -> GroupUnit | None:
    """The unit of one group, or None (not judged, or no truth that orders two trajectories).

    The verifier is the truth where it orders at least two of the group's trajectories; else
    the latest of ``rankings`` (trajectory id -> rank, 1 = best) that ranks every trajectory.
    """
    j = group.judgement
    if j is None or j.status != "ok" or not j.scores:
        return None
    scores = j.score_map()
    known = [
        (t.id, float(t.verifiable_reward))
        for t in group.trajectories
        if t.verifiable_reward is not None and t.id in scores
    ]
    truth: list[float] | None
    source, ids, truth = "verifier", [i for i, _ in known], [v for _, v in known]
    if len(known) < 2 or max(truth) - min(truth) <= SCORE_TIE:
        source, ids = "human", [t.id for t in group.trajectories if t.id in scores]
        truth = None
        for r in reversed(list(rankings)):
            truth = _truth_from_ranking(r, ids)
            if truth is not None and max(truth) - min(truth) > SCORE_TIE:
                break
            truth = None
        if truth is None or len(ids) < 2:
            return None
    judge = [float(scores[i]) for i in ids]
    pairs, agree = 0, 0.0
    for a in range(len(ids)):
        for b in range(a + 1, len(ids)):
            dt = truth[a] - truth[b]
            if abs(dt) <= SCORE_TIE:
                continue
            pairs += 1
            dj = judge[a] - judge[b]
            agree += 0.5 if abs(dj) <= SCORE_TIE else float((dj > 0) == (dt > 0))
    top_fail = None
    if source == "verifier":
        passed = [v >= success_threshold for v in truth]
        if any(passed) and not all(passed):
            best = max(judge)
            top = [p for s, p in zip(judge, passed, strict=True) if s >= best - SCORE_TIE]
            top_fail = sum(not p for p in top) / len(top)
    return GroupUnit(group.id, step, source, tuple(judge), tuple(truth), pairs, agree, top_fail)


@dataclass(frozen=True)
class Agreement:
    """Judge-vs-truth agreement over a set of units, with 95% cluster-bootstrap CIs."""

    groups: int
    """Groups with at least one ordered pair."""
    pairs: int
    pairwise: float | None
    pairwise_ci: tuple[float, float] | None
    tau: float | None
    tau_ci: tuple[float, float] | None
    top_fail_rate: float | None
    top_fail_groups: int
    sources: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, CIs as ``[low, high]`` lists."""
        return {
            "groups": self.groups,
            "pairs": self.pairs,
            "pairwise": self.pairwise,
            "pairwise_ci": list(self.pairwise_ci) if self.pairwise_ci else None,
            "tau": self.tau,
            "tau_ci": list(self.tau_ci) if self.tau_ci else None,
            "top_fail_rate": self.top_fail_rate,
            "top_fail_groups": self.top_fail_groups,
            "sources": dict(self.sources),
        }

    def describe(self) -> str:
        """``pairwise 0.31 [0.20, 0.42] over 40 pairs in 9 groups, tau -0.35 [...]``."""

        def ci(v: float | None, c: tuple[float, float] | None, sign: str = "") -> str:
            if v is None:
                return "undefined"
            return f"{v:{sign}.2f}" + (f" [{c[0]:{sign}.2f}, {c[1]:{sign}.2f}]" if c else "")

        top = (
            f", judge's top trajectory fails the verifier in {self.top_fail_rate:.0%} of "
            f"{self.top_fail_groups} groups"
            if self.top_fail_rate is not None
            else ""
        )
        return (
            f"pairwise {ci(self.pairwise, self.pairwise_ci)} over {self.pairs} pairs in "
            f"{self.groups} groups, tau {ci(self.tau, self.tau_ci, '+')}{top}"
        )


def _bootstrap_ratio(
    num: np.ndarray, den: np.ndarray, resamples: int, seed: int
) -> tuple[float, float] | None:
    """95% percentile CI of ``sum(num) / sum(den)`` resampling groups (rows) with replacement."""
    g = len(num)
    if g < 2 or resamples <= 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, g, size=(resamples, g))
    n, d = num[idx].sum(axis=1), den[idx].sum(axis=1)
    ok = d > 0
    if not ok.any():
        return None
    lo, hi = np.quantile(n[ok] / d[ok], [0.025, 0.975])
    return float(lo), float(hi)


def agreement(units: Sequence[GroupUnit], resamples: int = 1000, seed: int = 0) -> Agreement:
    """The :class:`Agreement` of ``units`` (a group's units are resampled together)."""
    by_group: dict[str, list[GroupUnit]] = {}
    for u in units:
        if u.pairs > 0:
            by_group.setdefault(u.group_id, []).append(u)
    sources: dict[str, int] = {}
    for us in by_group.values():
        sources[us[0].source] = sources.get(us[0].source, 0) + 1
    num = np.array([sum(u.agree for u in us) for us in by_group.values()], dtype=float)
    den = np.array([sum(u.pairs for u in us) for us in by_group.values()], dtype=float)
    pairs = int(den.sum())
    pairwise = float(num.sum() / pairs) if pairs else None
    ci = _bootstrap_ratio(num, den, resamples, seed) if pairs else None
    agg = aggregate(
        [(u.group_id, list(u.judge), list(u.truth)) for us in by_group.values() for u in us],
        n_resamples=resamples,
        seed=seed,
    )
    tau = agg.metrics["kendall_tau_b"]
    fails = [u.top_fail for u in units if u.top_fail is not None]
    return Agreement(
        groups=len(by_group),
        pairs=pairs,
        pairwise=none_if_nan(pairwise) if pairwise is not None else None,
        pairwise_ci=ci,
        tau=tau.macro,
        tau_ci=tau.macro_ci,
        top_fail_rate=sum(fails) / len(fails) if fails else None,
        top_fail_groups=len(fails),
        sources=sources,
    )


def _shown_below_chance(a: Agreement, min_pairs: int, min_groups: int) -> bool:
    return (
        a.pairs >= min_pairs
        and a.groups >= min_groups
        and a.pairwise_ci is not None
        and a.pairwise_ci[1] <= CHANCE
    )


@dataclass(frozen=True)
class MonitorStep:
    """What the monitor measured at one step (and what the guard decided)."""

    step: int
    this_step: Agreement
    running: Agreement
    recent: Agreement
    """Over the last ``window`` steps (this one included)."""
    guard_on: bool
    stop: str | None = None
    """The guard's message when it stops the run, else None."""
    below: str | None = None
    """With the guard off: where the agreement was shown below chance and its numbers, else None."""
    tied: tuple[int, float | None] = (0, None)
    tied_run: tuple[int, float | None] = (0, None)
    """:func:`tied_shorter` of this step's groups and over the run."""
    signal: float | None = None
    signal_run: float | None = None
    """:func:`judge_signal` of this step's groups and over the run."""

    def metrics(self) -> dict[str, Any]:
        """The flat ``StepMetrics`` fields (``judge_*`` / ``monitor_*``)."""
        out: dict[str, Any] = {}
        for suffix, a in (("", self.this_step), ("_run", self.running)):
            out[f"monitor_groups{suffix}"] = a.groups
            out[f"monitor_pairs{suffix}"] = a.pairs
            for name, v, c in (("pairwise", a.pairwise, a.pairwise_ci), ("tau", a.tau, a.tau_ci)):
                out[f"judge_{name}{suffix}"] = v
                out[f"judge_{name}{suffix}_low"] = c[0] if c else None
                out[f"judge_{name}{suffix}_high"] = c[1] if c else None
            out[f"judge_top_fail_rate{suffix}"] = a.top_fail_rate
        for suffix, (n, rate) in (("", self.tied), ("_run", self.tied_run)):
            out[f"monitor_tied_pairs{suffix}"] = n
            out[f"judge_tied_shorter{suffix}"] = rate
        out["judge_signal"], out["judge_signal_run"] = self.signal, self.signal_run
        out["guard_stopped"] = self.stop is not None
        out["judge_below_chance"] = self.below is not None
        return out


class JudgeMonitor:
    """Keeps every step's units; measures each step and decides the guard (module docstring)."""

    def __init__(
        self,
        settings: MonitorSection,
        reward_kind: str,
        success_threshold: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.settings = settings
        self.success_threshold = success_threshold
        self.seed = seed
        self.guard_on = settings.guard == "on" or (
            settings.guard == "auto" and reward_class(reward_kind).judge_only
        )
        self.units: list[GroupUnit] = []
        self.tied: list[TiedUnit] = []
        self.signal: list[SignalUnit] = []
        self.dropped_at: int | None = None
        """The step (1-based) at which ``below_chance = "drop"`` took the judge out, else None."""

    def add(
        self,
        step: int,
        groups: Sequence[Group],
        rankings: dict[str, list[dict[str, float]]],
        cut: float | None = None,
    ) -> list[GroupUnit]:
        """Record the units of ``groups`` (``rankings``: group id -> its rankings, oldest first;
        ``cut``: the cut the step's reward reads the judge's scores at, None: graded)."""
        new = [
            u
            for g in groups
            if (u := group_unit(g, step, self.success_threshold, rankings.get(g.id, ())))
            is not None
        ]
        self.units = [u for u in self.units if u.step != step] + new  # a step seen again replaces
        tied = [tu for g in groups if (tu := tied_unit(g, step)) is not None]
        self.tied = [u for u in self.tied if u.step != step] + tied
        signal = [
            su
            for g in groups
            if (su := signal_unit(g, step, cut, self.success_threshold)) is not None
        ]
        self.signal = [u for u in self.signal if u.step != step] + signal
        return new

    def observe(
        self,
        step: int,
        groups: Sequence[Group],
        rankings: dict[str, list[dict[str, float]]],
        cut: float | None = None,
    ) -> MonitorStep:
        """Add the step's units, measure, and decide whether the guard stops the run."""
        new = self.add(step, groups, rankings, cut)
        s = self.settings
        seed = self.seed + step
        now = agreement(new, s.resamples, seed)
        running = agreement(self.units, s.resamples, seed)
        recent = agreement([u for u in self.units if u.step > step - s.window], s.resamples, seed)
        stop = below = None
        for scope, a in (("over the run", running), (f"over the last {s.window} steps", recent)):
            if not _shown_below_chance(a, s.min_pairs, s.min_groups):
                continue
            truth = "the verifier" + (" and people's rankings" if a.sources.get("human") else "")
            shown = f"with {truth} {scope} is no better than chance ({a.describe()}; a 95% CI upper bound <= {CHANCE})"  # fmt: skip
            if not self.guard_on:
                below = shown
            else:
                stop = (
                    f"judge guard: step {step + 1}: the judge's agreement {shown}, so a "
                    "judge-only reward would train on noise or against the task. The run "
                    "stopped before this step's update (the adapter of the last step is kept). "
                    "Options: a stronger judge.model, or one trained on this policy's groups "
                    '(rankgym judge-train); reward.kind = "judge+verifiable"; or [monitor] '
                    'guard = "off" and --resume to train anyway'
                )
            break
        tied = tied_shorter([u for u in self.tied if u.step == step])
        signal = judge_signal([u for u in self.signal if u.step == step])
        return MonitorStep(step, now, running, recent, self.guard_on, stop, below, tied,
                           tied_shorter(self.tied), signal, judge_signal(self.signal))  # fmt: skip

    def summary(self) -> dict[str, Any]:
        """The run-wide numbers (``rankgym train``'s summary, ``rankgym demo --json``)."""
        a = agreement(self.units, self.settings.resamples, self.seed)
        n, rate = tied_shorter(self.tied)
        low = _shown_below_chance(a, self.settings.min_pairs, self.settings.min_groups)
        return {**a.to_dict(), "tied_pairs": n, "tied_shorter": rate,
                "signal": judge_signal(self.signal), "guard": self.guard_on,
                "below_chance": low, "dropped_at_step": self.dropped_at}  # fmt: skip
