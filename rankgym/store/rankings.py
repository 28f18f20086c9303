"""What a stored human ranking must be, checked when it is written and again when it is read.

A ranking maps each trajectory id of its group to a rank (1 = best; equal ranks are ties):
a JSON object whose keys are trajectory ids of that group and whose values are finite numbers
(not booleans) between 1 and the group's size. A skip stores ``{}``.

``Store.add_human_ranking`` refuses anything else with a StoreError naming the bad entry (NaN,
inf, a ghost id, rank 0). ``Store.human_rankings`` skips a stored row that is not a ranking
(written by another tool, damaged on disk: a null rank, a list, deep JSON, a ghost id) and
names it in a warning and in its ``problems`` list, so one bad row never crashes
``rankgym agreement``, judge-train or a dashboard page.

What it does not do: repair a damaged row, or check that ranks are contiguous (1, 2, 4 is a
valid ranking: only the order matters).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_RANKING_CHARS", "parse_ranking", "ranking_problem"]

MAX_RANKING_CHARS = 1_000_000
"""A stored ranking longer than this is damaged (a group has at most a few thousand ids)."""


def ranking_problem(ranking: Any, known: set[str], *, skipped: bool = False) -> str | None:
    """Why ``ranking`` is not a ranking of a group with trajectory ids ``known`` (None if it is)."""
    if not isinstance(ranking, dict):
        return f"is a JSON {type(ranking).__name__}, not an object of trajectory id -> rank"
    if skipped:
        return None if not ranking else "a skip must hold no ranks"
    ghosts = sorted(str(k) for k in ranking if k not in known)
    if ghosts:
        return f"names trajectories not in the group: {ghosts[:3]}"
    for tid, rank in ranking.items():
        if isinstance(rank, bool) or not isinstance(rank, (int, float)):
            return f"rank of {tid!r} is {str(rank)[:40]!r}, not a number"
        if not math.isfinite(rank) or not 1 <= rank <= max(1, len(known)):
            return f"rank of {tid!r} is {rank}; ranks are finite numbers from 1 to {len(known)}"
    return None


def parse_ranking(text: Any, known: set[str], *, skipped: bool = False) -> tuple[dict[str, float] | None, str | None]:  # fmt: skip
    """A stored ``ranking`` column as ``(ranking, None)``, or ``(None, why)`` if it is damaged."""
    if not isinstance(text, str):
        return None, f"is {type(text).__name__}, not JSON text"
    if len(text) > MAX_RANKING_CHARS:
        return None, f"is {len(text)} characters long"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as e:
        return None, f"is not JSON ({type(e).__name__})"
    why = ranking_problem(value, known, skipped=skipped)
    if why:
        return None, why
    return {str(k): float(v) for k, v in value.items()}, None
