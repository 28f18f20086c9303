"""Judge data from the policy itself: roll out a policy adapter on the envs' ``judge`` split.

A judge that will reward a policy should be trained on that policy's own failures (a fluent
chain that stops one call early looks like nothing an oracle or a random policy writes). The
``judge`` split (``rankgym.envs.judge_split``) is a fixed share of each built-in env's train
tasks that ``env.tasks("train")`` no longer returns, so GRPO never draws these tasks and the
judge's labels never come from tasks the policy is trained on.

:func:`rollout_judge_split` writes groups of a policy (e.g. the SFT warm start's adapter) on
that split into a store; the verifier's rewards on them become ``verifier`` pairs in
``rankgym.judges.judge_data``. What it does not do: label anything (the env's verifier does),
or work on an env without a ``judge`` split (it says so, naming the env). It rolls out envs
and loads a trainer adapter, so it sits in the trainer layer (it was
``rankgym.judges.judge_rollout`` before issue 27).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.envs.judge_split import JUDGE_SPLIT
from rankgym.errors import UserError

if TYPE_CHECKING:
    from rankgym.envs.base import Env
    from rankgym.envs.policies import Policy
    from rankgym.envs.policies.transformers import TransformersPolicy

ROLLOUT_RUN = "judge-split"
"""Run id of the judge-split rollouts in the store (one per env: ``judge-split:ENV``)."""

MAX_CONCURRENT = 64
"""Episodes in flight at once in a judge-split rollout: the whole ToolUse judge split at 8
episodes a task (544 episodes) in one batch grew past 5 GB RSS in 3 minutes (the KV caches);
64 at a time stayed under 3 GB (about 3 s an episode on 2 shared cores)."""


def adapter_policy(adapter: str | Path, name: str, *, max_new_tokens: int = 64,
                   temperature: float = 0.7, seed: int = 0) -> TransformersPolicy:  # fmt: skip
    """A sampling policy over the embedded base model plus the LoRA adapter in ``adapter``."""
    from rankgym.trainer.context import TrainingContext

    path = Path(adapter)
    if not (path / "adapter_config.json").is_file():
        raise UserError(
            f"--rollout-adapter {str(adapter)!r} holds no adapter_config.json; pass the SFT "
            "stage's adapter directory (OUT/sft of `rankgym train`) or OUT/adapter"
        )
    ctx = TrainingContext.from_adapter(path, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)  # fmt: skip
    return ctx.policy(name)


def judge_tasks(
    env_id: str, env_kwargs: dict[str, Any] | None = None, env: Env | None = None
) -> int:
    """How many tasks the judge split of ``env_id`` has; raises ``UserError`` when it has none.

    ``env``: the env already built from ``env_id`` and ``env_kwargs`` (else one is made).
    """
    from rankgym.envs.registry import make

    if env is None:
        env = make(env_id, **(env_kwargs or {}))
    if JUDGE_SPLIT not in env.splits:
        raise UserError(
            f"env {env_id} has no {JUDGE_SPLIT!r} split (its splits: {', '.join(env.splits)}); "
            "roll out its train tasks into a store instead and pass it with --store"
        )
    n = len(env.tasks(JUDGE_SPLIT))
    if n == 0:
        raise UserError(f"env {env_id} (kwargs {env_kwargs or {}}) has no judge-split tasks")
    return n


def rollout_judge_split(
    policy: Policy,
    env_id: str,
    store_path: str | Path,
    *,
    tasks: int | None = None,
    group_size: int = 4,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
    max_turns: int | None = None,
    progress: bool = False,
    max_concurrent: int | None = MAX_CONCURRENT,
    task_ids: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Roll ``policy`` out on ``tasks`` judge-split tasks of ``env_id`` (all when None; or
    exactly ``task_ids``), groups of ``group_size``, into the store at ``store_path`` (run
    ``judge-split:ENV``; a rerun resumes), at most ``max_concurrent`` episodes in flight (None =
    all at once).

    The env that counts the split's tasks is the rollout's first env (an EmailSearch env
    builds or loads its inboxes, so it is built once). Returns ``{"env", "run_id", "groups",
    "new_groups", "trajectories", "mean_verifiable_reward"}``.
    """
    from rankgym.envs.registry import make
    from rankgym.envs.rollout import first_then, rollout_to_store
    from rankgym.store import Store

    first = make(env_id, **(env_kwargs or {}))
    available = judge_tasks(env_id, env_kwargs, first)
    run_id = f"{ROLLOUT_RUN}:{env_id}"
    with Store(str(store_path)) as store:
        res = rollout_to_store(
            store,
            first_then(first, lambda: make(env_id, **(env_kwargs or {}))),
            policy,
            run_id=run_id,
            n_tasks=None if task_ids is not None else min(tasks or available, available),
            task_ids=task_ids,
            group_size=group_size,
            split=JUDGE_SPLIT,
            seed=seed,
            max_turns=max_turns,
            progress=progress,
            max_concurrent=max_concurrent,
        )
        groups = [store.get_group(g) for g in store.group_ids(run_id=run_id)]
    rewards = [t.verifiable_reward or 0.0 for g in groups for t in g.trajectories]
    return {
        "env": env_id,
        "run_id": run_id,
        "groups": len(groups),
        "new_groups": len(res.groups),
        "trajectories": len(rewards),
        "mean_verifiable_reward": sum(rewards) / len(rewards) if rewards else None,
    }
