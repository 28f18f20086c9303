"""The judge monitor's signal row: how much of the push toward success the judge's reward makes.

GRPO trains on each group's advantages: a trajectory's reward minus its group's mean. Per
judged group, this takes the judge's reward the way the run's reward reads it (the score, or
the pass/fail verdict at ``[reward] judge_threshold``) and the verifier's label
(``Trajectory.verifier_outcome``: an unscored episode cut at its turn limit is 0; the monitor
uses its pass/fail at the env's success threshold, what held-out success counts, since partial
credit can reward progress on a policy that has stopped succeeding), centres both per group, and
reports the cosine between the two over a step's trajectories (and over the run):

- **+1**: the judge's reward pushes every trajectory as the verifier's would;
- **0**: it carries none of the verifier's push (the verifier had none: 0 too);
- **below 0**: it pushes against the verifier;
- **None**: the judge's reward ties inside every group (all scores on one side of the cut):
  no signal at all, so the step learns nothing from the judge.

A group the verifier ties adds the judge's push but none of the verifier's, so a judge that
separates such a group lowers the cosine: it pushes on what the verifier calls noise, which
pairwise agreement never sees. Sessions 23-24 (bench/RESULTS.md): a fitted cut agreeing with
the verifier on 121 of 144 trajectories kept about 0.4 of the push toward success and taught
0.32x as much; a fixed cut of 0.5 that taught the policy to fail kept 0.00 and 0.31 (against
the partial-credit reward it looked as good: 0.23 and 0.55).
``trainer/monitor.py`` reports it per step and over the run (``judge_signal``).

What it does not do: weigh trajectories by their tokens or gradients (that is the update, not
the reward), or feed the guard.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rankgym.types import Group


@dataclass(frozen=True)
class SignalUnit:
    """One judged group's centred judge and verifier rewards, as the sums the cosine needs."""

    group_id: str
    step: int
    dot: float
    judge_sq: float
    verifier_sq: float


def _centred(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    return [v - mean for v in values]


def signal_unit(
    group: Group, step: int, cut: float | None = None, pass_at: float | None = None
) -> SignalUnit | None:
    """The :class:`SignalUnit` of a judged group (None: not judged, or fewer than two
    trajectories with both a score and a verifier label). ``cut``: the verdict ``score >= cut``
    is the judge's reward; None: the score itself. ``pass_at``: the verifier's side is its
    pass/fail (``outcome >= pass_at``, as the monitor compares) instead of its reward."""
    j = group.judgement
    if j is None or j.status != "ok" or not j.scores:
        return None
    scores = j.score_map()
    rows = [
        (float(scores[t.id]), outcome)
        for t in group.trajectories
        if t.id in scores and (outcome := t.verifier_outcome()) is not None
    ]
    if len(rows) < 2:
        return None
    return centred_unit(
        group.id,
        step,
        [s if cut is None else float(s >= cut) for s, _ in rows],
        [v if pass_at is None else float(v >= pass_at) for _, v in rows],
    )


def centred_unit(
    group_id: str, step: int, judge: Sequence[float], verifier: Sequence[float]
) -> SignalUnit:
    """The :class:`SignalUnit` of one group's aligned judge and verifier rewards (centred here)."""
    j, v = _centred(list(judge)), _centred(list(verifier))
    return SignalUnit(
        group_id,
        step,
        sum(a * b for a, b in zip(j, v, strict=True)),
        sum(a * a for a in j),
        sum(b * b for b in v),
    )


def judge_signal(units: Sequence[SignalUnit]) -> float | None:
    """The cosine over ``units`` (module docstring); None where the judge's reward pushes
    nothing (no unit, or every group tied by it)."""
    jj = sum(u.judge_sq for u in units)
    if jj < 1e-12:
        return None
    vv = sum(u.verifier_sq for u in units)
    return sum(u.dot for u in units) / math.sqrt(jj * vv) if vv > 0 else 0.0
