"""The judge monitor's tied-pair row: how the judge orders pairs the verifier ties.

Inside a pair whose verifier rewards are equal (both fail, both succeed; an episode cut at its
turn limit counts 0, as in judge-train's data), the verifier gives GRPO no advantage, but a
judge-only reward still does: whatever the judge prefers there is what the policy learns.
:func:`tied_unit` counts, per judged group (constant-reward groups included), the tied pairs
whose judge-visible lengths differ and how often the judge scored the shorter one higher (a
judge tie counts half, so an indifferent judge scores 0.5). ``trainer/monitor.py`` reports it
per step and over the run (``judge_tied_shorter``, ``monitor_tied_pairs``).

What it does not do: say which of two tied trajectories is better (nothing does), or feed the
guard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rankgym.judges.judge_data import visible_length
from rankgym.types import SCORE_TIE, Group


@dataclass(frozen=True)
class TiedUnit:
    """One group's verifier-tied pairs of different length and the judge's lean among them."""

    group_id: str
    step: int
    pairs: int
    shorter: float
    """Pairs where the judge scores the shorter one higher, plus half of those it ties."""


def tied_unit(group: Group, step: int) -> TiedUnit | None:
    """The :class:`TiedUnit` of a judged group (None: not judged, or no such pair)."""
    j = group.judgement
    if j is None or j.status != "ok" or not j.scores:
        return None
    scores = j.score_map()
    known = [
        (float(t.verifiable_reward or 0.0), visible_length(t), float(scores[t.id]))
        for t in group.trajectories
        if t.id in scores and (t.verifiable_reward is not None or t.truncated)
    ]
    pairs, shorter = 0, 0.0
    for k, (ra, la, sa) in enumerate(known):
        for rb, lb, sb in known[k + 1 :]:
            if abs(ra - rb) > SCORE_TIE or la == lb:
                continue
            pairs += 1
            ds = (sa - sb) if la < lb else (sb - sa)  # the shorter one's score minus the longer's
            shorter += 0.5 if abs(ds) <= SCORE_TIE else float(ds > 0)
    return TiedUnit(group.id, step, pairs, shorter) if pairs else None


def tied_shorter(units: Sequence[TiedUnit]) -> tuple[int, float | None]:
    """(pairs, share where the judge preferred the shorter) over ``units``."""
    n = sum(u.pairs for u in units)
    return n, (sum(u.shorter for u in units) / n if n else None)
