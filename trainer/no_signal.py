"""The no-signal refusal: is a step's verifier signal gone, did the judge fail its check, what a
step that would train on the judge's noise alone says, and :func:`watch_signal`, which decides
with ``[monitor] no_signal``: stop, skip or train (the ``monitor.py`` docstring tells the rule).

What it does not do: look at the judge's agreement on the step (the monitor does, before the
step is scored).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rankgym.errors import RankgymError
from rankgym.types import SCORE_TIE, Group

if TYPE_CHECKING:
    from rankgym.trainer.loop import Trainer

__all__ = [
    "NoSignalStep",
    "check_failed",
    "no_signal_message",
    "trains",
    "verifier_constant",
    "watch_signal",
]


class NoSignalStep(RankgymError):
    """A step with no verifier signal and a judge that failed its check (``--force`` trains)."""


def verifier_constant(groups: Sequence[Group]) -> bool | None:
    """True when every group with two or more known verifier rewards has them all equal (and
    there is at least one such group); False when one varies; None when no group has any."""
    seen = False
    for g in groups:
        vs = [t.verifiable_reward for t in g.trajectories if t.verifiable_reward is not None]
        if len(vs) < 2:
            continue
        seen = True
        if max(vs) - min(vs) > SCORE_TIE:
            return False
    return True if seen else None


def check_failed(report: dict[str, Any] | None) -> bool:
    """Whether a preflight judge-check report shows a judge that failed: tau CI not above 0 on
    the calibration groups, or (a ``[judge_train]`` judge) its held-out check on this policy's
    own groups (``on_policy``) not passed."""
    if not report:
        return False
    if (report.get("on_policy") or {}).get("passed") is False:
        return True
    low = (report.get("kendall_tau") or {}).get("ci_low")
    return low is not None and not (isinstance(low, float) and math.isnan(low)) and low <= 0


def no_signal_message(step: int, n_groups: int, report: dict[str, Any]) -> str:
    """The refusal (or, with ``--force``, the warning) for a step without verifier signal."""
    tau = report.get("kendall_tau") or {}
    numbers = (
        f"tau {tau['value']:+.2f} [{tau['ci_low']:+.2f}, {tau['ci_high']:+.2f}]"
        if tau.get("value") is not None and tau.get("ci_high") is not None
        else "tau CI not above 0"
    )
    on_policy = report.get("on_policy") or {}
    if on_policy.get("passed") is False:
        ci = on_policy.get("pairwise_accuracy_ci") or [float("nan")] * 2
        numbers = (
            f"held-out pairwise {on_policy.get('pairwise_accuracy')} [{ci[0]:.2f}, {ci[1]:.2f}] "
            "on this policy's groups"
        )
    return (
        f"step {step + 1}: all {n_groups} groups have constant verifier rewards, so this "
        f"update would follow the judge alone, and the judge failed its check ({numbers}): "
        "the policy would train on judge noise. Options: --force to train anyway (warned on "
        "every such step); monitor.no_signal = 'skip' to skip such steps' updates; easier tasks or an SFT start so the verifier separates trajectories "
        "(env.kwargs, [sft], --init-adapter); or a judge that passes its check (judge.model)"
    )


def trains(advantages: Sequence[Sequence[float]]) -> bool:
    """Whether any trajectory has a non-zero advantage (an update would move the policy)."""
    return any(abs(a) > 0 for row in advantages for a in row)


def watch_signal(
    trainer: Trainer, step: int, groups: list[Group], advantages: list[list[float]]
) -> dict[str, Any]:
    """The no-signal refusal on one scored step, before its update; returns the ``StepMetrics``
    fields it sets. Raises :class:`NoSignalStep` (``monitor.no_signal = "stop"`` without
    ``trainer.force``); else it warns and flags the step: ``skipped_no_signal`` tells the loop
    to make no update."""
    constant = verifier_constant(groups)
    out: dict[str, Any] = {"no_verifier_signal": constant}
    report = trainer.judge_check
    if trainer.reward.needs_judge and constant and check_failed(report) and trains(advantages):
        msg = no_signal_message(step, len(groups), report or {})
        policy = "train" if trainer.force else trainer.cfg.monitor.no_signal
        if policy == "stop":
            raise NoSignalStep(msg)
        if policy == "skip":
            trainer.echo(f"warning: {msg} (monitor.no_signal = 'skip': no update this step)")
            out["skipped_no_signal"] = True
        else:
            trainer.echo(f"warning: {msg} (--force: training anyway)")
            out["forced_no_signal"] = True
    return out
