"""Final answers in a group prompt, and how many attempts agree on each (self-consistency).

A group of N attempts at one task by one policy is also a vote: attempts that reach the same
final answer by different paths are more often right than one that reaches an answer alone
(the majority vote of self-consistency and of TTRL, test-time RL). A pointwise judge trained
with ``--agreement`` (``rankgym.judges.point_judge``) reads that count as one line of its
prompt and learns from the verifier's labels how far to trust it.

An attempt's final answer is its last line when that line is an assistant reply
(``assistant: "..."``), i.e. the reply without a tool call that ended the episode; an attempt
cut off at the turn limit, or one that ended with an error, has none. Two answers agree when
their :func:`answer_key` is equal: the last number in the reply when it has one
(``The answer is 1,037.`` and ``1037`` agree), else the reply's words, lower-cased.

What it does not do: decide which answer is right (a shared wrong answer agrees as well as a
shared right one), compare long answers by meaning (two pieces of code agree only when their
text does), or read anything but the rendered prompt (training and serving see the same
text, so they count alike).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .pair_judge import parse_group_prompt

_FINAL = re.compile(r'^assistant: (".*")$')
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_WORD = re.compile(r"\w+")

__all__ = ["agreement_counts", "agreement_line", "answer_key", "final_answer"]


def final_answer(block: str, context: str = "") -> str | None:
    """The final reply of one rendered ``<trajectory>`` block body, or None when the attempt
    did not end with one (cut off, an error, a tool call). An empty block (the whole attempt
    is the group's common prefix) reads the last line of ``context``."""
    lines = [line for line in block.splitlines() if line.strip()] or context.splitlines()[-1:]
    if not lines:
        return None
    m = _FINAL.match(lines[-1])
    if m is None:
        return None
    try:
        text = json.loads(m.group(1))
    except ValueError:  # a line cut short by the renderer: its visible text is the answer
        text = m.group(1).strip('"')
    return text if isinstance(text, str) and text.strip() else None


def answer_key(answer: str) -> str:
    """What two answers must share to agree: the last number (commas dropped, as a float) or,
    without one, the lower-cased words."""
    numbers = _NUMBER.findall(answer)
    if numbers:
        value = float(numbers[-1].replace(",", ""))
        return f"n:{value:.6g}"
    return "t:" + " ".join(_WORD.findall(answer.lower()))


def agreement_counts(group_messages: list[dict[str, Any]]) -> dict[str, tuple[int, int] | None]:
    """label -> (other attempts with the same final answer, other attempts) for every
    trajectory of a group prompt; None for an attempt without a final answer. Raises
    ``ValueError`` when the messages hold no group prompt."""
    user_text = next(
        (m.get("content") or "" for m in reversed(group_messages) if m["role"] == "user"), ""
    )
    context, _, blocks = parse_group_prompt(user_text)
    keys = {}
    for label, block in blocks.items():
        answer = final_answer(block, context)
        keys[label] = None if answer is None else answer_key(answer)
    others = len(keys) - 1
    return {
        label: None if k is None else (sum(1 for o, v in keys.items() if o != label and v == k), others)
        for label, k in keys.items()
    }  # fmt: skip


def agreement_line(counts: tuple[int, int] | None) -> str:
    """The prompt line stating an attempt's agreement (see :func:`agreement_counts`)."""
    if counts is None:
        return "Agreement: this attempt gave no final answer."
    same, others = counts
    return (
        f"Agreement: {same} of the {others} other attempts at this task gave the same final answer."
    )
