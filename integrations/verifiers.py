"""A rankgym env as a verifiers (0.4, ``verifiers.v1``) taskset; the group judge over its traces.

verifiers 0.4 loads an environment from a taskset package that exports one ``vf.Taskset``
subclass in ``__all__``. :class:`RankgymTaskset` is that class for any registered rankgym env:
its tasks are ``env.tasks(split)`` (prompt and the env's system prompt, the task id kept), and
each task's ``verifier`` reward replays the model's final reply through the env's own ``step``
and returns ``info["verifiable_reward"]``: the exact number rankgym's rollouts record. A
package for ``vf-eval`` is two lines (docs/integrations.md)::

    from rankgym.integrations.verifiers import RankgymTaskset
    __all__ = ["RankgymTaskset"]

verifiers 0.4 has no reward over a group of rollouts (a ``Task`` reward sees one trace;
cross-agent judgement is an ``Env.finalize``), so the rankgym group judge runs on the traces an
evaluation wrote: :func:`judge_traces` groups ``traces.jsonl`` by task, judges each group in one
call and stores it, like :class:`~rankgym.integrations.trl.GroupJudgeReward` does for TRL.

What it does not do: tools. verifiers 0.4 serves tools as MCP ``Toolset`` servers to a harness
that supports them; the tasks here are single-turn (the model answers in text, which is what
``rankgym/ToolUse-v0``'s easy tier and most verifiers accept), and the env's tools are not
offered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.errors import UserError
from rankgym.integrations.groups import JudgeRunner, make_group, resolve_spec, to_messages
from rankgym.integrations.trl_env import require

if TYPE_CHECKING:
    from rankgym.store import Store
    from rankgym.types import JudgeSpec

vf: Any = require(  # the verifiers venv has it; mypy runs without it
    "verifiers.v1",
    "verifiers",
    "in its own venv: it pins an older openai; see docs/integrations.md",
)

__all__ = ["RankgymTaskset"]


def verify_reply(
    env_id: str, env_kwargs: dict[str, Any], task_id: str, reply: str, split: str = "train"
) -> float | None:
    """The env's verifiable reward for ``reply`` as the final answer to task ``task_id`` of
    ``split`` (an env with strict splits refuses a task id of another split)."""
    from rankgym.envs.registry import make

    env = make(env_id, split=split, **env_kwargs)
    env.reset(options={"task_id": task_id})
    return env.step({"role": "assistant", "content": reply})[4].get("verifiable_reward")


class RankgymData(vf.TaskData):
    """One rankgym task: its env, the env's kwargs, and its id."""

    env_id: str
    task_id: str
    env_kwargs: dict[str, Any] = {}
    split: str = "train"


class RankgymTask(vf.Task[RankgymData]):
    """A rankgym task: one reply, scored by the env's verifier."""

    @vf.stop
    async def one_reply(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def verifier(self, trace: vf.Trace) -> float:
        d = self.data
        vr = verify_reply(d.env_id, d.env_kwargs, d.task_id, trace.last_reply, split=d.split)
        return 0.0 if vr is None else float(vr)

    @property
    def key(self) -> str:
        return f"{self.data.env_id}:{self.data.task_id}"


class RankgymTasksetConfig(vf.TasksetConfig):
    """``--env.taskset.env ID``, ``.env-kwargs``, ``.split``, ``.limit``."""

    env: str = "rankgym/ToolUse-v0"
    env_kwargs: dict[str, Any] = {}
    split: str = "train"
    limit: int | None = None


class RankgymTaskset(vf.Taskset[RankgymTask, RankgymTasksetConfig]):
    """The tasks of a rankgym env as a verifiers taskset (see the module docstring)."""

    def load(self) -> list[RankgymTask]:
        from rankgym.envs.registry import make

        c = self.config
        try:
            env = make(c.env, split=c.split, **c.env_kwargs)
        except KeyError as e:
            raise UserError(f"unknown env {c.env!r}: {e}; `rankgym envs` lists them") from None
        tasks = env.tasks(c.split)
        tasks = tasks[: c.limit] if c.limit else tasks
        return [
            RankgymTask(
                RankgymData(
                    idx=i,
                    id=t.id,
                    prompt=t.prompt,
                    system_prompt=env.system_prompt,
                    env_id=c.env,
                    task_id=t.id,
                    env_kwargs=dict(c.env_kwargs),
                    split=c.split,
                ),
                c.task,
            )  # fmt: skip
            for i, t in enumerate(tasks)
        ]


def judge_traces(
    traces: str | Path,
    judge: str | JudgeSpec,
    store: str | Path | Store | None = None,
    *,
    run_id: str = "verifiers",
    permutations: int = 1,
) -> dict[str, float]:
    """Judge the rollouts of a verifiers evaluation (``traces.jsonl``) group by group.

    Traces of one task (its ``task.data.task_id``, else the prompt) form a group; each group is
    one judge call, stored under ``run_id`` with the traces' verifier rewards as verifiable
    rewards. Returns the judge score of each trace id (unjudged groups are left out).
    """
    rows = [json.loads(line) for line in Path(traces).read_text(encoding="utf-8").splitlines() if line.strip()]  # fmt: skip
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        for tr in r.get("traces") or [r]:
            data = (tr.get("task") or {}).get("data") or {}
            by_task.setdefault(str(data.get("task_id") or data.get("prompt")), []).append(tr)
    groups, ids = [], []
    for task, trs in by_task.items():
        convs = [to_messages(_messages(tr)) for tr in trs]
        data = (trs[0].get("task") or {}).get("data") or {}
        g = make_group(convs, env_id=str(data.get("env_id") or "verifiers"), task_id=task,
                       run_id=run_id, step=0,
                       verifiable=[_verifier(tr) for tr in trs])  # fmt: skip
        groups.append(g)
        ids.append([tr.get("id") for tr in trs])
    runner = JudgeRunner(resolve_spec(judge), store, permutations=permutations, run_id=run_id, run_kind="verifiers")  # fmt: skip
    try:
        judgements = runner.judge_sync(groups)
    finally:
        runner.close()
    out: dict[str, float] = {}
    for g, tids, j in zip(groups, ids, judgements, strict=True):
        scores = j.score_map()
        for t, tid in zip(g.trajectories, tids, strict=True):
            if t.id in scores:
                out[str(tid)] = scores[t.id]
    return out


def _verifier(trace: dict[str, Any]) -> float | None:
    """The ``verifier`` reward a serialized trace recorded (``{"score": x, "weight": w}``)."""
    r = (trace.get("rewards") or {}).get("verifier")
    r = r.get("score") if isinstance(r, dict) else r
    return None if r is None else float(r)


def _messages(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of a serialized trace (system prompt, prompt, replies)."""
    for key in ("messages", "completion"):
        if isinstance(trace.get(key), list):
            return trace[key]
    nodes = trace.get("nodes") or []
    return [n["message"] for n in nodes if isinstance(n, dict) and "message" in n]
