"""Fact scenarios as data: the words in ``facts.toml``, the draws in two small functions.

Import path: ``rankgym.envs.email.facts``. Most scenarios follow one recipe: draw the fact's
identity and its distractors' identities (the scenario's ``pick``); write one email per
identity from the same sender, the fact first (``letter`` draws each email's values); ask one
question over the group. ``FactScenario`` runs that recipe; the words of each scenario (its
subject, paragraphs, question, answer, key terms, keywords, aliases) are one table of
``facts.toml``, named like the scenario, read into :class:`Words`. They are ``str.format``
templates over slots:

- ``pick``'s slots (the fact's identity, and ``sender``, a ``Person``), then each email's own
  ``letter`` slots (``when`` is its date). The emails after the first, and the question, also
  see the fact email's slots, so a distractor can avoid the fact's value and the question can
  name it. ``{b.org}`` reads the ``Builder``.
- A template given as an array is a choice: one is drawn (``rng.choice``) when it is written.
  A slot whose value is a tuple is a choice too, drawn when a template using it is written, in
  the order its fields appear.
- A keyword starting with ``*`` stands for the words of the rest (``"*{role}"``).

Random draws happen in this order, which keeps an inbox a pure function of its seed: ``pick``;
for each email ``letter``, the subject, each paragraph, then (``signed``) the greeting and
sign-off; then the question. Not covered: scenarios whose emails are threads or differently
shaped distractors (``expense``, ``meeting_moved`` and ``flight`` are functions).
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from rankgym.envs.email.builder import Builder, Letter

WORDS_FILE = Path(__file__).with_name("facts.toml")

Slots = dict[str, Any]
Text = str | tuple[str, ...]
"""A template, or a tuple of templates one of which is drawn."""
Pick = Callable[[Builder], "tuple[Slots, Sequence[Any] | None]"]
"""The scenario's slots and its identities (the fact's first; None when none is free)."""
Draw = Callable[[Builder, Slots, int, Any], Slots]
"""The values of email ``k`` (0: the fact) for one identity; it sees ``pick``'s slots and,
from the second email on, the fact email's."""

_FORMATTER = string.Formatter()


@cache
def _tables() -> dict[str, Any]:
    return tomllib.loads(WORDS_FILE.read_text(encoding="utf-8"))


def _text(value: str | list[str]) -> Text:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True, kw_only=True)
class Words:
    """One table of ``facts.toml``: what a fact scenario's emails and question say."""

    # the emails, one per identity (the fact's first)
    subject: Text
    paras: tuple[Text, ...]
    """The body, paragraph by paragraph (a letter adds a greeting and a sign-off)."""
    signed: bool = True
    """A letter; False: an automated email whose body is ``paras`` as written."""
    # the question over them, its answer, and what finds the fact email
    question: Text
    qtype: str
    """who, what, when, where or how much (``types.QTYPES``)."""
    answer: str
    """Filled from the fact email's slots, e.g. ``{amount}``."""
    answer_kind: str
    """How the reward compares answers (``types.Question``)."""
    aliases: tuple[str, ...] = ()
    """Other accepted forms of the answer."""
    key_terms: tuple[str, ...]
    """Phrases of the question that only the fact email holds together with the answer."""
    keywords: tuple[str, ...]
    """What the oracle searches for; ``*{slot}`` stands for the slot's words."""

    @classmethod
    def of(cls, name: str) -> Words:
        """The table ``[name]`` of ``facts.toml`` (KeyError names a missing one, TypeError an
        unknown key)."""
        table = dict(_tables()[name])
        table["subject"], table["question"] = _text(table["subject"]), _text(table["question"])
        table["paras"] = tuple(_text(p) for p in table["paras"])
        for key in ("key_terms", "keywords", "aliases"):
            table[key] = tuple(table.get(key, ()))
        return cls(**table)


def _write(b: Builder, text: Text, slots: Mapping[str, Any]) -> str:
    """``text`` with its slots filled, drawing the template and any tuple slot it uses."""
    template = b.rng.choice(text) if isinstance(text, tuple) else text
    drawn: Slots = {}
    for _, field_name, _, _ in _FORMATTER.parse(template):
        key = (field_name or "").split(".")[0].split("[")[0]
        if key and key not in drawn and isinstance(slots.get(key), tuple):
            drawn[key] = b.rng.choice(slots[key])
    return template.format_map({**slots, **drawn})


def _fill(templates: tuple[str, ...], slots: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(t.format_map(slots) for t in templates)


def _words(templates: tuple[str, ...], slots: Mapping[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    for t in templates:
        if t.startswith("*"):
            out += t[1:].format_map(slots).split()
        else:
            out.append(t.format_map(slots))
    return tuple(out)


@dataclass(frozen=True)
class FactScenario:
    """A fact scenario (module docstring): called with a ``Builder``, it adds the emails and
    the question and returns True, or adds nothing and returns False when ``pick`` finds no
    free identity. Its words are the ``facts.toml`` table named ``name``."""

    name: str
    """The scenario id stored with the question (``Question.scenario``)."""
    pick: Pick
    letter: Draw
    words: Words = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "words", Words.of(self.name))

    def __call__(self, b: Builder) -> bool:
        slots, identities = self.pick(b)
        if identities is None:
            return False
        w = self.words
        slots = {**slots, "b": b}

        def write(k: int, identity: Any) -> Letter:
            own = self.letter(b, slots, k, identity)
            s = {**slots, **own}
            subject = _write(b, w.subject, s)
            paras = [_write(b, p, s) for p in w.paras]
            sender = s["sender"]
            body = b.letter(sender, b.owner, *paras) if w.signed else "\n\n".join(paras)
            if k == 0:
                slots.update(own)  # the fact's values: seen by the distractors and the question
            return Letter(sender, own["when"], subject, body)

        drafts, _ = b.fact_group(identities, write)
        question = _write(b, w.question, slots)
        return b.ask(
            drafts, w.qtype, self.name, question, w.answer.format_map(slots), w.answer_kind,
            _fill(w.key_terms, slots), _words(w.keywords, slots), _fill(w.aliases, slots),
        )  # fmt: skip
