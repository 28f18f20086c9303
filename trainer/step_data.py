"""One training step's data: roll out with the current adapter and judge (or reuse a stored step).

:func:`rollout_and_judge` is rank 0's half of ``Trainer._rollout_and_judge`` (``loop.py``): it
rolls out ``env.tasks_per_step`` groups with the policy serving adapter step ``k`` (checking
every turn says so), stores them, judges them (the env's tool schemas reach the judge), and
writes the step manifest. A step whose manifest exists is read back from the store instead.

What it does not do: compute rewards or train (``rewards.py``, ``grpo.py``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from rankgym.trainer import checkpoint as ckpt
from rankgym.trainer.records import StepTiming
from rankgym.types import Group

if TYPE_CHECKING:
    from rankgym.trainer.loop import Trainer

__all__ = ["rollout_and_judge", "stored_manifests"]


def rollout_and_judge(trainer: Trainer, step: int) -> tuple[list[Group], StepTiming]:
    """The groups of step ``step`` (judged when the reward uses the judge) and its timing."""
    from rankgym.envs.rollout import rollout_groups

    cfg = trainer.cfg
    timing: StepTiming = {"reused_rollout": False}
    man = ckpt.manifest_path(trainer.out, step)
    if man.is_file():
        saved = json.loads(man.read_text())
        spec_hash = saved.get("spec_hash")
        groups = [trainer.store.get_group(gid, spec_hash) for gid in saved["group_ids"]]
        timing.update(saved.get("timing", {}))
        timing["reused_rollout"] = True
        return groups, timing
    trainer._phase_threads(timing, "rollout")
    t0 = time.perf_counter()
    expected = trainer._serve_adapter(step)
    groups = rollout_groups(
        trainer.env,
        trainer.policy,
        n_tasks=cfg.env.tasks_per_step,
        group_size=cfg.env.group_size,
        split=cfg.env.split,
        seed=cfg.seed,
        run_id=trainer.run_id,
        step=step,
        progress=trainer.progress,
        stratify=cfg.env.stratify,
    )
    stale = {
        tu.policy for g in groups for t in g.trajectories for tu in t.turns if tu.policy != expected
    }
    if stale:
        raise RuntimeError(
            f"step {step}: rollouts came from {sorted(map(str, stale))}, expected {expected!r}; "
            "the policy is not serving the current adapter"
        )
    drop_kv = getattr(trainer.policy, "drop_kv", None)  # vLLM/remote policies keep no cache
    if drop_kv is not None:  # the caches are stale after the update: free them for judge+update
        drop_kv()
    timing["rollout_s"] = time.perf_counter() - t0
    timing["rollout_completion_tokens"] = sum(
        len(tu.completion_token_ids) for g in groups for t in g.trajectories for tu in t.turns
    )
    trainer.store.put_groups(groups)
    judge_summary: dict[str, Any] = {}
    if trainer.spec is not None:
        from rankgym.judges.group_judge import judge_groups_sync, summarize

        trainer._phase_threads(timing, "judge")
        t1 = time.perf_counter()
        js = judge_groups_sync(
            groups,
            trainer.spec,
            trainer.store,
            permutations=cfg.judge.permutations,
            concurrency=cfg.judge.concurrency,
            tools={g.id: g.tools for g in groups if g.tools},  # the env's tools
            method=trainer.reward.judge_method,  # the reward's judging method
        )
        judge_summary = summarize(js, trainer.spec.spec_hash)
        timing["judge_s"] = time.perf_counter() - t1
    else:
        timing["judge_s"] = 0.0
    timing["judge"] = judge_summary
    ckpt.write_json_atomic(
        man,
        {
            "step": step,
            "group_ids": [g.id for g in groups],
            "spec_hash": trainer.spec.spec_hash if trainer.spec else None,
            "timing": timing,
        },
    )
    return groups, timing


def stored_manifests(out_dir: Any, before: int) -> list[tuple[int, dict[str, Any]]]:
    """``(step, manifest)`` of the steps before ``before`` whose manifest exists, in order."""
    out = []
    for k in range(before):
        man = ckpt.manifest_path(out_dir, k)
        if man.is_file():
            out.append((k, json.loads(man.read_text())))
    return out
