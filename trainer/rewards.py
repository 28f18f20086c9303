"""From judged groups to training rewards, and the metrics one training step logs.

``step_rewards`` is the seam TRL calls ``_calculate_rewards``: per trajectory, the configured
blend of the judge's score and the env's verifiable reward (``reward.kind``), then the hack
penalty: a trajectory the *env* flagged (any ``hack_signals`` entry not starting with
``judge_``) gets the lowest reward of its group, so GRPO never pushes towards it. Signals the
judge derived itself (``judge_hack_suspected``, ``judge_top_verifier_failed``) are not used:
the first is noise with the embedded judge, the second would leak the verifier into a
judge-only reward.

``step_metrics`` names every key a step logs to the store (and the Runs page reads).

What this module does not do: no reward shaping beyond the blend and the penalty (no length
penalty, no format reward: format credit is the env's business), and no normalisation (that is
``grpo.group_advantages``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from rankgym.types import Group, Trajectory

__all__ = [
    "StepRewards",
    "blend_reward",
    "env_hack_signals",
    "step_metrics",
    "step_rewards",
]


def blend_reward(
    judge: float | None, verifiable: float | None, kind: str, weight: float
) -> float | None:
    """Training reward of one trajectory; None (no signal) when a needed part is missing."""
    if kind == "judge":
        return judge
    if kind == "verifiable":
        return verifiable
    if judge is None or verifiable is None:
        return None
    return (1.0 - weight) * judge + weight * verifiable


def env_hack_signals(t: Trajectory) -> list[str]:
    """The hack signals the env raised for ``t`` (the judge's own ``judge_*`` ones left out)."""
    return [s for s in t.hack_signals if not s.startswith("judge_")]


@dataclass
class StepRewards:
    """The rewards of one step's groups, row per group, plus what went into them.

    ``rewards[g][i]`` is None when trajectory ``i`` of group ``g`` has no signal (unjudged, or
    no verifiable reward when the blend needs one). ``hack_penalized`` counts trajectories whose
    reward the penalty lowered (a flagged trajectory already at its group's minimum is not counted).
    """

    rewards: list[list[float | None]] = field(default_factory=list)
    judge_scores: list[float] = field(default_factory=list)
    verifiable: list[float] = field(default_factory=list)
    train: list[float] = field(default_factory=list)
    unjudged_groups: int = 0
    hack_flagged: int = 0
    hack_penalized: int = 0


def step_rewards(
    groups: list[Group],
    *,
    judged: bool,
    kind: str,
    verifiable_weight: float,
    hack_penalty: bool,
) -> StepRewards:
    """Training rewards of ``groups`` (see the module docstring). ``judged``: a judge ran."""
    out = StepRewards()
    for g in groups:
        ok = g.judgement is not None and g.judgement.status == "ok"
        out.unjudged_groups += int(judged and not ok)
        smap = g.judgement.score_map() if ok and g.judgement is not None else {}
        row: list[float | None] = []
        for t in g.trajectories:
            js, vr = smap.get(t.id), t.verifiable_reward
            row.append(blend_reward(js, vr, kind, verifiable_weight))
            if js is not None:
                out.judge_scores.append(js)
            if vr is not None:
                out.verifiable.append(vr)
        flagged = [bool(env_hack_signals(t)) for t in g.trajectories]
        out.hack_flagged += sum(flagged)
        scored = [r for r in row if r is not None]
        if hack_penalty and scored:
            low = min(scored)
            for i, bad in enumerate(flagged):
                r = row[i]
                if bad and r is not None and r > low:
                    row[i] = low
                    out.hack_penalized += 1
        out.train.extend(r for r in row if r is not None)
        out.rewards.append(row)
    return out


def _mean_std(xs: list[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.pstdev(xs) if len(xs) > 1 else 0.0)


def step_metrics(
    *,
    policy: str,
    reward_kind: str,
    rewards: StepRewards,
    n_groups: int,
    n_trajectories: int,
    success_threshold: float,
    zero_variance_groups: int,
    unscored: int,
    update: Any,
    lr: float,
    timing: dict[str, Any],
    bf16: bool,
) -> dict[str, Any]:
    """The metrics dict of one step, as logged to the store (``update`` is a ``grpo`` UpdateStats)."""
    rm, rs = _mean_std(rewards.train)
    jm, jsd = _mean_std(rewards.judge_scores)
    vm, vsd = _mean_std(rewards.verifiable)
    judge = timing.get("judge") or {}
    verif = rewards.verifiable
    return {
        "policy": policy,
        "reward_kind": reward_kind,
        "reward_mean": rm,
        "reward_std": rs,
        "judge_score_mean": jm,
        "judge_score_std": jsd,
        "verifiable_mean": vm,
        "verifiable_std": vsd,
        "success_rate": (
            sum(v >= success_threshold for v in verif) / n_trajectories if n_trajectories else None
        ),
        "groups": n_groups,
        "trajectories": n_trajectories,
        "zero_variance_groups": zero_variance_groups,
        "unscored_trajectories": unscored,
        "unjudged_groups": rewards.unjudged_groups,
        "hack_flagged": rewards.hack_flagged,
        "hack_penalized": rewards.hack_penalized,
        "no_signal": update.trained_trajectories == 0,
        "trained_trajectories": update.trained_trajectories,
        "loss": update.loss,
        "grad_norm": update.grad_norm,
        "clip_fraction": update.clip_fraction,
        "kl": update.kl,
        "lr": lr,
        "update_tokens": update.tokens,
        "update_tokens_per_s": update.tokens_per_s,
        "rollout_completion_tokens": timing.get("rollout_completion_tokens"),
        "rollout_tokens_per_s": (
            timing["rollout_completion_tokens"] / timing["rollout_s"]
            if timing.get("rollout_s")
            else None
        ),
        "judge_input_tokens": judge.get("input_tokens"),
        "judge_output_tokens": judge.get("output_tokens"),
        "judge_cost_usd": judge.get("cost_usd"),
        "judge_latency_s_mean": judge.get("latency_s_mean"),
        "judge_calls": judge.get("calls"),
        "time_rollout_s": timing.get("rollout_s"),
        "time_judge_s": timing.get("judge_s"),
        "time_update_s": update.seconds,
        "reused_rollout": timing.get("reused_rollout", False),
        "threads": timing.get("threads"),
        "bf16": bf16,
    }


def step_line(m: dict[str, Any], k: int, steps: int) -> str:
    """The one-line progress report of step ``k`` (0-based) from its metrics."""
    return (
        f"step {k + 1}/{steps}  reward {_fmt(m['reward_mean'])}"
        f"  verifiable {_fmt(m['verifiable_mean'])}"
        f"  success {_fmt(m['success_rate'])}"
        f"  zero-var {m['zero_variance_groups']}/{m['groups']}"
        + (f"  hack-penalized {m['hack_penalized']}" if m["hack_penalized"] else "")
        + f"  {m['time_step_s']:.0f}s (rollout {m['time_rollout_s'] or 0:.0f}s,"
        f" judge {m['time_judge_s'] or 0:.0f}s, update {m['time_update_s']:.0f}s)"
    )


def history_summary(history: list[dict[str, Any]]) -> dict[str, Any]:
    """What a run's summary says about its steps' rewards (first/last, no-signal steps, ...)."""
    rewards = [r for r in (m.get("reward_mean") for m in history) if r is not None]
    return {
        "reward_first": rewards[0] if rewards else None,
        "reward_last": rewards[-1] if rewards else None,
        "no_signal_steps": sum(bool(m["no_signal"]) for m in history),
        "hack_penalized": sum(int(m.get("hack_penalized") or 0) for m in history),
        "reward_per_step": [
            {
                k: m.get(k)
                for k in ("reward_mean", "judge_score_mean", "verifiable_mean", "success_rate")
            }
            for m in history
        ],
    }


def _fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"
