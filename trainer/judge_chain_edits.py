"""Chain edits: judge pairs whose loser took a wrong path through the tools and then answered
with what that path returned, labelled by replaying the env.

Answer swaps (``judge_counterfactuals``) teach a judge to check the answer against the tool
output. They never show the failure a multi-turn policy makes most once its answers follow its
tools: a *chain* that goes wrong (a conversion run backwards after the right one, a product
never multiplied out) and an answer that faithfully reports the chain's last result
(bench/RESULTS.md, issue 22, session 17). A **chain edit** takes a successful episode and
changes its tool calls, in one of two ways, then restates its final reply with the edited
chain's last result in place of the original's:

- ``drop``: the last call that ran is left out (with whatever followed it before the answer),
  so the episode stops one call early and answers with the previous result. The loser is
  *shorter* than the success, against the length lean of a policy whose failures run long.
- ``reverse``: the last call that ran gets its first two text arguments the other way round
  (a conversion from the target unit to the source, an interval counted backwards), and
  whatever followed it before the answer is left out.
- ``extend``: one more call, one the policy itself made on the same task in an episode that
  failed, runs after the success's last call, and the answer reports its result.

Each edited episode is **replayed through the env** (the tools run again; the verifier scores
the restated answer) and kept only when the untouched success replays to its stored reward,
every call of the edit ran, and the edit scores at least ``min_gap`` lower. The loser's
messages are the env's record of the replay, as a rollout stores them.

What this does not do: edit the middle of a chain (later calls' arguments would have to change
with it), make up a tool call (an ``extend`` call is one the policy wrote), or restate an answer
that does not quote the last result (verbatim, or as a number rounded to the digits the reply
shows): such a success gives no edit, and ``ChainEditStats.no_answer`` counts it. Edits are made
for the training side of the split only, as answer swaps are.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rankgym.envs.rollout_episode import clean_message
from rankgym.judges.judge_data import PairItem, task_pools
from rankgym.trainer.judge_counterfactuals import (
    Replay,
    calls_ran,
    final_reply,
    play_on,
    replay,
    replay_tasks,
)
from rankgym.types import Message, Trajectory

__all__ = ["EDIT_STORE", "ChainEditStats", "chain_edits", "restate"]

EDIT_STORE = "chain-edits"
"""The ``store`` name of a chain-edit pair (:class:`PairItem.store`)."""

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")


@dataclass
class ChainEditStats:
    """What :func:`chain_edits` made and why it made no more."""

    successes: int = 0
    """Episodes at or above the env's success threshold that end in a final reply."""
    dropped: int = 0
    """Pairs whose loser leaves out the success's last call that ran."""
    reversed: int = 0
    """Pairs whose loser runs the last call with two of its text arguments swapped."""
    extended: int = 0
    """Pairs whose loser makes one more call, one the policy made in a failed episode."""
    not_reproduced: int = 0
    """Successes whose replay did not give back their stored reward (no edits from them)."""
    no_answer: int = 0
    """Edits not made since the final reply does not state the last tool result."""
    not_worse: int = 0
    """Edits the verifier scored within ``min_gap`` of the success, whose call did not run, or
    whose replay did not end in a scored answer (not kept)."""
    no_task: int = 0
    """Tasks the env, built with its replay kwargs, does not have (no edits for them)."""
    no_env: list[str] = field(default_factory=list)
    """Envs that could not be built here (no edits for their tasks)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _recorded(env: Any) -> list[Message]:
    """The episode as ``env`` recorded it (as a rollout stores it)."""
    return [Message.model_validate(clean_message(x)) for x in env.state.messages]


def restate(text: str, old: str, new: str) -> str | None:
    """``text`` with its last statement of the tool result ``old`` replaced by ``new``: the
    last whole-word occurrence of ``old``, else the last number that is ``old`` rounded to the
    digits it shows (rewritten as ``new`` rounded alike). None when ``text`` states neither,
    or when the restated reply would say the same (``new`` is ``old``, or rounds alike)."""
    old, new = old.strip(), new.strip()
    if not text or not old or not new or old == new:
        return None
    hits = list(re.finditer(r"(?<![\w.])" + re.escape(old) + r"(?!\w|\.\d)", text))
    if hits:
        m = hits[-1]
        return text[: m.start()] + new + text[m.end() :]
    x, y = _float(old), _float(new)
    if x is None or y is None:
        return None
    for m in reversed(list(_NUMBER.finditer(text))):
        shown = m.group(0)
        digits = len(shown.split(".")[1]) if "." in shown else 0
        if abs(float(shown) - x) <= 0.5 * 10**-digits + 1e-9:
            out = text[: m.start()] + f"{y:.{digits}f}" + text[m.end() :]
            return out if out != text else None  # rounded alike, the reply says the same
    return None


def _float(s: str) -> float | None:
    try:
        x = float(s)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _calls_key(m: Message) -> str:
    return json.dumps([(c.function.name, c.function.arguments) for c in m.tool_calls or []])


def _edits(
    s: Trajectory, p: Replay, failed_calls: list[Message], per_success: int, rng: random.Random
) -> Iterable[tuple[str, list[Message]]]:
    """The success ``s``'s candidate edits (kind, messages without the answer, which
    :func:`_answer` restates once the edited chain has run), drop and reverse first; ``p``: its
    replay."""
    turns = [i for i, m in enumerate(s.messages) if m.role == "assistant"]
    ran = [(turns[k], r) for k, r in enumerate(p.results) if calls_ran(r)]
    if not ran:
        return
    if len(ran) >= 2:
        yield "drop", s.messages[: ran[-1][0]]
    last = s.messages[ran[-1][0]]
    flipped = _reversed(last)
    if flipped is not None:
        yield "reverse", [*s.messages[: ran[-1][0]], flipped]
    own = {_calls_key(s.messages[i]) for i in turns}
    calls = [m for m in failed_calls if _calls_key(m) not in own]
    rng.shuffle(calls)
    for m in calls[:per_success]:
        yield "extend", [*s.messages[:-1], m]


def _reversed(m: Message) -> Message | None:
    """``m`` (one tool call) with the values of its first two text arguments swapped, or None
    when it has fewer, more than one call, or arguments that are not a JSON object."""
    if not m.tool_calls or len(m.tool_calls) != 1:
        return None
    fn = m.tool_calls[0].function
    try:
        args = json.loads(fn.arguments)
    except ValueError:
        return None
    keys = [k for k, v in args.items() if isinstance(v, str)] if isinstance(args, dict) else []
    if len(keys) < 2 or args[keys[0]] == args[keys[1]]:
        return None
    a, b = keys[:2]
    args[a], args[b] = args[b], args[a]
    call = m.tool_calls[0].model_copy(update={"function": fn.model_copy(update={"arguments": json.dumps(args)})})  # fmt: skip
    return m.model_copy(update={"tool_calls": [call]})


def chain_edits(
    stores: dict[str, Any],
    exclude: Iterable[tuple[str, str]],
    per_success: int,
    *,
    max_per_task: int,
    min_gap: float = 0.5,
    seed: int = 0,
    runs: Iterable[str] | None = None,
    env_kwargs: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[PairItem], ChainEditStats]:
    """Chain-edit pairs (the success wins) for every task of ``stores`` (name -> open
    ``Store``; ``runs`` as in ``judge_data``) but the ``(env id, task id)`` in ``exclude`` (the
    held-out side of the split): at most ``per_success`` from each success (``drop``, then
    ``reverse``, then ``extend``) and ``max_per_task`` per task. ``env_kwargs``: env id ->
    the kwargs to build it with for the replay (default: none)."""
    stats = ChainEditStats()
    if per_success < 1:
        return [], stats
    rng = random.Random(seed)
    out: list[PairItem] = []
    pools = task_pools(stores, runs)
    for env_id, task_id, pool, env, split in replay_tasks(pools, exclude, env_kwargs, stats):
        episodes = sorted((t for _, t in pool.values()), key=lambda t: t.content_hash())
        threshold = float(env.success_threshold)
        wins = [t for t in episodes if final_reply(t) is not None and t.verifiable_reward is not None and t.verifiable_reward >= threshold]  # fmt: skip
        failed: dict[str, Message] = {}
        for t in episodes:
            if t.verifiable_reward is not None and t.verifiable_reward < threshold:
                for m in t.messages:
                    if m.role == "assistant" and m.tool_calls:
                        failed.setdefault(_calls_key(m), m)
        made: list[PairItem] = []
        for s in wins:
            stats.successes += 1
            p = replay(env, split, s, s.messages)
            if p is None or p.reward != s.verifiable_reward:
                stats.not_reproduced += 1
                continue
            old = p.last_result()
            if old is None:
                continue
            final, k = s.messages[-1].content or "", 0
            for kind, msgs in _edits(s, p, list(failed.values()), per_success, rng):
                if k >= per_success or len(made) >= max_per_task:
                    break
                head = replay(env, split, s, msgs)  # the env stays on this episode
                answer = _answer(kind, head, old.content, final)
                if answer is None:
                    stats.no_answer += 1
                    continue
                q = None if not answer or head is None else play_on(env, head, [Message(role="assistant", content=answer)])  # fmt: skip
                assert s.verifiable_reward is not None
                if q is None or q.reward is None or s.verifiable_reward - q.reward < min_gap:
                    stats.not_worse += 1
                    continue
                loser = Trajectory(env_id=env_id, task_id=task_id, seed=s.seed, messages=_recorded(env), verifiable_reward=q.reward)  # fmt: skip
                made.append(PairItem(env_id, task_id, s, loser, "verifier", EDIT_STORE, s.verifiable_reward - q.reward))  # fmt: skip
                stats.dropped += kind == "drop"
                stats.reversed += kind == "reverse"
                stats.extended += kind == "extend"
                k += 1
        out.extend(made)
    return out, stats


def _answer(kind: str, head: Replay | None, old: str, final: str) -> str | None:
    """The success's final reply ``final`` restated with the last result of the edited chain
    ``head`` (for ``drop`` the last left in it, otherwise its last call's, which must have run)
    in place of ``old``. None: the reply does not state ``old``; "": the edited chain has no
    result that ran, or its result is ``old``."""
    if head is None or not head.results:
        return ""
    if kind != "drop" and not calls_ran(head.results[-1]):
        return ""
    last = head.last_result()
    if last is None or last.content.strip() == old.strip():
        return ""
    return restate(final, old, last.content)
