"""Judging a group that does not fit the judge's context: overlapping windows, one scale.

:func:`overlapping_windows` cuts a presentation order into windows that share items;
:func:`merge_subset_scores` puts the windows' scores on one scale by least squares with one
offset per window.

What it does not do: make windows comparable when the judge's scale drifts in ways other than
an offset; merged scores are only as consistent as the overlaps make them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["merge_subset_scores", "overlapping_windows"]


def merge_subset_scores(n_items: list[str], subsets: list[dict[str, float]]) -> dict[str, float]:
    """Merge scores from overlapping subsets into one scale.

    Model: ``score_in_subset_m(i) = g_i + b_m`` with ``b_0 = 0``; least squares for ``g`` and
    the offsets. Every item must be in at least one subset; subsets should be connected by
    overlaps (otherwise their offsets are arbitrary). Result clamped to [0, 1].
    """
    idx = {t: k for k, t in enumerate(n_items)}
    n, m = len(n_items), len(subsets)
    rows, rhs = [], []
    for s_i, sub in enumerate(subsets):
        for t, v in sub.items():
            row = np.zeros(n + m - 1)
            row[idx[t]] = 1.0
            if s_i > 0:
                row[n + s_i - 1] = 1.0
            rows.append(row)
            rhs.append(v)
    sol, *_ = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)
    return {t: float(min(1.0, max(0.0, sol[idx[t]]))) for t in n_items}


def overlapping_windows(order: list[str], size: int) -> list[list[str]]:
    """Windows of ``size`` over ``order``, consecutive windows sharing ``max(1, size//3)``."""
    n = len(order)
    if size >= n:
        return [list(order)]
    overlap = max(1, size // 3)
    step = max(1, size - overlap)
    out, start = [], 0
    while True:
        end = min(n, start + size)
        out.append(order[max(0, end - size) : end])
        if end >= n:
            return out
        start += step
