"""One episode of a rollout while it runs, and what it becomes: a Trajectory, then a Group.

The rollout driver (``rollout.py``) keeps an :class:`Episode` per running episode: :func:`start`
resets its env, :func:`advance` records one generation and steps the env with it, and the
driver calls :func:`to_trajectory` when it ends and :func:`assemble_group` when the last episode
of a task ends. The group carries the env's tool schemas once (``Group.tools``: what the judge
is shown), taken from the first of its episodes whose ``reset`` offered any.

What it does not do: call the policy or batch episodes (``rollout.py``), or write anything.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rankgym.envs.base import Env, Task
from rankgym.envs.policies.base import Generation
from rankgym.types import Group, Message, Trajectory, Turn

__all__ = [
    "Episode",
    "advance",
    "assemble_group",
    "clean_message",
    "count_surrogates",
    "start",
    "to_trajectory",
]

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


def start(ep: Episode, factory: Callable[[], Env], split: str) -> None:
    """Reset the episode's env (made by ``factory`` if it has none) on its task; an exception
    ends the episode with ``error`` set."""
    ep.started = time.perf_counter()
    ep.counts = {
        "tool_calls": 0,
        "tool_errors": 0,
        "completion_tokens": 0,
        "prompt_tokens": 0,
        "env_reward": 0.0,
        "prompt_truncations": 0,
    }
    try:
        if ep.env is None:
            ep.env = factory()
        messages, info = ep.env.reset(seed=ep.seed, options={"task_id": ep.task.id, "split": split})
        ep.messages = [clean_message(m) for m in messages]
        ep.tools = list(info.get("tools") or [])
    except Exception as e:
        ep.error = f"env.reset: {type(e).__name__}: {e}"
        ep.done = True


def advance(ep: Episode, gen: Generation, turn_cap: int, cap_is_user_limit: bool) -> None:
    """Record one generation and step the env with it."""
    if gen.error:
        ep.error, ep.done = gen.error, True
        return
    ep.counts["completion_tokens"] += gen.completion_tokens or len(gen.completion_token_ids)
    ep.counts["prompt_tokens"] += len(gen.prompt_token_ids)
    ep.counts["prompt_truncations"] += sum("truncated" in n for n in gen.notes)
    bad_text = count_surrogates(gen.message)
    if bad_text:
        ep.counts["invalid_unicode"] = ep.counts.get("invalid_unicode", 0) + bad_text
    ep.messages.append(clean_message(gen.message))
    ep.turns.append(
        Turn(
            message_index=len(ep.messages) - 1,
            prompt_token_ids=gen.prompt_token_ids,
            completion_token_ids=gen.completion_token_ids,
            completion_logprobs=gen.completion_logprobs,
            policy=gen.policy or None,
        )
    )
    env = ep.env
    try:
        if env is None:  # never: start() gave the episode its env
            raise RuntimeError("the episode has no env")
        new, reward, terminated, truncated, info = env.step(copy.deepcopy(gen.message))
    except Exception as e:
        ep.error, ep.done = f"env.step: {type(e).__name__}: {e}", True
        return
    executed = info.get("assistant_message") or gen.message
    ep.messages[-1] = clean_message(executed)  # as the env ran it (e.g. call ids it assigned)
    ep.messages.extend(clean_message(m) for m in new)
    ep.counts["env_reward"] += float(reward or 0.0)
    ep.counts["tool_calls"] += len(executed.get("tool_calls") or [])
    ep.counts["tool_errors"] += int(info.get("tool_errors") or 0)
    for name in info.get("hack_signals") or []:
        if name not in ep.hack_signals:
            ep.hack_signals.append(str(name))
    if terminated or truncated:
        vr = info.get("verifiable_reward")
        ep.verifiable_reward = None if vr is None else float(vr)
        ep.truncated, ep.done = bool(truncated and not terminated), True
    elif len(ep.turns) >= turn_cap:
        ep.truncated, ep.done = True, True
        if not cap_is_user_limit:
            ep.error = f"env did not end the episode after {len(ep.turns)} turns (max_turns + 2)"
