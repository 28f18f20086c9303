"""Groups too big for the judge's context: overlapping windows merged onto one scale."""

from __future__ import annotations

import pytest

from rankgym.judges.subsets import merge_subset_scores, overlapping_windows


def test_merge_subset_scores_recovers_offsets():
    true = {"a": 0.9, "b": 0.6, "c": 0.3, "d": 0.1}
    subsets = [{"a": 0.9, "b": 0.6, "c": 0.3}, {"c": 0.3 + 0.2, "d": 0.1 + 0.2}]
    merged = merge_subset_scores(list(true), subsets)
    assert merged == pytest.approx(true, abs=1e-9)
    windows = overlapping_windows(list("abcdefg"), 3)
    assert set().union(*windows) == set("abcdefg")
    assert all(set(w1) & set(w2) for w1, w2 in zip(windows, windows[1:], strict=False))
