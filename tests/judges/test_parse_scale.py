"""Issue 26: a reply whose scores fit no single scale is refused, not read on 0-100."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.judges.parse import JudgeOutputError, parse_judge_reply

LABELS = ["T1", "T2", "T3"]


def reply(values: list[float]) -> str:
    items = [{"trajectory_id": k, "score": v} for k, v in zip(LABELS, values, strict=True)]
    return json.dumps({"scores": items})


@pytest.mark.parametrize(
    "values",
    [[1.7, -0.3, 42], [1.7, 0.0, 42], [3, -1, 8], [55.5, 10, 0], [7.3, 2, 1], [101, 5, 0]],
)
def test_scores_that_fit_no_single_scale_are_an_error_naming_the_rule(values):
    with pytest.raises(JudgeOutputError, match="fits no single scale|between 0 and 1"):
        parse_judge_reply(reply(values), LABELS)


@pytest.mark.parametrize(
    ("values", "scale", "want"),
    [
        ([0.9, -0.3, 0.5], 1.0, [0.9, 0.0, 0.5]),  # a 0-1 reply: a small negative clamps to 0
        ([7.5, 3, 0], 10.0, [0.75, 0.3, 0.0]),
        ([42, 17, 100], 100.0, [0.42, 0.17, 1.0]),
        ([8, 3.0000000000000004, 0.5], 10.0, [0.8, 0.3, 0.05]),  # float noise is not a point
    ],
)
def test_replies_on_one_scale_are_divided_down(values, scale, want):
    out = parse_judge_reply(reply(values), LABELS)
    assert out.scale == scale
    assert [out.items[k].score for k in LABELS] == pytest.approx(want)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-200, 200, allow_nan=False), min_size=3, max_size=3))
def test_any_three_scores_parse_onto_0_1_or_are_refused(values):
    try:
        out = parse_judge_reply(reply(values), LABELS)
    except JudgeOutputError:
        assert max(values) > 1
        return
    assert all(0.0 <= it.score <= 1.0 for it in out.items.values())
    if out.scale > 1:
        assert min(values) >= 0 and max(values) <= out.scale
