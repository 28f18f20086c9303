"""Reading a judge's reply: find the JSON answer, validate it, match scores to labels.

:func:`parse_judge_reply` accepts the answer object alone, inside a code fence, surrounded by
prose, or as a bare list of entries, and checks that every expected label appears exactly once
with a finite score. Only JSON values at the top level of the reply count, so an answer quoted
inside a rationale cannot override the real one. A reply on a 0-10 or 0-100 scale is detected
from its largest score and divided down, but only when every score is one of that scale's
points (0-10: whole or half points; 0-100: whole numbers; no negatives): ``[1.7, -0.3, 42]``
fits no scale and is refused. A 0-1 reply's negative scores clamp to 0. Lone surrogates
become U+FFFD, so whatever is accepted can be stored. Nothing but :class:`JudgeOutputError`
escapes.

What it does not do: repair a reply (a wrong reply raises :class:`JudgeOutputError`, and the
caller retries with the error shown to the judge), or judge whether the scores are sensible.
The scale is a guess from the numbers: a 0-10 reply whose scores are all at most 1 reads as 0-1.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

__all__ = [
    "JudgeOutput",
    "JudgeOutputError",
    "ParsedReply",
    "ScoreItem",
    "clean_text",
    "parse_judge_output",
    "parse_judge_reply",
]


class JudgeOutputError(ValueError):
    """The judge answered, but not with one valid score per trajectory id."""


class ScoreItem(BaseModel):
    """One entry of the judge's answer."""

    model_config = ConfigDict(extra="ignore")
    trajectory_id: str
    score: float
    rationale: str = ""
    hack_suspected: bool = False

    @field_validator("trajectory_id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> str:
        return clean_text(str(v)).strip()

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("score must be a finite number")
        return v

    @field_validator("rationale", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else clean_text(str(v))


class JudgeOutput(BaseModel):
    """The JSON object the judge must return."""

    model_config = ConfigDict(extra="ignore")
    scores: list[ScoreItem]


_SURROGATE = re.compile("[\ud800-\udfff]")
SCALES = (1.0, 10.0, 100.0)
"""Score scales a reply may use; scores are divided by the smallest one that holds them all."""
SCALE_STEPS = {10.0: 0.5, 100.0: 1.0}
"""The points a 0-10 and a 0-100 reply use (half points, whole numbers): a reply off its
scale's points is refused, not guessed at."""


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (``\\ud800`` decoded from JSON) replaced by U+FFFD.

    A lone surrogate cannot be encoded as UTF-8, so it would crash the store and the cache.
    """
    return _SURROGATE.sub("\ufffd", text)


def _top_level_values(text: str) -> list[Any]:
    """JSON values that start at bracket depth 0 of ``text``, left to right, never overlapping.

    A value nested inside another one (a JSON object quoted in a rationale, also when the outer
    object is broken JSON) is never returned on its own: after a ``{``/``[`` that does not
    decode, brackets are counted (outside strings) until it closes. Linear in ``len(text)``
    apart from the decoder's own work per top-level value.
    """
    dec = json.JSONDecoder()
    out: list[Any] = []
    depth, in_str, esc, i, n = 0, False, False, 0, len(text)
    while i < n:
        ch = text[i]
        if depth == 0:
            if ch in "{[":
                try:
                    value, end = dec.raw_decode(text, i)
                except (ValueError, RecursionError):
                    depth = 1
                else:
                    out.append(value)
                    i = end
                    continue
        elif in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        i += 1
    return out


def _answer_shaped(value: Any) -> dict[str, Any] | None:
    """``value`` as ``{"scores": [...]}`` when it looks like an answer, else None."""
    if isinstance(value, dict) and "scores" in value:
        return value
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and "trajectory_id" in v for v in value)
    ):
        return {"scores": value}
    return None


def _match(parsed: JudgeOutput, labels: list[str]) -> dict[str, ScoreItem]:
    """Label -> entry, or :class:`JudgeOutputError` naming missing, duplicate, unknown ids."""
    canon = {lab.lower(): lab for lab in labels}
    items: dict[str, ScoreItem] = {}
    dup, unknown = [], []
    for it in parsed.scores:
        lab = canon.get(it.trajectory_id.lower())
        if lab is None:
            unknown.append(it.trajectory_id)
        elif lab in items:
            dup.append(lab)
        else:
            items[lab] = it
    missing = [lab for lab in labels if lab not in items]
    problems = []
    if missing:
        problems.append(f"missing ids {missing}")
    if dup:
        problems.append(f"duplicate ids {dup}")
    if unknown:
        problems.append(f"unknown ids {unknown[:10]}")
    if problems:
        raise JudgeOutputError(
            f"expected exactly one entry for each of {labels}, got {len(parsed.scores)} "
            "entries: " + ", ".join(problems)
        )
    return items


def _rescale(items: dict[str, ScoreItem]) -> float:
    """Put scores on [0, 1]: detect a 0-10 or 0-100 reply from its largest score.

    Returns the scale found. A 0-1 reply's negative scores clamp to 0. A reply whose largest
    score is above 1 is read on 0-10 only when every score is a whole or half point from 0 to
    10, on 0-100 only when every score is a whole number from 0 to 100; anything else (above
    100, a negative next to a score above 1, ``[1.7, -0.3, 42]``: 0-10 points and 0-100 points
    in one reply) fits no single scale and is an error, so the judge is asked again.
    """
    scores = [it.score for it in items.values()]
    top = max(scores, default=0.0)
    scale = 1.0
    if top > 1:
        scale = next((s for s in SCALES[1:] if top <= s), 0.0)
        step = SCALE_STEPS.get(scale)
        if step is None or not all(v >= 0 and _on_grid(v, step) for v in scores):
            shown = ", ".join(f"{v:g}" for v in scores[:10])
            raise JudgeOutputError(
                f"scores must be between 0 and 1; got [{shown}], which fits no single scale "
                "(a 0-10 reply takes whole or half points, a 0-100 reply whole numbers, "
                "neither takes negatives)"
            )
    for it in items.values():
        it.score = min(1.0, max(0.0, it.score / scale))
    return scale


def _on_grid(value: float, step: float) -> bool:
    return abs(value / step - round(value / step)) < 1e-6


@dataclass
class ParsedReply:
    """A validated reply: one entry per label, scores on [0, 1], and the scale detected."""

    items: dict[str, ScoreItem]
    scale: float = 1.0


def parse_judge_reply(text: str, labels: list[str]) -> ParsedReply:
    """Validate a judge reply against the expected labels.

    Accepts the object alone, inside a code fence or surrounded by prose, and a bare list of
    entries. Only top-level JSON values count (one quoted inside a rationale does not); when
    several top-level answers are valid and disagree, the reply is rejected. Scores on a 0-10
    or 0-100 scale are divided down (``scale`` says which). Raises :class:`JudgeOutputError`
    on anything else: no JSON, wrong shape, a non-finite score, a missing, duplicate or
    unknown id -- never another exception, whatever ``text`` holds.
    """
    try:
        return _parse(clean_text(text or ""), labels)
    except JudgeOutputError:
        raise
    except Exception as e:  # noqa: BLE001 - a parser bug must be a bad reply, not a crash
        raise JudgeOutputError(f"the reply could not be parsed ({type(e).__name__})") from e


def _parse(text: str, labels: list[str]) -> ParsedReply:
    if not text.strip():
        raise JudgeOutputError("empty reply")
    answers = [a for a in map(_answer_shaped, _top_level_values(text.strip())) if a]
    if not answers:
        raise JudgeOutputError("no JSON object with a 'scores' list found in the reply")
    valid: list[ParsedReply] = []
    first_err: JudgeOutputError | None = None
    for cand in answers:
        try:
            items = _match(JudgeOutput.model_validate(cand), labels)
            valid.append(ParsedReply(items, _rescale(items)))
        except ValidationError as e:
            first_err = first_err or JudgeOutputError(
                "invalid scores: "
                + "; ".join(
                    f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:5]
                )
            )
        except JudgeOutputError as e:
            first_err = first_err or e
    if not valid:
        raise first_err or JudgeOutputError("no valid answer in the reply")
    scores = {tuple((k, round(v.score, 9)) for k, v in sorted(r.items.items())) for r in valid}
    if len(scores) > 1:
        raise JudgeOutputError(
            f"the reply holds {len(valid)} different answers; reply with exactly one JSON object"
        )
    return valid[0]


def parse_judge_output(text: str, labels: list[str]) -> dict[str, ScoreItem]:
    """:func:`parse_judge_reply`'s entries by label (scores already on [0, 1])."""
    return parse_judge_reply(text, labels).items
