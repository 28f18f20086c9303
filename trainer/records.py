"""Typed records the trainer hands between its stages: a step's rollout timing, an evaluation.

Both are ``TypedDict`` s: plain dicts at run time, so what is stored (the step manifest's
``timing``, ``rankgym eval --json``, ``eval.json``) is byte for byte what the dicts were before
they had a type. They say which keys exist and what they hold; they check nothing at run time.

What this module does not do: build them (``step_data.rollout_and_judge`` and
``evaluate.evaluate_policies`` do) or turn them into metrics (``step_report.step_metrics``).
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

__all__ = ["EvalResult", "StepTiming"]


class StepTiming(TypedDict, total=False):
    """How a training step's groups were made, kept in its manifest for a resumed run.

    Every key is optional: a step that reused stored groups has the timing it saved (older
    manifests have fewer keys) plus ``reused_rollout``.
    """

    reused_rollout: bool
    """The groups were read back from the step's manifest, not rolled out again."""
    rollout_s: float
    rollout_completion_tokens: int
    judge_s: float
    """0.0 when the reward did not call the judge."""
    judge: dict[str, Any]
    """``rankgym.judges.record.judge_summary`` of the step's judgements (empty: no judge)."""
    threads: dict[str, int]
    """Torch threads chosen per phase (``rollout``, ``judge``, ``update``) with adapt_threads."""


class EvalResult(TypedDict):
    """What ``evaluate_policies`` returns (and ``rankgym eval --json`` prints).

    ``policies`` maps each policy's name to its numbers: ``success``, ``successes``, ``n``,
    ``ci95``, ``mean_verifiable_reward``, ``tool_call_rate``, ``mean_turns``, ``errors``, and
    for every earlier policy ``ref`` a ``vs_<ref>`` dict (``difference``, ``ci95``,
    ``only_<name>``, ``only_<ref>``, ``both``). Those keys are named after the policies, which
    a TypedDict cannot spell, so each policy's entry stays a ``dict[str, Any]``.
    """

    split: str
    tasks: int
    samples_per_task: int
    success_threshold: float
    seed: int
    policies: dict[str, dict[str, Any]]
    tag: NotRequired[str]
    """Set by the training loop: which evaluation of the run this is (``step<k>``)..."""
    step: NotRequired[int]
    """... and after how many steps."""
    env: NotRequired[str]
    """Set by ``rankgym eval``: the env id, its kwargs, the adapter and sampling temperature."""
    env_kwargs: NotRequired[dict[str, Any]]
    adapter: NotRequired[str]
    temperature: NotRequired[float]
