"""Is the policy learning to never answer? Episodes cut at the turn limit, step by step.

An env whose reward pays progress (ToolUse's ``chain_credit``, a partial-credit verifier, a judge
that likes long tool chains) can teach a policy to keep calling tools until the rollout cuts it
off: in session 27 of bench/RESULTS.md one seed went from 3 of 18 truncated episodes at step 1
to 13 of 18 at step 4. The verifier's success rate shows that late; the truncated share shows
it at once.

:func:`watch_truncation` counts a step's truncated episodes and flags the step when their share
is shown higher than at the run's first step (one-sided Fisher exact test, ``ALPHA``). What it
does not do: stop the run or change any reward. It is a warning to read the env's reward for
episodes that never answer (docs/training.md, "Episodes cut at the turn limit"). Each step is
tested against the first on its own, so over a long run with a steady share an odd false flag
can appear: read it as a prompt to look, not as proof.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scipy.stats import fisher_exact

from rankgym.types import Group

__all__ = ["ALPHA", "truncation_rising", "watch_truncation"]

ALPHA = 0.05
"""A step is flagged when the one-sided Fisher p-value against the first step is below this."""


def truncation_rising(first: tuple[int, int], now: tuple[int, int], alpha: float = ALPHA) -> bool:
    """True when ``now``'s share of truncated episodes is shown higher than ``first``'s.

    Each argument is (truncated, episodes). One-sided Fisher exact test at ``alpha``; a step with
    no episodes, or a share not above the first's, is never flagged.
    """
    (a, n), (b, m) = first, now
    if not (0 <= a <= n and 0 <= b <= m):
        raise ValueError(f"counts must be 0 <= truncated <= episodes, got {first} and {now}")
    if n == 0 or m == 0 or b * n <= a * m:
        return False
    _, p = fisher_exact([[b, m - b], [a, n - a]], alternative="greater")
    return bool(p < alpha)


def step_counts(groups: Sequence[Group]) -> tuple[int, int]:
    """(truncated, episodes) over a step's groups."""
    episodes = [t for g in groups for t in g.trajectories]
    return sum(bool(t.truncated) for t in episodes), len(episodes)


def watch_truncation(
    step: int, groups: Sequence[Group], logged: Sequence[dict[str, Any]]
) -> tuple[dict[str, Any], str | None]:
    """The step's ``truncated_trajectories`` and, from the second step on, ``truncation_rising``
    against the run's first step (read from ``logged``, the run's stored step rows; a first row
    without the count, written by an older version, is not compared); with a warning to print
    when the step is flagged, else None."""
    now = step_counts(groups)
    fields: dict[str, Any] = {"truncated_trajectories": now[0]}
    first = next((r.get("metrics") or {} for r in logged if r.get("step") == 0), {})
    base, episodes = first.get("truncated_trajectories"), first.get("trajectories")
    if step == 0 or not isinstance(base, int) or not isinstance(episodes, int):
        return fields, None
    fields["truncation_rising"] = rising = truncation_rising((base, episodes), now)
    if not rising:
        return fields, None
    return fields, (
        f"step {step + 1}: {now[0]}/{now[1]} episodes were cut at the turn limit before answering, "
        f"against {base}/{episodes} at step 1 (Fisher p < {ALPHA}): the policy may be learning "
        "to never answer. Check what the env's reward pays an episode that never answers "
        "(docs/training.md, 'Episodes cut at the turn limit')."
    )
