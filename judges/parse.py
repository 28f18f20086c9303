"""Reading a judge's reply: find the JSON answer, validate it, match scores to labels.

:func:`parse_judge_output` accepts the answer object alone, inside a code fence, surrounded by
prose, or as a bare list of entries, and checks that every expected label appears exactly once
with a finite score. Scores are clamped to [0, 1].

What it does not do: repair a reply (a wrong reply raises :class:`JudgeOutputError`, and the
caller retries with the error shown to the judge), or judge whether the scores are sensible.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

__all__ = ["JudgeOutput", "JudgeOutputError", "ScoreItem", "parse_judge_output"]


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
        return str(v).strip()

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("score must be a finite number")
        return v

    @field_validator("rationale", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else str(v)


class JudgeOutput(BaseModel):
    """The JSON object the judge must return."""

    model_config = ConfigDict(extra="ignore")
    scores: list[ScoreItem]


def _json_candidates(text: str) -> list[Any]:
    """JSON values found in ``text``: the whole text, fenced blocks, then each ``{``/``[``."""
    text = text.strip()
    out: list[Any] = []
    try:
        out.append(json.loads(text))
        return out
    except json.JSONDecodeError:
        pass
    dec = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = dec.raw_decode(text, i)
            except json.JSONDecodeError:
                continue
            out.append(value)
            if isinstance(value, dict) and "scores" in value:
                break
    return out


def parse_judge_output(text: str, labels: list[str]) -> dict[str, ScoreItem]:
    """Validate a judge reply against the expected labels; return label -> item (clamped).

    Accepts the object alone, inside a code fence or surrounded by prose, and a bare list of
    entries. Raises :class:`JudgeOutputError` on anything else: no JSON, wrong shape, a score
    that is not a finite number, a missing, duplicate or unknown id.
    """
    if not text or not text.strip():
        raise JudgeOutputError("empty reply")
    parsed: JudgeOutput | None = None
    last_err = "no JSON object found in the reply"
    for cand in _json_candidates(text):
        if isinstance(cand, list):
            cand = {"scores": cand}
        if not isinstance(cand, dict) or "scores" not in cand:
            continue
        try:
            parsed = JudgeOutput.model_validate(cand)
            break
        except ValidationError as e:
            last_err = "invalid scores: " + "; ".join(
                f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:5]
            )
    if parsed is None:
        raise JudgeOutputError(last_err)
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
        problems.append(f"unknown ids {unknown}")
    if problems:
        raise JudgeOutputError(
            f"expected exactly one entry for each of {labels}, got {len(parsed.scores)} "
            "entries: " + ", ".join(problems)
        )
    for it in items.values():
        it.score = min(1.0, max(0.0, it.score))
    return items
