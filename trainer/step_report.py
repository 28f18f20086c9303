"""What one GRPO step reports: its :class:`StepMetrics` and the line the loop prints.

:func:`step_metrics` builds the record a step logs to the store (the Runs page reads it back)
from the step's rewards (``rewards.step_rewards``), update and timings; :func:`step_line` and
:func:`monitor_line` say it in one line; :func:`history_summary` is what a run's summary says
about its steps. What it does not do: compute rewards or the monitor's numbers.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from rankgym.step_metrics import StepMetrics
from rankgym.trainer.rewards import StepRewards

if TYPE_CHECKING:
    from rankgym.trainer.records import StepTiming

__all__ = ["history_summary", "monitor_line", "step_line", "step_metrics"]

_JUDGE_USAGE = ("input_tokens", "output_tokens", "cost_usd", "latency_s_mean", "calls")
"""Keys of the rollout timing's ``judge`` dict, logged as ``judge_<key>``."""


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
    timing: StepTiming,
    bf16: bool,
    judge_cut: float | None = None,
) -> StepMetrics:
    """The metrics of one step (``update`` is a ``grpo`` UpdateStats; ``judge_cut`` the cut the
    reward put the judge's scores at, None for the graded score); the loop adds timings."""
    spread: dict[str, Any] = {}  # reward_mean, reward_std, judge_score_mean, ...
    for name, xs in [
        ("reward", rewards.train),
        ("judge_score", rewards.judge_scores),
        ("verifiable", rewards.verifiable),
    ]:
        spread[f"{name}_mean"], spread[f"{name}_std"] = _mean_std(xs)
    judge = timing.get("judge") or {}
    usage: dict[str, Any] = {f"judge_{k}": judge.get(k) for k in _JUDGE_USAGE}
    verif = rewards.verifiable
    return StepMetrics(
        policy=policy,
        reward_kind=reward_kind,
        **spread,
        success_rate=(
            sum(v >= success_threshold for v in verif) / n_trajectories if n_trajectories else None
        ),
        groups=n_groups,
        trajectories=n_trajectories,
        zero_variance_groups=zero_variance_groups,
        unscored_trajectories=unscored,
        unjudged_groups=rewards.unjudged_groups,
        hack_flagged=rewards.hack_flagged,
        hack_penalized=rewards.hack_penalized,
        no_signal=update.trained_trajectories == 0,
        trained_trajectories=update.trained_trajectories,
        loss=update.loss,
        grad_norm=update.grad_norm,
        clip_fraction=update.clip_fraction,
        kl=update.kl,
        lr=lr,
        update_tokens=update.tokens,
        update_tokens_per_s=update.tokens_per_s,
        rollout_completion_tokens=timing.get("rollout_completion_tokens"),
        rollout_tokens_per_s=(
            timing["rollout_completion_tokens"] / timing["rollout_s"]
            if timing.get("rollout_s")
            else None
        ),
        **usage,
        time_rollout_s=timing.get("rollout_s"),
        time_judge_s=timing.get("judge_s"),
        time_update_s=update.seconds,
        reused_rollout=timing.get("reused_rollout", False),
        threads=timing.get("threads"),
        bf16=bf16,
        judge_cut=judge_cut,
    )


def step_line(m: StepMetrics, k: int, steps: int) -> str:
    """The one-line progress report of step ``k`` (0-based) from its metrics."""
    return (
        f"step {k + 1}/{steps}  reward {_fmt(m.reward_mean)}"
        f"  verifiable {_fmt(m.verifiable_mean)}"
        f"  success {_fmt(m.success_rate)}"
        f"  zero-var {m.zero_variance_groups}/{m.groups}"
        + (f"  hack-penalized {m.hack_penalized}" if m.hack_penalized else "")
        + (
            f"  truncated {m.truncated_trajectories}/{m.trajectories}"
            if m.truncated_trajectories
            else ""
        )
        + ("  TRUNCATION RISING" if m.truncation_rising else "")
        + monitor_line(m)
        + (f"  cut {m.judge_cut:.2f}" if m.judge_cut is not None else "")
        + ("  JUDGE BELOW CHANCE" if m.judge_below_chance else "")
        + ("  JUDGE DROPPED (verifier only)" if m.judge_dropped else "")
        + ("  NO VERIFIER SIGNAL (forced)" if m.forced_no_signal else "")
        + ("  NO VERIFIER SIGNAL (skipped)" if m.skipped_no_signal else "")
        + f"  {m.time_step_s or 0:.0f}s (rollout {m.time_rollout_s or 0:.0f}s,"
        f" judge {m.time_judge_s or 0:.0f}s, update {m.time_update_s or 0:.0f}s)"
    )


def monitor_line(m: StepMetrics) -> str:
    """``  judge~verifier pairwise 0.62 (run 0.58 [0.49, 0.66]) tau +0.21 top-fail 25%
    tied-shorter 0.40 signal +0.36``; "" when the step has no monitor numbers."""
    if m.monitor_pairs_run is None:
        return ""
    if not m.monitor_pairs_run:
        return "  judge~verifier -"
    ci = (
        f" [{m.judge_pairwise_run_low:.2f}, {m.judge_pairwise_run_high:.2f}]"
        if m.judge_pairwise_run_low is not None and m.judge_pairwise_run_high is not None
        else ""
    )
    tau = f"{m.judge_tau_run:+.2f}" if m.judge_tau_run is not None else "-"
    top = (
        f" top-fail {m.judge_top_fail_rate_run:.0%}"
        if m.judge_top_fail_rate_run is not None
        else ""
    )
    tied = (
        f" tied-shorter {m.judge_tied_shorter_run:.2f}"
        if m.judge_tied_shorter_run is not None
        else ""
    )
    signal = f" signal {m.judge_signal_run:+.2f}" if m.judge_signal_run is not None else ""
    return (
        f"  judge~verifier pairwise {_fmt(m.judge_pairwise)} (run "
        f"{_fmt(m.judge_pairwise_run)}{ci}, {m.monitor_pairs_run} pairs) tau {tau}{top}{tied}"
        f"{signal}"
    )


def history_summary(history: list[StepMetrics]) -> dict[str, Any]:
    """What a run's summary says about its steps' rewards (first/last, no-signal steps, ...)."""
    rewards = [m.reward_mean for m in history if m.reward_mean is not None]
    return {
        "reward_first": rewards[0] if rewards else None,
        "reward_last": rewards[-1] if rewards else None,
        "no_signal_steps": sum(bool(m.no_signal) for m in history),
        "hack_penalized": sum(int(m.hack_penalized or 0) for m in history),
        "forced_no_signal_steps": sum(bool(m.forced_no_signal) for m in history),
        "skipped_no_signal_steps": sum(bool(m.skipped_no_signal) for m in history),
        "judge_below_chance_steps": sum(bool(m.judge_below_chance) for m in history),
        "truncation_rising_steps": sum(bool(m.truncation_rising) for m in history),
        "reward_per_step": [
            {
                "reward_mean": m.reward_mean,
                "judge_score_mean": m.judge_score_mean,
                "verifiable_mean": m.verifiable_mean,
                "success_rate": m.success_rate,
                "truncated_trajectories": m.truncated_trajectories,
            }
            for m in history
        ],
    }


def _fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"
