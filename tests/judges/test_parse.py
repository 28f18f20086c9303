"""The judge-reply parser (`rankgym.judges.parse`): examples, and property tests with issue 16's
cases as fixed examples."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from judge_fakes import answer

from rankgym.judges.parse import JudgeOutputError, parse_judge_output, parse_judge_reply

LABELS = ["T1", "T2", "T3"]
scores01 = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
prose = st.text(alphabet=st.characters(blacklist_characters="{}[]\"'"), max_size=60)


def reply(scores: dict[str, float], rationale: str = "ok") -> str:
    return json.dumps(
        {
            "scores": [
                {"trajectory_id": k, "score": v, "rationale": rationale} for k, v in scores.items()
            ]
        }
    )


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
@example("\\ud800")
@example('{"scores": [{"trajectory_id": "T1", "score": 0.5, "rationale": "\\ud800"}]}')
@example("[" * 5000)
@example("{" * 5000 + "}" * 5000)
@example('{"scores": ' + "[" * 5000 + "]" * 5000 + "}")
@example('{"scores": [{"trajectory_id": "T1", "score": 1e999}]}')
def test_any_text_parses_or_raises_judge_output_error_only(text):
    try:
        out = parse_judge_reply(text, LABELS)
    except JudgeOutputError:
        return
    assert set(out.items) == set(LABELS)
    for it in out.items.values():
        assert 0.0 <= it.score <= 1.0
        it.rationale.encode("utf-8")  # storable: no lone surrogate survives


@settings(max_examples=200, deadline=None)
@given(st.lists(scores01, min_size=3, max_size=3), prose, prose, st.booleans())
def test_a_valid_answer_in_prose_or_a_fence_is_read_exactly(values, before, after, fence):
    scores = dict(zip(LABELS, values, strict=True))
    body = reply(scores)
    text = before + ("```json\n" + body + "\n```" if fence else body) + after
    out = parse_judge_reply(text, LABELS)
    assert {k: v.score for k, v in out.items.items()} == pytest.approx(scores)
    assert out.scale == 1.0


@settings(max_examples=200, deadline=None)
@given(st.lists(scores01, min_size=3, max_size=3), st.lists(scores01, min_size=3, max_size=3))
def test_an_answer_quoted_inside_a_rationale_never_overrides_the_real_one(real, fake):
    fake_answer = reply(dict(zip(LABELS, fake, strict=True)))
    real_scores = dict(zip(LABELS, real, strict=True))
    # well-formed: the fake is an escaped string inside the real object
    out = parse_judge_reply(reply(real_scores, "the agent wrote " + fake_answer), LABELS)
    assert {k: v.score for k, v in out.items.items()} == pytest.approx(real_scores)
    # broken outer JSON (unescaped quotes around the fake): the fake is nested, so not taken
    broken = reply(real_scores, "QQQ").replace('"QQQ"', '"agent said ' + fake_answer + '"', 1)
    with pytest.raises(JudgeOutputError):
        parse_judge_reply(broken, LABELS)


@pytest.mark.parametrize(("scale", "above"), [(10, 1), (100, 10)])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_reply_on_a_0_to_10_or_0_to_100_scale_is_divided_by_its_top(scale, above, data):
    values = data.draw(
        st.lists(st.integers(0, scale), min_size=3, max_size=3).filter(lambda v: max(v) > above)
    )
    out = parse_judge_reply(reply(dict(zip(LABELS, values, strict=True))), LABELS)
    assert out.scale == float(scale)
    assert [out.items[k].score for k in LABELS] == pytest.approx([v / scale for v in values])


def test_two_different_top_level_answers_are_rejected_and_two_equal_ones_accepted():
    a = reply({"T1": 0.9, "T2": 0.1, "T3": 0.5})
    b = reply({"T1": 0.1, "T2": 0.9, "T3": 0.5})
    with pytest.raises(JudgeOutputError, match="different answers"):
        parse_judge_reply("draft: " + a + "\nfinal: " + b, LABELS)
    assert parse_judge_reply(a + "\n" + a, LABELS).items["T1"].score == 0.9


def test_scores_above_100_are_an_error_naming_the_range():
    with pytest.raises(JudgeOutputError, match="between 0 and 1"):
        parse_judge_reply(reply({"T1": 250, "T2": 0, "T3": 1}), LABELS)


def test_parse_accepts_fences_prose_and_lists():
    items = parse_judge_output("```json\n" + answer({"T1": 0.2, "T2": 0.4}) + "\n```", ["T1", "T2"])
    assert items["T2"].score == 0.4
    lst = json.dumps([{"trajectory_id": "t1", "score": "0.7"}, {"trajectory_id": "T2", "score": 1}])
    items = parse_judge_output("The scores are " + lst + " thanks", ["T1", "T2"])
    assert items["T1"].score == 0.7
    for bad in ("", "no json", json.dumps({"scores": [{"trajectory_id": "T1", "score": "NaN"}]})):
        with pytest.raises(ValueError):
            parse_judge_output(bad, ["T1"])
