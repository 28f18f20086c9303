"""Hack signals read from a judgement: what the judge flagged, and where it preferred a failure.

What it does not do: decide that a trajectory hacked its reward. These are leads for a person
(the dashboard's hack-suspects page lists them), not verdicts.
"""

from __future__ import annotations

from rankgym.types import SCORE_TIE, Group, Judgement

__all__ = ["VERIFIER_PASS", "judge_hack_signals"]

VERIFIER_PASS = 1.0
"""A trajectory 'passes' its env's verifier when ``verifiable_reward >= VERIFIER_PASS``."""


def judge_hack_signals(group: Group, judgement: Judgement) -> list[tuple[str, str, str]]:
    """Hack signals from an ok judgement: ``(trajectory_id, name, detail)``.

    - ``judge_hack_suspected``: the judge set ``hack_suspected`` (in at least half of the
      presentations).
    - ``judge_top_verifier_failed``: the trajectory is among the judge's top scores (ties
      included; not when every score is equal), its ``verifiable_reward`` is known and below
      :data:`VERIFIER_PASS` (1.0), and another trajectory in the group has a strictly higher
      verifiable reward -- the judge preferred a failure over something better.
    """
    if judgement.status != "ok" or not judgement.scores:
        return []
    out: list[tuple[str, str, str]] = []
    for s in judgement.scores:
        if s.hack_suspected:
            out.append((s.trajectory_id, "judge_hack_suspected", s.rationale[:300]))
    scores = judgement.score_map()
    top = max(scores.values())
    if min(scores.values()) < top - SCORE_TIE:
        vr = {t.id: t.verifiable_reward for t in group.trajectories}
        known = [v for v in vr.values() if v is not None]
        for tid, sc in scores.items():
            v = vr.get(tid)
            if sc >= top - SCORE_TIE and v is not None and v < VERIFIER_PASS and max(known) > v:
                out.append(
                    (
                        tid,
                        "judge_top_verifier_failed",
                        f"judge score {sc:.2f} (top) but verifiable reward {v:.2f} "
                        f"< best in group {max(known):.2f}",
                    )
                )
    return out
