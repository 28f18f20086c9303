"""What one training step logs: :class:`StepMetrics`, the store's ``steps.metrics`` row.

Core, so that the trainer (which builds it, ``rankgym.trainer.step_report.step_metrics``) and the
dashboard (which reads it back) share the record without the dashboard importing the trainer.
``rankgym.trainer.rewards.StepMetrics`` is the same class.

What it does not do: compute anything (the trainer fills it) or read the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["StepMetrics"]


@dataclass(frozen=True)
class StepMetrics:
    """What one training step logs: the store's ``steps.metrics`` row and the step line.

    ``to_dict`` gives the stored JSON and ``from_dict`` reads a stored row back (any row: the
    dashboard's sample store logs other keys). Means and rates are None when nothing was
    measured (e.g. ``judge_score_mean`` with a verifiable reward); ``judge_*`` counts are None
    when no judge ran.
    """

    policy: str
    """The rollout policy's name, ``<model>@step<k>``."""
    reward_kind: str
    """``reward.kind``: ``judge``, ``verifiable`` or ``judge+verifiable``."""
    reward_mean: float | None
    """Mean training reward (blend + hack penalty) over trajectories with a signal."""
    reward_std: float | None
    judge_score_mean: float | None
    judge_score_std: float | None
    verifiable_mean: float | None
    verifiable_std: float | None
    success_rate: float | None
    """Share of the step's trajectories whose verifiable reward reached the env's threshold."""
    groups: int
    trajectories: int
    zero_variance_groups: int
    """Groups whose rewards were all equal: zero advantage, no learning signal."""
    unscored_trajectories: int
    """Trajectories with no reward (unjudged, or no verifiable reward the blend needs)."""
    unjudged_groups: int
    hack_flagged: int
    """Trajectories the env raised a hack signal for."""
    hack_penalized: int
    """Flagged trajectories whose reward the penalty lowered to their group's minimum."""
    no_signal: bool
    """True when no trajectory had a non-zero advantage: no optimizer step was taken."""
    trained_trajectories: int
    loss: float
    grad_norm: float
    clip_fraction: float
    kl: float | None
    """Mean KL to the base model (None with ``[loss] beta = 0``)."""
    lr: float
    update_tokens: int
    update_tokens_per_s: float
    rollout_completion_tokens: int | None
    rollout_tokens_per_s: float | None
    judge_input_tokens: int | None
    judge_output_tokens: int | None
    judge_cost_usd: float | None
    judge_latency_s_mean: float | None
    judge_calls: int | None
    time_rollout_s: float | None
    time_judge_s: float | None
    time_update_s: float
    reused_rollout: bool
    """True when a resumed run reused the step's stored rollout (its manifest existed)."""
    threads: dict[str, int] | None
    """Torch threads chosen per phase (``adapt_threads``), else None."""
    bf16: bool
    extra: dict[str, Any] = field(default_factory=dict)
    """Keys other parts add (the vLLM adapter sync's stats); on read, keys this version lacks."""
    # The judge monitor (``monitor.py``): judge vs verifier (or people) on this step's groups
    # and running over the run, with 95% CI bounds; stored only when a judge ran.
    monitor_groups: int | None = None
    """Groups of this step whose trajectories the verifier (or a person) orders."""
    monitor_pairs: int | None = None
    """Pairs of trajectories the verifier orders in those groups."""
    judge_pairwise: float | None = None
    """Share of those pairs the judge orders the same way (ties half; chance = 0.5)."""
    judge_pairwise_low: float | None = None
    judge_pairwise_high: float | None = None
    judge_tau: float | None = None
    """Kendall tau-b of judge scores vs verifier rewards, mean over groups."""
    judge_tau_low: float | None = None
    judge_tau_high: float | None = None
    judge_top_fail_rate: float | None = None
    """Share of the judge's top trajectories that fail the verifier where a success was there."""
    monitor_groups_run: int | None = None
    monitor_pairs_run: int | None = None
    judge_pairwise_run: float | None = None
    """``judge_pairwise`` over every step so far (what the guard reads, with its CI)."""
    judge_pairwise_run_low: float | None = None
    judge_pairwise_run_high: float | None = None
    judge_tau_run: float | None = None
    judge_tau_run_low: float | None = None
    judge_tau_run_high: float | None = None
    judge_top_fail_rate_run: float | None = None
    monitor_tied_pairs: int | None = None
    """Pairs the verifier ties (different lengths) in this step's judged groups."""
    judge_tied_shorter: float | None = None
    """Share of those where the judge scored the shorter higher (ties half; indifferent 0.5)."""
    monitor_tied_pairs_run: int | None = None
    judge_tied_shorter_run: float | None = None
    judge_signal: float | None = None
    """Cosine between the step's group-centred judge reward (the score, or the verdict at
    ``judge_cut``) and the verifier's pass/fail at the success threshold, centred the same way
    (``trainer/monitor_signal.py``): +1 the judge pushes toward success as the verifier does, 0
    none of that push, below 0 against it; None: the judge's reward tied inside every group."""
    judge_signal_run: float | None = None
    guard_stopped: bool | None = None
    """True on the step where the judge guard stopped the run (no update was made)."""
    judge_below_chance: bool | None = None
    """True when, with the guard off (a blend), the judge's agreement with the verifier was shown
    no better than chance at this step (the guard's test): its share of the reward was noise or
    worse (warned; the step was trained on)."""
    judge_dropped: bool | None = None
    """True from the step where ``[monitor] below_chance = "drop"`` took the judge out of a
    blended reward on: that step and every later one trained on the verifier alone."""
    judge_cut: float | None = None
    """The cut the step's reward put the judge's scores at (``[reward] judge_threshold``: fixed,
    or fitted to the ``[judge_train]`` judge, ``trainer/judge_cut.py``); None: the graded score."""
    judge_split_start: float | None = None
    """Mean verifier reward of the SFT start on the judge split (train tasks GRPO never draws),
    over the tasks compared after this step (``trainer/judge_split_watch.py``); set on steps
    followed by a ``judge_split`` refresh or a ``watch_every`` rollout."""
    judge_split_reward: float | None = None
    """The policy's mean verifier reward on those tasks after this step."""
    judge_split_diff_low: float | None = None
    judge_split_diff_high: float | None = None
    """99% bootstrap interval (over tasks) of ``judge_split_reward - judge_split_start``."""
    judge_split_lower: bool | None = None
    """True when the policy was shown worse there (the guard stops a judge-only run here)."""
    no_verifier_signal: bool | None = None
    """True when every group with a verifier had constant verifier rewards."""
    forced_no_signal: bool | None = None
    """True when such a step, with a judge that failed its check, was trained under --force."""
    skipped_no_signal: bool | None = None
    """True when such a step was skipped (``monitor.no_signal = "skip"``): no update was made."""
    truncated_trajectories: int | None = None
    """Episodes cut at the turn limit before they answered (None in rows of older versions)."""
    truncation_rising: bool | None = None
    """True when their share is shown higher than at the run's first step (one-sided Fisher
    exact, ``trainer/truncation_watch.py``): the policy may be learning to never answer; None on
    the first step."""
    time_step_s: float | None = None
    """Wall time of the step up to its checkpoint (set by the loop)."""
    time_checkpoint_s: float | None = None
    checkpoint: str | None = None
    """The checkpoint dir the step wrote."""
    eval: Mapping[str, Any] | None = None
    """The held-out evaluation run after this step, when there was one (store rows only)."""
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)
    """The stored row's keys in order, for a record ``from_dict`` read (see ``to_dict``)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able dict the store keeps.

        A record the trainer built writes every field in class order (``extra`` merged after
        ``bf16``; the four fields the loop fills late only once set). A record read back writes
        the keys it was read with, in their order, then any other field or extra key now set,
        so ``from_dict(row).to_dict()`` is ``row``, key order included.
        """
        if self.keys is None:
            out: dict[str, Any] = {}
            for name in _NAMES:
                v = getattr(self, name)
                if name == "bf16":
                    out[name] = v
                    out.update(self.extra)
                elif name not in _LATE or v is not None:
                    out[name] = v
            return out
        out = {k: getattr(self, k) if k in _NAMES else self.extra[k] for k in self.keys}
        for name in _NAMES:
            if name not in out and getattr(self, name) is not None:
                out[name] = getattr(self, name)
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepMetrics:
        """A stored metrics row as a record: keys it lacks (older or other writers) read as
        None, keys this version does not name go to ``extra``."""
        extra = {k: v for k, v in d.items() if k not in _NAMES}
        named: dict[str, Any] = {k: d.get(k) for k in _NAMES}
        return cls(**named, extra=extra, keys=tuple(d))

    def series(self) -> dict[str, float]:
        """The numeric metrics (bools as 0.0/1.0) in stored order: one curve each on Runs."""
        out: dict[str, float] = {}
        for k, v in self.to_dict().items():
            if isinstance(v, bool):
                out[k] = float(v)
            elif isinstance(v, int | float):
                out[k] = v
        return out


_LATE = frozenset(
    {
        "truncated_trajectories",
        "truncation_rising",
        "time_step_s",
        "time_checkpoint_s",
        "checkpoint",
        "eval",
    }
)
_NAMES = tuple(f.name for f in fields(StepMetrics) if f.name not in ("extra", "keys"))
_MONITOR = _NAMES[_NAMES.index("monitor_groups") : _NAMES.index("skipped_no_signal") + 1]
_LATE = _LATE | frozenset(_MONITOR)  # written only when set (rows without a judge lack them)
