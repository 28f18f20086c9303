"""What every integration shares: chat messages in, rankgym groups out, judged and stored.

Other engines hand over conversations as OpenAI-style dicts (TRL: tool-call arguments as
dicts, tool messages without ids; ART: ``Choice`` objects among dicts). :func:`to_messages`
turns any of these into rankgym :class:`~rankgym.types.Message` objects; :func:`make_group`
builds a :class:`~rankgym.types.Group` with content-derived ids (the same conversations give
the same ids, so the judge cache hits on a rerun); :class:`JudgeRunner` judges groups through
:class:`~rankgym.judges.GroupJudge` (cache, permutations, identical trajectories shown once)
and writes them to a store; :func:`preflight` runs ``judge-check`` before a run.

What it does not do: tokenize, or keep token ids and log-probabilities (the engine trains, not
rankgym), or open the store anywhere but in the process that calls it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
from collections.abc import Coroutine, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rankgym.errors import UserError
from rankgym.types import Group, Judgement, JudgeSpec, Message, Trajectory, content_hash

if TYPE_CHECKING:
    from rankgym.judges import RetryPolicy
    from rankgym.judges.method import JudgeMethod
    from rankgym.store import Store

__all__ = [
    "JudgeRunner",
    "last_assistant_text",
    "make_group",
    "preflight",
    "resolve_spec",
    "run_sync",
    "to_messages",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


def _plain(obj: Any) -> Any:
    """A dict from a pydantic/OpenAI object (``model_dump``), an ART/OpenAI ``Choice``
    (its ``message``), or the object itself."""
    if hasattr(obj, "message") and hasattr(obj, "finish_reason"):  # openai Choice
        obj = obj.message
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", exclude_none=True)
    return obj


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and "text" in p]
        return "\n".join(parts)
    return str(content)


def to_messages(raw: Sequence[Any] | str, role: str = "user") -> list[Message]:
    """rankgym messages from OpenAI-style messages (dicts, pydantic objects, ``Choice``s).

    A plain string becomes one message of ``role`` (TRL's standard, non-chat format).
    Tool-call arguments given as dicts become JSON strings; missing tool-call ids become
    ``call_<n>``, and a tool message without ``tool_call_id`` takes the id of the next
    unanswered call before it. Roles other than system/user/assistant/tool raise ValueError.
    """
    if isinstance(raw, str):
        return [Message(role=role, content=raw)]
    out: list[Message] = []
    pending: list[str] = []
    n = 0
    for item in raw:
        m = _plain(item)
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError(f"not a chat message: {str(item)[:80]!r}")
        calls = []
        for tc in m.get("tool_calls") or []:
            tc = _plain(tc)
            fn = tc.get("function") or {}
            args = fn.get("arguments", "{}")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False, default=str)
            cid = tc.get("id") or f"call_{n}"
            n += 1
            pending.append(cid)
            calls.append({"id": cid, "type": "function", "function": {"name": fn.get("name", ""), "arguments": args}})  # fmt: skip
        tool_call_id = m.get("tool_call_id")
        if m["role"] == "tool":
            if tool_call_id in pending:
                pending.remove(tool_call_id)
            elif tool_call_id is None and pending:
                tool_call_id = pending.pop(0)
        out.append(
            Message(
                role=m["role"],
                content=_text(m.get("content")),
                tool_calls=calls or None,
                tool_call_id=tool_call_id,
                name=m.get("name"),
            )
        )
    return out


def last_assistant_text(messages: Sequence[Message]) -> str:
    """The text of the last assistant message (the final answer), ``""`` if there is none."""
    for m in reversed(messages):
        if m.role == "assistant":
            return m.content or ""
    return ""


def make_group(
    conversations: Sequence[Sequence[Message]],
    *,
    env_id: str,
    task_id: str,
    run_id: str,
    step: int,
    key: str = "",
    verifiable: Sequence[float | None] | None = None,
    hack_signals: Sequence[Sequence[str]] | None = None,
    metrics: Sequence[dict[str, Any]] | None = None,
    tools: Sequence[dict[str, Any]] | None = None,
) -> Group:
    """A group of one task's conversations; ids are hashes of ``key``, the task and contents.

    ``key`` separates groups that could repeat content (TRL passes run, step and batch index),
    so a group id names one judged batch and never collides with an earlier step's.
    """
    base = content_hash({"key": key, "env": env_id, "task": task_id, "run": run_id, "step": step,
                         "c": [[m.to_openai() for m in c] for c in conversations]})  # fmt: skip
    trajs = []
    for i, msgs in enumerate(conversations):
        trajs.append(
            Trajectory(
                id=f"traj-{base}-{i}",
                env_id=env_id,
                task_id=task_id,
                messages=list(msgs),
                verifiable_reward=None if verifiable is None else verifiable[i],
                hack_signals=list(hack_signals[i]) if hack_signals else [],
                metrics=dict(metrics[i]) if metrics else {},
            )
        )
    return Group(id=f"grp-{base}", run_id=run_id, step=step, env_id=env_id, task_id=task_id,
                 trajectories=trajs, tools=list(tools or []))  # fmt: skip


def resolve_spec(judge: str | JudgeSpec, rubric: str | Path | None = None) -> JudgeSpec:
    """A judge spec from a LiteLLM model string (checked like ``--judge``) or a spec as is.

    ``rubric`` is a path to a rubric file (like ``--rubric``); raises ``UserError`` naming the
    bad option.
    """
    from rankgym.judges.spec import spec_from_options

    if isinstance(judge, JudgeSpec):
        return judge
    names = {"judge": "judge", "rubric": "rubric"}
    return spec_from_options(judge, rubric_file=str(rubric) if rubric else None, names=names)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to the end from sync code, also when this thread already runs a loop
    (then in a worker thread with its own loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class JudgeRunner:
    """Judges groups under one spec and writes them (groups, judgements, hack signals) to a
    store opened on first use; ``store=None`` judges without storing (and without a cache)."""

    def __init__(
        self,
        spec: JudgeSpec,
        store: str | Path | Store | None = None,
        *,
        permutations: int = 1,
        concurrency: int = 4,
        run_id: str | None = None,
        run_kind: str = "external",
        run_config: dict[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        method: type[JudgeMethod] | None = None,
    ) -> None:
        if permutations < 1:
            raise UserError(f"permutations must be at least 1 (got {permutations})")
        self.spec = spec
        self.permutations = permutations
        self.concurrency = concurrency
        self.run_id = run_id
        self.run_kind = run_kind
        self.run_config = run_config or {}
        self.retry = retry
        self.method = method
        """The judging method (``rankgym.judges.method.JudgeMethod``); None: the group judge."""
        self._store_arg = store
        self._store: Store | None = None
        self._owns_store = False

    @property
    def store(self) -> Store | None:
        """The store, opened (with the run and the spec written) on first access."""
        if self._store is None and self._store_arg is not None:
            from rankgym.store import Store

            s = self._store_arg
            self._store = s if isinstance(s, Store) else Store(Path(s))
            self._owns_store = not isinstance(s, Store)
            if self.run_id:
                self._store.create_run(self.run_id, kind=self.run_kind, config=self.run_config,
                                       run_id=self.run_id)  # fmt: skip
            self._store.put_judge_spec(self.spec)
        return self._store

    async def judge(
        self, groups: Iterable[Group], tools: dict[str, list[dict[str, Any]]] | None = None
    ) -> list[Judgement]:
        """Judge and store ``groups`` (in one gather); unjudged groups come back as such.

        ``tools`` maps group id to the OpenAI tool schemas shown to the judge (default: each
        group's own ``Group.tools``)."""
        from rankgym.judges import GroupJudge
        from rankgym.judges.method import judge_all

        groups = list(groups)
        if tools is None:
            tools = {g.id: list(g.tools) for g in groups if g.tools}
        store = self.store
        judge = (self.method or GroupJudge)(
            self.spec, store, concurrency=self.concurrency, retry=self.retry, tools=tools
        )
        return await judge_all(judge, groups, self.permutations)

    def judge_sync(self, groups: Iterable[Group]) -> list[Judgement]:
        """:meth:`judge` from sync code."""
        return run_sync(self.judge(groups))

    def close(self) -> None:
        """Close the store if this runner opened it."""
        if self._store is not None and self._owns_store:
            self._store.close()
        self._store = None

    def __getstate__(self) -> dict[str, Any]:  # engines may pickle reward functions
        state = dict(self.__dict__)
        state["_store"] = None
        return state


def preflight(
    spec: JudgeSpec,
    env_id: str,
    groups: int,
    *,
    store: Store | None = None,
    reward_kind: str = "judge",
    force: bool = False,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """``rankgym judge-check`` on ``groups`` calibration groups of ``env_id``, then the trainer's
    decision: returns the report with ``decision`` and ``message``; raises ``UserError`` when a
    judge-only reward (``reward_kind="judge"``) has a tau CI that includes 0, unless ``force``.

    Calibration groups and their judgements go to ``store`` (the dashboard's Agreement page
    shows them under the judge's spec) and are reused from it on a rerun.
    """
    from rankgym.trainer.judge_check import CheckConfig, run_check
    from rankgym.trainer.preflight import CHECK_GROUP_SIZE, CHECK_PERMUTATIONS, decide

    cfg = CheckConfig(env_id=env_id, groups=groups, group_size=CHECK_GROUP_SIZE,
                      permutations=CHECK_PERMUTATIONS, seed=seed, resamples=1000,
                      env_kwargs=dict(env_kwargs or {}))  # fmt: skip
    report = run_check(cfg, spec, store).to_dict()
    decision, message = decide(report, reward_kind)
    report.update(decision=decision, message=message, forced=bool(force and decision == "stop"))
    if decision == "stop" and not force:
        raise UserError(message + " (GroupJudgeReward: pass force=True to train anyway)")
    log.warning("%s", message) if decision != "ok" else log.info("%s", message)
    return report
