"""Reading and checking the final answer of a ToolUse episode.

Part of ``rankgym.envs.tooluse`` (the rules are in the package docstring). A reply takes one
final answer: one that lists many candidates (``is_spam``) is wrong even when the last of them
is right. Candidates are counted among values the prompt does not already hold, so restating the
question ("7 + 9 = 16") or showing two or three steps of work is fine:

- number: 4 or more distinct numbers that are not in the prompt;
- date: 3 or more distinct dates not in the prompt;
- text: 3 or more distinct values of the answer's kind (weekdays, cities, departments,
  categories) not in the prompt, or 3 or more distinct quoted strings not in the prompt.

What it does not catch: two-way hedges ("15 or 16" is right when 16 is), and a list of
unquoted free words for an open text answer (a reversed string).
"""

from __future__ import annotations

import math
import re

from rankgym.envs.tooluse.tasks import ToolUseTask
from rankgym.envs.tooluse.tools import _CITIES, _DEPTS

SPAM_NUMBERS = 4
SPAM_DATES = 3
SPAM_TEXTS = 3
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_TEXT_KINDS: tuple[frozenset[str], ...] = (
    frozenset(_WEEKDAYS),
    frozenset(c.lower() for c in _CITIES),
    frozenset(_DEPTS),
    frozenset(("home", "office", "kitchen", "garden")),
)

_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL | re.IGNORECASE)
_NUMBER_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_QUOTED_RE = re.compile(r"'([^'\n]+)'|\"([^\"\n]+)\"|`([^`\n]+)`|\*\*([^*\n]+)\*\*")


def _region(text: str) -> str:
    tags = _ANSWER_TAG_RE.findall(text)
    return tags[-1] if tags else text


def numbers_in(text: str) -> list[float]:
    """Every number in the text, in order ("1,234.5" is one number; "03-15" is 3 and 15)."""
    out = []
    for m in _NUMBER_RE.finditer(text):
        s = m.group(0)
        if s.startswith("-") and m.start() > 0 and text[m.start() - 1].isalnum():
            s = s[1:]
        out.append(float(s.replace(",", "")))
    return out


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def _quoted(text: str) -> list[str]:
    return [next(g for g in m.groups() if g) for m in _QUOTED_RE.finditer(text)]


def is_spam(task: ToolUseTask, text: str) -> bool:
    """Does the answer region of ``text`` list many candidate answers? (see the module doc)"""
    region = _region(text or "")
    if task.answer_type == "number":
        given = {round(x, 4) for x in numbers_in(task.prompt)}
        return len({round(x, 4) for x in numbers_in(region)} - given) >= SPAM_NUMBERS
    if task.answer_type == "date":
        return len(set(_DATE_RE.findall(region)) - set(_DATE_RE.findall(task.prompt))) >= SPAM_DATES
    prompt_words = set(_norm(task.prompt).split())
    want = _norm(str(task.answer))
    for kind in _TEXT_KINDS:
        if want in kind:
            named = {w for w in _norm(region).split() if w in kind} - prompt_words
            if len(named) >= SPAM_TEXTS:
                return True
    quoted = {_norm(q) for q in _quoted(task.prompt)}
    return len({_norm(q) for q in _quoted(region)} - quoted) >= SPAM_TEXTS


def check_answer(task: ToolUseTask, text: str) -> bool:
    """Is ``text`` (a final assistant message) a correct answer to ``task``? See module doc."""
    region = _region(text or "")
    if is_spam(task, region):
        return False
    if task.answer_type == "number":
        nums = numbers_in(region)
        return bool(nums) and math.isclose(nums[-1], float(task.answer), rel_tol=0, abs_tol=0.0101)
    if task.answer_type == "date":
        dates = _DATE_RE.findall(region)
        return bool(dates) and dates[-1] == task.answer
    want = _norm(str(task.answer))
    if not want:
        return False
    quoted = _quoted(region)
    if quoted and _norm(quoted[-1]) == want:
        return True
    have = _norm(region).split()
    n = len(want.split())
    return have[-n:] == want.split()


def format_answer(task: ToolUseTask) -> str:
    """The reference answer as the oracle writes it."""
    if task.answer_type == "number":
        a = task.answer
        return str(a) if isinstance(a, int) else f"{a:.2f}"
    if task.answer_type == "text":
        return f"'{task.answer}'"
    return str(task.answer)
