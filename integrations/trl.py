"""rankgym's group judge as a reward function of ``trl.GRPOTrainer`` (TRL 1.16).

``GRPOTrainer(reward_funcs=[GroupJudgeReward(...)])``: TRL calls the reward with every
completion of the batch, each prompt's ``num_generations`` completions next to each other
(its ``RepeatSampler``). :class:`GroupJudgeReward` cuts the batch into those groups, judges
each group in **one** call of the rankgym judge (``rankgym.judges.GroupJudge``: judge cache in
the store, ``permutations`` shuffled presentations averaged, identical completions shown once
and given the same score), and writes the groups, scores and TRL's ``global_step`` into a
rankgym store, so ``rankgym dashboard``, ``rankgym agreement`` and blind labeling work on a
TRL run. With ``verifier_weight`` > 0 and a rankgym env (:func:`trl_environment`) the reward
is rankgym's blend ``(1 - w) * judge + w * verifier``.

Under ``accelerate launch`` TRL gives each process a contiguous slice of the batch, and a
group may straddle two processes. The reward then gathers every process's completions
(``torch.distributed.all_gather_object``), judges and stores on rank 0 only, and broadcasts
the rewards, so each rank returns its own slice and the store has one writer.

:class:`EnvVerifierReward` is the env's own verifier as a plain TRL reward function.
The env side (tools, dataset, chat template) is in ``rankgym.integrations.trl_env``.

What it does not do: it never sees token ids or log-probabilities (TRL trains), it does not
re-judge a group TRL generated twice, and an unjudged group (the judge failed after its
retries) gets ``None`` rewards, which TRL treats as "no reward from this function".
"""

from __future__ import annotations

import logging
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.errors import UserError
from rankgym.integrations.groups import (
    JudgeRunner,
    last_assistant_text,
    make_group,
    preflight,
    resolve_spec,
    to_messages,
)
from rankgym.integrations.trl_env import (
    RankgymToolEnv,
    tool_chat_template,
    trl_dataset,
    trl_environment,
)
from rankgym.types import Group, JudgeSpec, Message, content_hash

if TYPE_CHECKING:
    from rankgym.judges import RetryPolicy
    from rankgym.store import Store

__all__ = [
    "EnvVerifierReward",
    "GroupJudgeReward",
    "RankgymToolEnv",
    "tool_chat_template",
    "trl_dataset",
    "trl_environment",
]

log = logging.getLogger(__name__)


def _dist() -> tuple[int, int]:
    """(rank, world size) of the default torch.distributed group, (0, 1) without one."""
    dist = sys.modules.get("torch.distributed")  # not imported: no process group either
    if dist is None:
        return 0, 1
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _gather(rows: list[Any]) -> tuple[list[Any], int]:
    """Every process's ``rows`` in rank order, and where this process's rows start."""
    rank, world = _dist()
    if world == 1:
        return rows, 0
    import torch.distributed as dist

    parts: list[Any] = [None] * world
    dist.all_gather_object(parts, rows)
    offset = sum(len(p) for p in parts[:rank])
    return [r for p in parts for r in p], offset


def _broadcast(value: Any) -> Any:
    """Rank 0's ``value`` on every process."""
    rank, world = _dist()
    if world == 1:
        return value
    import torch.distributed as dist

    box = [value if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _finish(env: object, messages: Sequence[Message]) -> tuple[float | None, list[str], str, str, list]:  # fmt: skip
    """(verifiable reward, hack signals, env id, task id, tool schemas) of a rankgym TRL env
    after its completion's final answer; empty for anything not a :class:`RankgymToolEnv`."""
    if isinstance(env, RankgymToolEnv):
        vr = env._verify(last_assistant_text(messages))
        tools = env.env.state.tools.schemas()
        return vr, env._hack_signals(), env.env_id, env.task_id or "", tools
    return None, [], "", "", []


class EnvVerifierReward:
    """The rankgym env's verifiable reward as a TRL reward function (needs
    ``environment_factory=trl_environment(...)``); ``None`` where an env has no verifier."""

    __name__ = "rankgym_verifier"

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:  # fmt: skip
        envs = kwargs.get("environments")
        if not envs:
            raise UserError(
                "EnvVerifierReward needs rankgym envs: pass environment_factory="
                "trl_environment(ENV_ID) to GRPOTrainer"
            )
        return [_finish(e, to_messages(c, "assistant"))[0] for e, c in zip(envs, completions, strict=True)]  # fmt: skip


class GroupJudgeReward:
    """A ``trl.GRPOTrainer`` reward function: one rankgym judge call per prompt's group.

    Args:
        judge: a LiteLLM model string (``local/smollm2``, ``openai/gpt-4.1-mini``, ...) or a
            :class:`~rankgym.types.JudgeSpec`.
        store: the rankgym store file to write groups and scores to (None: no store, no cache).
        run_id: the run's id in the store (default ``trl-<time>``).
        num_generations: GRPOConfig's ``num_generations``; when set, each group must have
            exactly that many completions (else ValueError). None: consecutive completions of
            the same prompt form a group.
        permutations: shuffled presentations per group, averaged (position-bias control).
        verifier_weight: weight ``w`` of the env's verifier in ``(1 - w) * judge + w * verifier``
            (0: judge only). Needs ``environment_factory=trl_environment(...)``.
        check_groups: run ``judge-check`` on that many calibration groups of ``check_env``
            when the reward is built (rank 0) and refuse a judge that cannot rank (0: skip).
        check_env: the env for the check (a rankgym env id, e.g. ``rankgym/ToolUse-v0``).
        force: train even when the check says the judge cannot rank.
        env_id: the env id recorded for completions without a rankgym env (default ``trl``).
        rubric: a rubric file for the judge (default: rankgym's rubric).
        retry: the judge's retry policy (``rankgym.judges.RetryPolicy``; default 4 attempts).
    """

    __name__ = "rankgym_judge"

    def __init__(
        self,
        judge: str | JudgeSpec = "local/smollm2",
        *,
        store: str | Path | Store | None = None,
        run_id: str | None = None,
        num_generations: int | None = None,
        permutations: int = 1,
        concurrency: int = 4,
        verifier_weight: float = 0.0,
        check_groups: int = 0,
        check_env: str | None = None,
        check_env_kwargs: dict[str, Any] | None = None,
        force: bool = False,
        env_id: str = "trl",
        rubric: str | Path | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not 0.0 <= verifier_weight <= 1.0:
            raise UserError(f"verifier_weight must be in [0, 1] (got {verifier_weight})")
        if num_generations is not None and num_generations < 1:
            raise UserError(f"num_generations must be at least 1 (got {num_generations})")
        self.spec = resolve_spec(judge, rubric)
        self.run_id = run_id or time.strftime("trl-%Y%m%d-%H%M%S")
        self.num_generations = num_generations
        self.verifier_weight = verifier_weight
        self.env_id = env_id
        config = {"judge": self.spec.model, "spec_hash": self.spec.spec_hash,
                  "permutations": permutations, "verifier_weight": verifier_weight}  # fmt: skip
        self.runner = JudgeRunner(self.spec, store, permutations=permutations,
                                  concurrency=concurrency, run_id=self.run_id, run_kind="trl",
                                  run_config=config, retry=retry)  # fmt: skip
        self.calls = 0
        self.judge_s = 0.0
        self.check: dict[str, Any] | None = None
        self._step_rows: dict[int, list[dict[str, Any]]] = {}
        if check_groups > 0:
            if not check_env:
                raise UserError("check_groups needs check_env, the rankgym env to calibrate on (e.g. rankgym/ToolUse-v0)")  # fmt: skip
            if int(os.environ.get("RANK", "0")) == 0:  # before TRL starts the process group
                kind = "judge" if verifier_weight == 0 else "judge+verifiable"
                self.check = preflight(self.spec, check_env, check_groups, store=self.runner.store,
                                       reward_kind=kind, force=force, env_kwargs=check_env_kwargs)  # fmt: skip

    # ---- the reward function --------------------------------------------------------------
    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:  # fmt: skip
        """Rewards for this process's completions, in order (TRL's reward-function contract)."""
        envs = kwargs.get("environments") or [None] * len(prompts)
        task_ids = kwargs.get("task_id") or [None] * len(prompts)
        state = kwargs.get("trainer_state")
        step = int(getattr(state, "global_step", 0) or 0)
        rows = []
        for p, c, env, tid in zip(prompts, completions, envs, task_ids, strict=True):
            prompt = to_messages(p, "user")
            completion = to_messages(c, "assistant")
            vr, hacks, env_id, env_task, tools = _finish(env, completion)
            rows.append({"prompt": [m.to_openai() for m in prompt],
                         "messages": [m.to_openai() for m in prompt + completion],
                         "verifiable": vr, "hacks": hacks, "env_id": env_id or self.env_id, "tools": tools,
                         "task_id": str(tid) if tid is not None else env_task})  # fmt: skip
        everything, offset = _gather(rows)
        result: tuple[str, Any] = ("ok", None)
        if _dist()[0] == 0:
            try:
                result = ("ok", self._score(everything, step))
            except Exception as e:  # every rank must learn of it, or the others wait forever
                if _dist()[1] == 1:
                    raise
                result = ("error", f"{type(e).__name__}: {e}")
        kind, rewards = _broadcast(result)
        if kind == "error":
            raise RuntimeError(f"GroupJudgeReward on rank 0 failed: {rewards}")
        assert rewards is not None
        self.calls += 1
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            mine = [r for r in rewards[offset : offset + len(rows)] if r is not None]
            log_metric("rankgym/judged_fraction", len(mine) / max(1, len(rows)))
        return rewards[offset : offset + len(rows)]

    # ---- rank 0 ---------------------------------------------------------------------------
    def _groups(self, rows: list[dict[str, Any]]) -> list[list[int]]:
        """Row indices of each group: consecutive rows with the same prompt."""
        out: list[list[int]] = []
        for i, r in enumerate(rows):
            if (
                out
                and rows[out[-1][0]]["prompt"] == r["prompt"]
                and (self.num_generations is None or len(out[-1]) < self.num_generations)
            ):
                out[-1].append(i)
            else:
                out.append([i])
        if self.num_generations is not None:
            bad = [len(g) for g in out if len(g) != self.num_generations]
            if bad:
                raise ValueError(
                    f"GroupJudgeReward: expected groups of num_generations={self.num_generations} "
                    f"consecutive completions of one prompt, found sizes {bad[:5]}; pass the "
                    "GRPOConfig's num_generations (or None to group by prompt)"
                )
        return out

    def _score(self, rows: list[dict[str, Any]], step: int) -> list[float | None]:
        t0 = time.perf_counter()
        index = self._groups(rows)
        groups: list[Group] = []
        for k, idx in enumerate(index):
            first = rows[idx[0]]
            task = first["task_id"] or "prompt-" + content_hash(first["prompt"])
            groups.append(
                make_group(
                    [[Message.from_dict(m) for m in rows[i]["messages"]] for i in idx],
                    env_id=first["env_id"],
                    task_id=task,
                    run_id=self.run_id,
                    step=step,
                    key=f"{self.calls}:{k}",
                    verifiable=[rows[i]["verifiable"] for i in idx],
                    hack_signals=[rows[i]["hacks"] for i in idx],
                    tools=first["tools"],
                )  # fmt: skip
            )
        judgements = self.runner.judge_sync(groups)
        rewards: list[float | None] = [None] * len(rows)
        w = self.verifier_weight
        for idx, g, j in zip(index, groups, judgements, strict=True):
            scores = j.score_map() if j.status == "ok" else {}
            for i, t in zip(idx, g.trajectories, strict=True):
                s = scores.get(t.id)
                if s is None or w == 0:
                    rewards[i] = s
                elif t.verifiable_reward is not None:
                    rewards[i] = (1 - w) * s + w * t.verifiable_reward
        self.judge_s += time.perf_counter() - t0
        self._log_step(step, rows, groups, judgements, rewards, time.perf_counter() - t0)
        return rewards

    def _log_step(self, step: int, rows: list[dict[str, Any]], groups: list[Group],
                  judgements: list[Any], rewards: list[float | None], seconds: float) -> None:  # fmt: skip
        """Step metrics for the dashboard's Runs page (every call of the step together)."""
        store = self.runner.store
        if store is None:
            return
        for old in [k for k in self._step_rows if k != step]:  # a finished step is logged
            del self._step_rows[old]
        acc = self._step_rows.setdefault(step, [])
        acc.append({"rewards": rewards, "verifiable": [r["verifiable"] for r in rows],
                    "scores": [s.score for j in judgements for s in j.scores],
                    "zero_var": sum(1 for j in judgements if j.status == "ok"
                                    and len({round(s.score, 9) for s in j.scores}) <= 1),
                    "unjudged": sum(j.status != "ok" for j in judgements), "n_groups": len(groups),
                    "calls": sum(j.calls for j in judgements),
                    "in_tok": sum(j.input_tokens for j in judgements),
                    "out_tok": sum(j.output_tokens for j in judgements),
                    "latency": [j.latency_s for j in judgements], "seconds": seconds})  # fmt: skip
        rw = [r for a in acc for r in a["rewards"] if r is not None]
        sc = [s for a in acc for s in a["scores"]]
        vr = [v for a in acc for v in a["verifiable"] if v is not None]
        lat = [x for a in acc for x in a["latency"]]

        def mean(x: list[float]) -> float | None:
            return statistics.fmean(x) if x else None

        def std(x: list[float]) -> float | None:
            return statistics.pstdev(x) if x else None

        store.log_step(self.run_id, step, {
            "policy": f"trl@step{step}", "reward_kind": "judge" if self.verifier_weight == 0 else "judge+verifiable",
            "reward_mean": mean(rw), "reward_std": std(rw),
            "judge_score_mean": mean(sc), "judge_score_std": std(sc),
            "verifiable_mean": mean(vr), "verifiable_std": std(vr),
            "groups": sum(a["n_groups"] for a in acc),
            "trajectories": sum(len(a["rewards"]) for a in acc),
            "zero_variance_groups": sum(a["zero_var"] for a in acc),
            "unjudged_groups": sum(a["unjudged"] for a in acc),
            "unscored_trajectories": sum(r is None for a in acc for r in a["rewards"]),
            "judge_calls": sum(a["calls"] for a in acc),
            "judge_input_tokens": sum(a["in_tok"] for a in acc),
            "judge_output_tokens": sum(a["out_tok"] for a in acc),
            "judge_latency_s_mean": mean(lat),
            "time_judge_s": sum(a["seconds"] for a in acc),
            "trainer": "trl",
        })  # fmt: skip

    def close(self) -> None:
        """Close the store (if this reward opened it)."""
        self.runner.close()
