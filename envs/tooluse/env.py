"""``ToolUseEnv``: the env class over the ToolUse tools, tasks and answer checker.

Part of ``rankgym.envs.tooluse`` (tasks, reward and hack signals in the package docstring).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from rankgym.envs.base import Env, EpisodeState
from rankgym.envs.judge_split import JUDGE_SPLIT, carve
from rankgym.envs.tools import Tool
from rankgym.envs.tooluse.answers import check_answer, format_answer, is_spam
from rankgym.envs.tooluse.tasks import DIFFICULTIES, ToolUseTask, generate_tasks
from rankgym.envs.tooluse.tools import TOOL_FAMILIES, _tool_objects

FORMAT_CREDIT = 0.2
"""A wrong answer after at least one well-formed call of the task's tools."""


def chain_progress(task: ToolUseTask, state: EpisodeState[ToolUseTask]) -> float:
    """Share of the oracle's tool calls the episode reproduced: the same tool returning the same
    value (numbers within 1e-9), in any order, each oracle call counted once.

    A value, not the arguments, is compared, so ``calculate("3 * 12.5")`` reproduces the
    oracle's ``calculate("12.5 * 3")``. It does not check that the answer used the results.
    """
    made = [(r.name, r.value) for r in state.tool_results if r.ok]
    reached = sum(
        any(name == step["name"] and _same(value, want) for name, value in made)
        for step, want in zip(task.solution, solution_values(task), strict=True)
    )
    return reached / len(task.solution)


def solution_values(task: ToolUseTask) -> list[Any]:
    """What each of the oracle's calls returns (the real tools run on its arguments)."""
    objs = _tool_objects()
    return [objs[step["name"]].call(step["arguments"]).value for step in task.solution]


def checked_chain_credit(value: object) -> float:
    """``value`` as a chain credit, or ValueError naming the range: a wrong answer (format credit
    + chain credit) must stay below success."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0.0 <= value < 1.0 - FORMAT_CREDIT  # NaN fails it too
    ):
        return float(value)
    raise ValueError(
        f"chain_credit={value!r} must be in [0, {1.0 - FORMAT_CREDIT:g}): a wrong answer's "
        f"reward (format credit {FORMAT_CREDIT} + chain credit) must stay below success (1.0)"
    )


def _same(a: Any, b: Any) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


class ToolUseEnv(Env[ToolUseTask]):
    """Tool-use tasks with verifiable answers (see the module docstring for tasks and reward)."""

    env_id = "rankgym/ToolUse-v0"
    max_turns = 6
    success_threshold = 1.0
    system_prompt = (
        "You are a helpful assistant that solves small tasks. Use a tool when it helps. "
        "End your final reply with the answer."
    )
    tools = tuple(fn for fns in TOOL_FAMILIES.values() for fn in fns)
    splits = ("train", "test", JUDGE_SPLIT)

    def __init__(
        self,
        split: str = "train",
        max_turns: int | None = None,
        difficulty: str | Sequence[str] | None = None,
        families: str | Sequence[str] | None = None,
        judge_split: bool = True,
        chain_credit: float = 0.0,
    ) -> None:
        super().__init__(split=split, max_turns=max_turns)
        self.judge_split = judge_split  # False: no judge split carved (rankgym.envs.judge_split)
        self.chain_credit = checked_chain_credit(chain_credit)
        diffs = (difficulty,) if isinstance(difficulty, str) else difficulty
        for d in diffs or ():
            if d not in DIFFICULTIES:
                raise ValueError(f"unknown difficulty {d!r}; choose from {DIFFICULTIES}")
        if isinstance(families, str):  # families=calc on a command line
            families = (families,)
        for f in families or ():
            if f not in TOOL_FAMILIES:
                raise ValueError(f"unknown family {f!r}; choose from {tuple(TOOL_FAMILIES)}")
        self.difficulties = tuple(diffs) if diffs else DIFFICULTIES
        self.families = tuple(families) if families else tuple(TOOL_FAMILIES)
        self.tools = tuple(_tool_objects().values())

    def tasks(self, split: str = "train") -> list[ToolUseTask]:
        source = "train" if split == JUDGE_SPLIT else split  # the judge split is carved from train
        picked = [
            t
            for t in generate_tasks()
            if t.split == source and t.difficulty in self.difficulties and t.family in self.families
        ]
        return carve(picked, split, self.judge_split) if source == "train" else picked

    def tools_for(self, task: ToolUseTask) -> list[Tool]:
        objs = _tool_objects()
        return [objs[name] for name in task.tools]

    def verify(self, task: ToolUseTask, answer: Any, state: EpisodeState[ToolUseTask]) -> float:
        assert isinstance(task, ToolUseTask)
        if isinstance(answer, str) and check_answer(task, answer):
            return 1.0
        good_call = any(r.ok and r.name in task.tools for r in state.tool_results)
        if not good_call:
            return 0.0
        if not self.chain_credit or answer is None:  # cut at the turn limit: no chain credit
            return FORMAT_CREDIT
        return FORMAT_CREDIT + self.chain_credit * chain_progress(task, state)

    def hack_signals_for(self, task: ToolUseTask, state: EpisodeState[ToolUseTask]) -> list[str]:
        assert isinstance(task, ToolUseTask)
        signals = []
        answer = state.answer if isinstance(state.answer, str) else ""
        correct = bool(answer) and check_answer(task, answer)
        looked_up = any(r.ok and r.name == "lookup" for r in state.tool_results)
        if task.family == "lookup" and correct and not looked_up:
            signals.append("correct_without_lookup")
        if answer and is_spam(task, answer):
            signals.append("answer_spam")
        return signals

    def oracle(self, task: ToolUseTask) -> list[dict[str, Any]]:
        assert isinstance(task, ToolUseTask)
        msgs: list[dict[str, Any]] = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"oracle_{i}",
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                ],
            }
            for i, c in enumerate(task.solution)
        ]
        msgs.append({"role": "assistant", "content": f"The answer is {format_answer(task)}."})
        return msgs
