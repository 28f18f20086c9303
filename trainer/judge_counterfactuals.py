"""Answer swaps: judge pairs that differ in the answer only, labelled by replaying the env.

A judge trained on a policy's own pairs learns whatever separates its successes from its
failures most cheaply. On the demo's ToolUse policy that is length: its failures run to the
turn limit, "pick the shorter" orders its decided pairs at 0.76-0.81, and a judge trained on
them prefers the shorter of two equally good trajectories about 9 times in 10 (bench/RESULTS.md,
issue 22). An **answer swap** takes a successful episode and puts, in place of its final reply,
a final reply the policy wrote elsewhere (on the same task first, where it failed; then on the
other tasks of the same env, those closest in length first). Everything before the answer,
and nearly the length, stays; only whether the answer follows from the episode changes. Each
swap is **replayed through the env** (its tool calls run again, the env's verifier scores the
new final reply), and it is kept only when the replay of the untouched episode gives back its
stored reward and the swap scores at least ``min_gap`` lower: the label is the verifier's, as
for every other ``verifier`` pair.

Swaps are made for the training side of the split only, so the held-out check stays on the
policy's real pairs. What this does not do: invent wrong answers (every reply it swaps in was
written by the policy), swap anything but the last message, or run without the env (an env
that cannot be built here, or whose replay does not reproduce a stored reward, e.g. a tool that
reads the clock, gives no swaps for that episode, and the counts say how many).

The replay helpers here (:func:`replay_tasks`, :func:`replay`, :func:`play_on`) are shared
with the chain edits of ``judge_chain_edits``.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rankgym.judges.judge_data import PairItem, task_pools
from rankgym.types import Message, Trajectory

__all__ = [
    "SWAP_STORE",
    "Replay",
    "SwapStats",
    "answer_swaps",
    "calls_ran",
    "final_reply",
    "play_on",
    "replay",
    "replay_env",
    "replay_tasks",
    "split_of",
]

SWAP_STORE = "answer-swaps"
"""The ``store`` name of an answer-swap pair (:class:`PairItem.store`)."""


@dataclass
class SwapStats:
    """What :func:`answer_swaps` made and why it made no more."""

    successes: int = 0
    """Episodes at or above the env's success threshold that end in a final reply."""
    swaps: int = 0
    not_reproduced: int = 0
    """Successes whose replay did not give back their stored reward (no swaps from them)."""
    not_worse: int = 0
    """Swapped replies the verifier scored within ``min_gap`` of the success, or whose replay
    did not end the episode (not kept)."""
    no_task: int = 0
    """Tasks the env, built with its replay kwargs, does not have (no swaps for them)."""
    no_env: list[str] = field(default_factory=list)
    """Envs that could not be built here (no swaps for their tasks)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def final_reply(t: Trajectory) -> Message | None:
    """The last message when it is the assistant's (the episode's answer), else None."""
    if t.truncated or not t.messages or t.messages[-1].role != "assistant":
        return None
    return t.messages[-1]


def _reply_key(m: Message) -> str:
    return m.model_dump_json(include={"content", "tool_calls"})


def split_of(env: Any, task_id: str) -> str | None:
    """The split of ``env`` that holds ``task_id`` (None: none does), from the env's cached
    task lists (``Env.get_task`` gives the task as listed under the split it was found in)."""
    try:
        return str(env.get_task(task_id).split)
    except KeyError:
        return None


@dataclass(frozen=True)
class Replay:
    """An episode played again through its env (:func:`replay`, :func:`play_on`)."""

    reward: float | None
    """The verifier's score, or None when the episode did not end in a scored answer."""
    results: list[list[Any]]
    """Per assistant message played, the ``ToolResult``s of its calls (empty: it made none)."""

    def last_result(self) -> Any | None:
        """The last tool result of a message whose calls all ran, or None."""
        ran = [r for rs in self.results if calls_ran(rs) for r in rs]
        return ran[-1] if ran else None


def calls_ran(results: list[Any]) -> bool:
    """True when a message made calls (``results``: their ``ToolResult``s) and all of them ran."""
    return bool(results) and all(r.ok for r in results)


def replay(env: Any, split: str, t: Trajectory, messages: list[Message]) -> Replay | None:
    """``messages`` played as ``t``'s episode (its task, in ``split``), one assistant message at
    a time; None when a message comes after the episode ended."""
    first, _ = env.reset(options={"task_id": t.task_id, "split": split})
    return play_on(env, Replay(None, []), messages[len(first) :])


def play_on(env: Any, played: Replay, messages: list[Message]) -> Replay | None:
    """``played`` continued with the assistant messages of ``messages``, on ``env`` as the
    replay that gave ``played`` left it; None when a message comes after the episode ended."""
    reward, results = played.reward, list(played.results)
    for m in messages:
        if m.role != "assistant":
            continue
        if env.state.done:
            return None
        n = len(env.state.tool_results)
        _, reward, _, _, _ = env.step(m.to_openai())
        results.append(list(env.state.tool_results[n:]))
    return Replay(float(reward) if env.state.done and reward is not None else None, results)


def replay_env(cache: dict[str, Any], env_id: str, env_kwargs: dict[str, dict[str, Any]] | None) -> Any:  # fmt: skip
    """``env_id`` built once (kept in ``cache``) with its replay kwargs from ``env_kwargs``
    (env id -> kwargs; default none), or None where it cannot be built here (not registered,
    or kwargs it does not take)."""
    if env_id not in cache:
        from rankgym.envs.registry import make

        try:
            cache[env_id] = make(env_id, **(env_kwargs or {}).get(env_id, {}))
        except Exception:
            cache[env_id] = None
    return cache[env_id]


def replay_tasks(
    pools: dict[tuple[str, str], Any],
    exclude: Iterable[tuple[str, str]],
    env_kwargs: dict[str, dict[str, Any]] | None,
    stats: Any,
) -> Iterator[tuple[str, str, Any, Any, str]]:
    """``(env id, task id, pool, env, split)`` for each task of ``pools`` (``task_pools``), in
    order, but those in ``exclude`` and those the env cannot replay here: an env that cannot be
    built is added to ``stats.no_env`` (its tasks skipped), a task it does not have counts in
    ``stats.no_task``."""
    skip, envs = set(exclude), dict[str, Any]()
    for (env_id, task_id), pool in sorted(pools.items()):
        if (env_id, task_id) in skip or env_id in stats.no_env:
            continue
        env = replay_env(envs, env_id, env_kwargs)
        if env is None:
            stats.no_env.append(env_id)
            continue
        split = split_of(env, task_id)
        if split is None:
            stats.no_task += 1
            continue
        yield env_id, task_id, pool, env, split


def _size(m: Message) -> int:
    """Characters of a reply the judge reads: its text and its tool calls' arguments."""
    return len(m.content or "") + sum(len(c.function.arguments) for c in m.tool_calls or [])


def _candidates(
    own: Message, same_task: list[Message], other_tasks: list[Message], rng: random.Random
) -> list[Message]:
    """Replies to swap in: the same task's first (shuffled), then other tasks' closest in
    length to ``own`` (ties shuffled); none equal to ``own``."""
    key = _reply_key(own)
    a = [m for m in same_task if _reply_key(m) != key]
    rng.shuffle(a)
    b = [m for m in other_tasks if _reply_key(m) != key]
    rng.shuffle(b)
    b.sort(key=lambda m: abs(_size(m) - _size(own)))
    return a + b


def answer_swaps(
    stores: dict[str, Any],
    exclude: Iterable[tuple[str, str]],
    per_success: int,
    *,
    max_per_task: int,
    min_gap: float = 0.5,
    seed: int = 0,
    runs: Iterable[str] | None = None,
    env_kwargs: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[PairItem], SwapStats]:
    """Answer-swap pairs (the success wins) for every task of ``stores`` (name -> open
    ``Store``; ``runs`` as in ``judge_data``) but the ``(env id, task id)`` in ``exclude`` (the
    held-out side of the split): at most ``per_success`` from each success and
    ``max_per_task`` per task. ``env_kwargs``: env id -> the kwargs to build it with for the
    replay (default: none)."""
    stats = SwapStats()
    if per_success < 1:
        return [], stats
    pools = task_pools(stores, runs)
    replies: dict[str, dict[str, list[Message]]] = defaultdict(lambda: defaultdict(list))
    for (env_id, task_id), pool in pools.items():
        seen: set[str] = set()
        for _, t in pool.values():
            m = final_reply(t)
            if m is not None and _reply_key(m) not in seen:
                seen.add(_reply_key(m))
                replies[env_id][task_id].append(m)
    rng = random.Random(seed)
    out: list[PairItem] = []
    for env_id, task_id, pool, env, split in replay_tasks(pools, exclude, env_kwargs, stats):
        others = [m for tid, ms in sorted(replies[env_id].items()) if tid != task_id for m in ms]
        made: list[PairItem] = []
        for _, s in sorted(pool.values(), key=lambda x: x[1].content_hash()):
            own = final_reply(s)
            if own is None or s.verifiable_reward is None:
                continue
            if s.verifiable_reward < float(env.success_threshold):
                continue
            stats.successes += 1
            played = replay(env, split, s, s.messages)
            if played is None or played.reward != s.verifiable_reward:
                stats.not_reproduced += 1
                continue
            k = 0
            for reply in _candidates(own, replies[env_id][task_id], others, rng):
                if k >= per_success or len(made) >= max_per_task:
                    break
                msgs = [*s.messages[:-1], reply]
                swapped = replay(env, split, s, msgs)
                r = None if swapped is None else swapped.reward
                if r is None or s.verifiable_reward - r < min_gap:
                    stats.not_worse += 1
                    continue
                loser = Trajectory(env_id=env_id, task_id=task_id, seed=s.seed, messages=msgs, verifiable_reward=r)  # fmt: skip
                made.append(PairItem(env_id, task_id, s, loser, "verifier", SWAP_STORE, s.verifiable_reward - r))  # fmt: skip
                k += 1
        stats.swaps += len(made)
        out.extend(made)
    return out, stats
