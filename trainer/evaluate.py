"""Held-out evaluation: success of the base model vs a LoRA adapter on the same tasks and seeds.

Both policies run the same episodes: the rollout driver derives every episode's env seed and
sampling seed from ``(seed, task, index)``, so sample *i* of task *t* is paired across policies.
The base model is the same peft model with its adapter disabled (``model.disable_adapter()``),
so no second copy is loaded.

Statistics: each success rate gets a 95% Wilson interval (it treats the ``tasks x samples``
episodes as independent, which they are not quite: samples of one task are correlated); the
difference gets a paired cluster-bootstrap interval that resamples *tasks* (2000 resamples,
seeded), which accounts for that correlation. Success means ``verifiable_reward >=
env.success_threshold``; an episode that errored counts as a failure.

Memory: at most ``max_in_flight`` episodes (default :data:`EVAL_IN_FLIGHT`) run at once; each
holds its conversation's KV cache between turns (~23 MB per 1,000 tokens for the embedded
model in bf16), so the demo's 90 episodes all in flight held ~1.8 GB. The cap does not change
which episodes run or their sampling seeds (both come from ``(seed, task, index)`` and the
turn); it changes which rows share a batch, so float rounding differs and, in bf16, a near tie
can sample another token (bench/RESULTS.md, "demo memory" measures how often).

What it does not do: it does not judge (success is the env's verifier), and it cannot evaluate
an env without a verifiable reward.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from rankgym.envs.registry import make
from rankgym.envs.rollout import EnvSource, rollout_groups
from rankgym.trainer.records import EvalResult
from rankgym.types import Group

Z95 = 1.959963984540054
EVAL_IN_FLIGHT = 30
"""Default cap on the evaluation's episodes in flight (6 groups of the demo's 5 samples)."""


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``k`` successes in ``n`` trials (``(0, 1)`` when n = 0)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return (lo, hi)


def paired_bootstrap(
    a: dict[str, list[int]],
    b: dict[str, list[int]],
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float]:
    """Percentile CI (level ``1 - alpha``) of mean(b) - mean(a) over episodes, resampling the
    tasks both share, with replacement (``scipy.stats.bootstrap``, paired by task).

    Each policy's mean is its own successes over its own episodes in the resampled tasks, so a
    task with more episodes on one side than the other is weighted as each side ran it. Tasks
    with no episode on one side or the other are left out. Fewer than two shared tasks give a point
    interval (the observed difference; nothing to resample)."""
    import numpy as np
    from scipy import stats

    keys = sorted(k for k in set(a) & set(b) if a[k] and b[k])
    if not keys:
        return (0.0, 0.0)
    sums_a, n_a, sums_b, n_b = (
        np.array([f(side[k]) for k in keys], dtype=float) for side in (a, b) for f in (sum, len)
    )

    def diff(sa: Any, na: Any, sb: Any, nb: Any, axis: int = -1) -> Any:
        return sb.sum(axis) / nb.sum(axis) - sa.sum(axis) / na.sum(axis)

    if len(keys) < 2:
        point = float(diff(sums_a, n_a, sums_b, n_b))
        return (point, point)
    res = stats.bootstrap(
        (sums_a, n_a, sums_b, n_b), diff, paired=True, vectorized=True, n_resamples=n_boot,
        confidence_level=1 - alpha, method="percentile", rng=seed,
    )  # fmt: skip
    lo, hi = res.confidence_interval
    return (float(lo), float(hi))


class AdapterOffPolicy:
    """Wraps a policy over a peft model so that it generates with the adapter disabled."""

    def __init__(self, policy: Any, name: str | None = None) -> None:
        self.policy = policy
        self.name = name or f"{policy.name}@base"

    def generate(self, batch: Any, tools: Any, contexts: Any = None) -> Any:
        saved = self.policy.name
        self.policy.name = self.name
        try:
            with self.policy.model.disable_adapter():
                return self.policy.generate(batch, tools, contexts)
        finally:
            self.policy.name = saved

    def drop_kv(self) -> None:
        """Free the wrapped policy's kept KV caches (``TransformersPolicy.drop_kv``)."""
        drop = getattr(self.policy, "drop_kv", None)
        if drop is not None:
            drop()


def successes(groups: Sequence[Group], threshold: float) -> dict[str, list[int]]:
    """task id -> [1/0 per sample, ordered by episode seed]."""
    out: dict[str, list[int]] = {}
    for g in groups:
        trajs = sorted(g.trajectories, key=lambda t: t.seed or 0)
        out[g.task_id] = [
            int(t.verifiable_reward is not None and t.verifiable_reward >= threshold) for t in trajs
        ]
    return out


def mean_reward(groups: Sequence[Group]) -> float | None:
    rs = [
        t.verifiable_reward
        for g in groups
        for t in g.trajectories
        if t.verifiable_reward is not None
    ]
    return sum(rs) / len(rs) if rs else None


def tool_use(groups: Sequence[Group]) -> tuple[float | None, float | None]:
    """(share of episodes with at least one tool call that ran without error, mean turns)."""
    trajs = [t for g in groups for t in g.trajectories]
    if not trajs:
        return None, None
    ok = sum(
        int((t.metrics.get("tool_calls") or 0) - (t.metrics.get("tool_errors") or 0) >= 1)
        for t in trajs
    )
    turns = [t.metrics.get("turns") or len(t.turns) for t in trajs]
    return ok / len(trajs), sum(turns) / len(trajs)


def rate(table: dict[str, list[int]]) -> tuple[float, int, int]:
    k = sum(sum(v) for v in table.values())
    n = sum(len(v) for v in table.values())
    return (k / n if n else 0.0), k, n


def evaluate_policies(
    env: EnvSource,
    policies: dict[str, Any],
    *,
    split: str = "test",
    n_tasks: int | None = None,
    samples: int = 2,
    seed: int = 0,
    progress: bool = False,
    on_groups: Callable[[str, list[Group]], None] | None = None,
    max_in_flight: int | None = EVAL_IN_FLIGHT,
) -> EvalResult:
    """Run each policy on the same held-out episodes; success rates with CIs and paired diffs.

    ``env`` is what ``rollout_groups`` takes (an id or a factory). The first policy is the
    reference for the paired differences. ``on_groups(name, groups)`` sees each policy's groups
    (e.g. to store them). ``max_in_flight`` caps the episodes sampled at once (None: all of a
    policy's episodes at once); it bounds the KV caches held, not the results' seeds.
    """
    if max_in_flight is not None and max_in_flight < 1:
        raise ValueError(f"max_in_flight must be >= 1 or None, got {max_in_flight}")
    probe = env() if callable(env) else make(env)
    threshold = float(probe.success_threshold)
    n_avail = len(probe.tasks(split))
    if n_avail == 0:
        raise ValueError(f"the env has no tasks in split {split!r}")
    n_tasks = min(n_tasks or n_avail, n_avail)
    tables: dict[str, dict[str, list[int]]] = {}
    out: EvalResult = {
        "split": split,
        "tasks": n_tasks,
        "samples_per_task": samples,
        "success_threshold": threshold,
        "seed": seed,
        "policies": {},
    }
    for name, policy in policies.items():
        groups = rollout_groups(
            env,
            policy,
            n_tasks=n_tasks,
            group_size=samples,
            split=split,
            seed=seed,
            run_id="eval",
            step=0,
            progress=progress,
            max_concurrent=max_in_flight,
        )
        drop_kv = getattr(policy, "drop_kv", None)  # this policy's last caches: not needed now
        if drop_kv is not None:
            drop_kv()
        if on_groups is not None:
            on_groups(name, groups)
        tables[name] = successes(groups, threshold)
        p, k, n = rate(tables[name])
        out["policies"][name] = {
            "success": p,
            "successes": k,
            "n": n,
            "ci95": list(wilson(k, n)),
            "mean_verifiable_reward": mean_reward(groups),
            "tool_call_rate": tool_use(groups)[0],
            "mean_turns": tool_use(groups)[1],
            "errors": sum(t.error is not None for g in groups for t in g.trajectories),
        }
    names = list(policies)
    for i, name in enumerate(names):
        for ref in names[:i]:  # every later policy against every earlier one, paired
            _paired(out, tables, ref, name, seed)
    return out


def _paired(
    out: EvalResult, tables: dict[str, dict[str, list[int]]], ref: str, name: str, seed: int
) -> None:
    a, b = tables[ref], tables[name]
    d = out["policies"][name]["success"] - out["policies"][ref]["success"]
    pairs = [(x, y) for k in sorted(set(a) & set(b)) for x, y in zip(a[k], b[k], strict=False)]
    out["policies"][name]["vs_" + ref] = {
        "difference": d,
        "ci95": list(paired_bootstrap(a, b, seed=seed)),
        "only_" + name: sum(1 for x, y in pairs if y and not x),
        "only_" + ref: sum(1 for x, y in pairs if x and not y),
        "both": sum(1 for x, y in pairs if x and y),
    }
