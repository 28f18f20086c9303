"""Reading and checking the final answer of a ToolUse episode.

Part of ``rankgym.envs.tooluse`` (the rules are in the package docstring).
"""

from __future__ import annotations

import math
import re

from rankgym.envs.tooluse.tasks import ToolUseTask

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


def check_answer(task: ToolUseTask, text: str) -> bool:
    """Is ``text`` (a final assistant message) a correct answer to ``task``? See module doc."""
    region = _region(text or "")
    if task.answer_type == "number":
        nums = numbers_in(region)
        return bool(nums) and math.isclose(nums[-1], float(task.answer), rel_tol=0, abs_tol=0.0101)
    if task.answer_type == "date":
        dates = _DATE_RE.findall(region)
        return bool(dates) and dates[-1] == task.answer
    want = _norm(str(task.answer))
    if not want:
        return False
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED_RE.finditer(region)]
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
