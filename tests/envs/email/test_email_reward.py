"""Email reward: answer normalisation, partial credit, stuffing, the optional LLM checker."""

from __future__ import annotations

import pytest

from rankgym.envs.email.reward import (
    CORRECT_WITH_SOURCE,
    CORRECT_WITHOUT_SOURCE,
    AnswerPart,
    LLMAnswerChecker,
    answer_matches,
    contains_value,
    is_abstention,
    score_episode,
)

AMOUNT = (AnswerPart("amount", "$4,317.50"),)
SRC = "inbox0-00042"


def score(answer, sources=(SRC,), found=(), read=(), parts=AMOUNT, checker=None):
    return score_episode(
        question="How much?",
        parts=parts,
        source_id=SRC,
        answer=answer,
        sources=list(sources),
        found_ids=list(found),
        read_ids=list(read),
        checker=checker,
    )


@pytest.mark.parametrize(
    "answer",
    ["$4,317.50", "It was 4317.5 dollars.", "USD 4317.50", "The total due is $4,317.50."],
)
def test_amounts_match_in_any_format(answer):
    assert answer_matches(answer, AMOUNT) == (True, [])


@pytest.mark.parametrize("answer", ["$4,317", "$43,175.00", "4,371.50"])
def test_other_amounts_do_not_match(answer):
    assert not answer_matches(answer, AMOUNT)[0]


@pytest.mark.parametrize(
    "answer",
    [
        "2024-06-24 14:45",
        "Monday 24 June at 2:45 PM",
        "Mon, Jun 24, 2024, 14:45",
        "the 24th of June, 2:45pm",
        "June 24th at 14:45",
    ],
)
def test_datetimes_match_in_any_format(answer):
    assert answer_matches(answer, (AnswerPart("datetime", "2024-06-24 14:45"),))[0]


@pytest.mark.parametrize(
    "answer", ["June 24 at 3:45 PM", "June 25 at 2:45 PM", "2023-06-24 14:45", "14:45"]
)
def test_wrong_date_time_or_year_does_not_match(answer):
    assert not answer_matches(answer, (AnswerPart("datetime", "2024-06-24 14:45"),))[0]


def test_text_and_code_normalisation():
    venue = (AnswerPart("text", "Whitethorn Pavilion"),)
    assert answer_matches("At the whitethorn pavilion, in Tallinn.", venue)[0]
    assert not answer_matches("Whitethorn Hotel", venue)[0]
    room = (AnswerPart("text", "Birch room", ("Birch",)),)
    assert answer_matches("Birch", room)[0]
    code = (AnswerPart("code", "PO-921116", ("921116",)),)
    assert answer_matches("po 921116", code)[0] and answer_matches("921116", code)[0]
    assert not answer_matches("PO-921117", code)[0]
    name = (AnswerPart("text", "José Núñez"),)
    assert answer_matches("jose nunez", name)[0]
    assert not answer_matches("José", name)[0]  # first name alone is not enough


def test_stuffing_is_not_credited_and_is_flagged():
    assert answer_matches("$1.00 or $4,317.50 or $9.00", AMOUNT) == (False, ["answer_stuffing"])
    long = "maybe " * 70 + "$4,317.50"
    assert answer_matches(long, AMOUNT) == (False, ["answer_stuffing"])
    many = ", ".join(f"June {d} at 2:45 PM" for d in range(20, 26))
    assert not answer_matches(many, (AnswerPart("datetime", "2024-06-24 14:45"),))[0]
    # two values are allowed (e.g. "moved from X to Y")
    assert answer_matches("moved from $4,000.00 to $4,317.50", AMOUNT)[0]


def test_partial_credit_table():
    # correct answer with the source: full reward
    assert score("$4,317.50", found=[SRC], read=[SRC]).reward == CORRECT_WITH_SOURCE == 1.0
    # correct answer, source missing or wrong
    assert score("$4,317.50", sources=[], found=[SRC]).reward == CORRECT_WITHOUT_SOURCE
    assert score("$4,317.50", sources=["inbox0-00001"], read=[SRC]).reward == 0.75
    # no answer / abstention: 0.1 for finding the source, 0.1 for reading it
    assert score(None).reward == 0.0
    assert score(None, found=[SRC]).reward == 0.1
    assert score("I don't know", found=[SRC], read=[SRC]).reward == 0.2
    # a wrong answer earns half of that: worse than saying "I don't know"
    wrong = score("$12.00", found=[SRC], read=[SRC])
    assert wrong.reward == 0.1 and wrong.answered and not wrong.answer_correct
    assert score("$12.00").reward == 0.0
    # reading other emails earns nothing
    assert score(None, found=["x"], read=["y"]).reward == 0.0


def test_source_stuffing_and_unsupported_answers_raise_signals():
    many = [f"inbox0-{i:05d}" for i in range(40, 50)]
    bd = score("$4,317.50", sources=many, found=[SRC], read=[SRC])
    assert bd.reward == CORRECT_WITHOUT_SOURCE and "source_stuffing" in bd.hack_signals
    assert not bd.source_correct
    bd = score("$4,317.50")  # right answer, never searched or read: a guess or a leak
    assert bd.reward == 1.0 and bd.hack_signals == ["unsupported_correct_answer"]


def test_abstention_detection():
    for a in ("", "I don't know.", "Unknown", "I could not find it"):
        assert is_abstention(a)
    assert not is_abstention("Birch room")


def test_multi_part_answers_need_every_part():
    parts = (AnswerPart("text", "island trailhead"), AnswerPart("time", "08:00"))
    assert answer_matches("At 8 AM at the Island Trailhead", parts)[0]
    assert not answer_matches("At the island trailhead", parts)[0]
    assert not answer_matches("8:00", parts)[0]


def test_contains_value_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="unknown answer kind"):
        contains_value("x", "y", "colour")


def test_llm_checker_only_rescues_failed_text_answers():
    parts = (AnswerPart("text", "Grandma's house"),)
    yes = LLMAnswerChecker("openai/gpt-4o-mini", mock_response='{"equivalent": true}')
    no = LLMAnswerChecker("openai/gpt-4o-mini", mock_response='{"equivalent": false}')
    assert score("at her grandmother's home", parts=parts).reward == 0.0
    bd = score("at her grandmother's home", parts=parts, checker=yes)
    assert bd.reward == 1.0 and bd.checked_by_llm
    assert score("at her grandmother's home", parts=parts, checker=no).reward == 0.0
    # never consulted for non-text kinds, and never turns a pass into a fail
    assert score("$12.00", checker=yes).reward == 0.0
    assert score("Grandma's house", parts=parts, checker=no).reward == 1.0
    broken = LLMAnswerChecker("openai/gpt-4o-mini", mock_response="not json at all")
    assert score("her grandmother's home", parts=parts, checker=broken).reward == 0.0
