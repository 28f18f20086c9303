"""One episode of a rollout while it runs, and what it becomes: a Trajectory, then a Group.

The rollout driver (``rollout.py``) keeps an :class:`Episode` per running episode and calls
:func:`to_trajectory` when it ends and :func:`assemble_group` when the last episode of a task
ends. The group carries the env's tool schemas once (``Group.tools``: what the judge is shown),
taken from the first of its episodes whose ``reset`` offered any.

What it does not do: run envs or policies, or write anything.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from rankgym.envs.base import Env, Task
from rankgym.types import Group, Message, Trajectory, Turn

__all__ = ["Episode", "assemble_group", "clean_message", "count_surrogates", "to_trajectory"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_MESSAGE_KEYS = set(Message.model_fields) - {"schema_version"}


@dataclass
class Episode:
    """The mutable state of one running episode (the driver's bookkeeping)."""

    group: int
    index: int
    task: Task
    env: Env | None
    seed: int
    traj_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    truncated: bool = False
    error: str | None = None
    verifiable_reward: float | None = None
    hack_signals: list[str] = field(default_factory=list)
    counts: dict[str, int | float] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0


def count_surrogates(message: dict[str, Any]) -> int:
    """Lone surrogates (text that is not valid Unicode) in a message's content and tool calls."""
    texts = [message.get("content")]
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") if isinstance(tc, dict) else None
        if isinstance(fn, dict):
            texts += [fn.get("name"), fn.get("arguments")]
    return sum(len(_SURROGATE.findall(t)) for t in texts if isinstance(t, str) and not t.isascii())


def clean_message(m: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI message dict with only the keys ``rankgym.types.Message`` knows."""
    return {k: v for k, v in dict(m).items() if k in _MESSAGE_KEYS}


def to_trajectory(ep: Episode, env_id: str) -> Trajectory:
    """The finished episode as a Trajectory (an env message that is not OpenAI's is an error)."""
    wall = (ep.ended or time.perf_counter()) - ep.started
    metrics: dict[str, float | int | None] = {"turns": len(ep.turns), **ep.counts}
    metrics["wall_time_s"] = round(wall, 4)
    try:
        messages = [Message.model_validate(m) for m in ep.messages]
        error = ep.error
    except Exception as e:  # an env emitted something that is not an OpenAI message
        messages, error = [], f"invalid message from env: {e}"
    return Trajectory(
        id=ep.traj_id,
        env_id=env_id,
        task_id=str(ep.task.id),
        seed=ep.seed,
        messages=messages,
        turns=ep.turns if error is None or messages else [],
        verifiable_reward=ep.verifiable_reward,
        metrics=metrics,
        hack_signals=ep.hack_signals,
        truncated=ep.truncated,
        error=error,
    )


def assemble_group(
    gid: str, run_id: str, step: int, env_id: str, task: Task, episodes: list[Episode]
) -> Group:
    """The Group of one task's finished episodes, with the env's tool schemas stored once."""
    tools = next((list(e.tools) for e in episodes if e.tools), [])
    return Group(
        id=gid,
        run_id=run_id,
        step=step,
        env_id=env_id,
        task_id=str(task.id),
        trajectories=[to_trajectory(e, env_id) for e in episodes],
        tools=tools,
    )
