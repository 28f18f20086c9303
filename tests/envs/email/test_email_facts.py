"""Fact scenarios as data: facts.toml's tables, the draw order of choices, keyword words."""

from __future__ import annotations

import random
import tomllib
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankgym.envs.email import facts
from rankgym.envs.email.facts import FactScenario, Words
from rankgym.envs.email.generator import QTYPES
from rankgym.envs.email.inbox import generator_files
from rankgym.envs.email.scenarios import SCENARIOS


def _b(seed: int) -> Any:
    return SimpleNamespace(rng=random.Random(seed))  # all that _write reads of a Builder


def test_every_table_of_facts_toml_is_one_scenario_and_every_fact_scenario_has_one():
    tables = tomllib.loads(facts.WORDS_FILE.read_text(encoding="utf-8"))
    rows = [s for s in SCENARIOS if isinstance(s, FactScenario)]
    assert sorted(tables) == sorted(s.name for s in rows)
    assert all(s.words.qtype in QTYPES for s in rows)


def test_the_words_file_is_part_of_the_inbox_cache_key():
    assert facts.WORDS_FILE in generator_files()


def test_a_table_with_an_unknown_key_is_refused(monkeypatch):
    table = {"subject": "s", "paras": ["p"], "question": "q", "qtype": "what", "answer": "a",
             "answer_kind": "text", "key_terms": [], "keywords": [], "colour": "red"}  # fmt: skip
    monkeypatch.setattr(facts, "_tables", lambda: {"x": table})
    with pytest.raises(TypeError, match="colour"):
        Words.of("x")


def test_a_choice_of_templates_is_drawn_before_the_tuple_slots_it_uses_in_field_order():
    slots = {"a": ("a1", "a2", "a3"), "c": ("c1", "c2"), "n": 7}
    text = ("{c} then {a} ({n})", "{a} then {c} ({n})")
    rng = random.Random(5)
    template = rng.choice(text)
    first, second = ("c", "a") if template.startswith("{c}") else ("a", "c")
    expected = {first: rng.choice(slots[first]), second: rng.choice(slots[second])}
    assert facts._write(_b(5), text, slots) == template.format(**{**slots, **expected})


@given(st.integers(0, 10_000))
def test_a_tuple_slot_used_twice_in_one_template_is_drawn_once(seed: int):
    out = facts._write(_b(seed), "{x}/{x}", {"x": ("p", "q", "r")})
    left, right = out.split("/")
    assert left == right and left in ("p", "q", "r")


@given(st.lists(st.text(st.characters(categories=["L"]), min_size=1, max_size=8), max_size=4))
def test_a_starred_keyword_stands_for_the_words_of_its_slot(words: list[str]):
    value = " ".join(words)
    assert facts._words(("*{v}", "{v}", "kw"), {"v": value}) == (*value.split(), value, "kw")
