"""Stop a training run at the first non-finite loss, gradient or weight, before it is saved.

A NaN or inf anywhere in an update silently poisons the adapter: ``[optim] lr = inf`` once
finished with exit 0, a logged loss of 0.077 and all 4,884,480 adapter values non-finite. The
training loops (GRPO in ``loop.py``, SFT in ``sft.py``, the judge LoRA in ``judge_train.py``)
call :func:`check_update` after every optimizer step and before any checkpoint or adapter is
written, so such a run ends with one :class:`NonFiniteTraining` line naming the stage and step,
and the files on disk are the last good ones.

What it checks: the step's loss and gradient norm (each a float, e.g. what
``clip_grad_norm_`` returned) and every trainable parameter (``torch.isfinite`` over the
LoRA weights: about 5 ms for the 4.9M values of the demo's adapter on one CPU core).

What it does not do: no automatic recovery (skipping the step, lowering the learning rate,
reloading the last checkpoint); no check of frozen base weights, of optimizer state, or of
rewards (``rewards.py`` and ``grpo.group_advantages`` handle those).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from rankgym.errors import RankgymError

__all__ = ["NonFiniteTraining", "check_update", "non_finite_values"]


class NonFiniteTraining(RankgymError, RuntimeError):
    """A training step produced a NaN/inf loss, gradient or weight; nothing of it was saved."""


def non_finite_values(params: Iterable[torch.Tensor]) -> int:
    """How many values of ``params`` are NaN or +-inf (0 for an empty iterable)."""
    bad = 0
    with torch.no_grad():
        for p in params:
            if p.is_floating_point() or p.is_complex():
                bad += int((~torch.isfinite(p)).sum())
    return bad


def check_update(
    stage: str,
    step: int,
    *,
    loss: float | None = None,
    grad_norm: float | None = None,
    params: Iterable[torch.Tensor] = (),
    hint: str = "lower the learning rate or check the inputs",
) -> None:
    """Raise :class:`NonFiniteTraining` if ``loss``, ``grad_norm`` or any of ``params`` is not finite.

    ``stage`` and ``step`` (1-based, as the user counts) go into the message, with ``hint``.
    ``None`` for ``loss``/``grad_norm`` means "not measured" and is not checked.
    """
    problems = []
    if loss is not None and not math.isfinite(loss):
        problems.append(f"loss {loss}")
    if grad_norm is not None and not math.isfinite(grad_norm):
        problems.append(f"gradient norm {grad_norm}")
    params = list(params)
    bad = non_finite_values(params)
    if bad:
        total = sum(p.numel() for p in params)
        problems.append(f"{bad} of {total} trainable weights")
    if problems:
        raise NonFiniteTraining(
            f"{stage} step {step}: non-finite {', '.join(problems)}; the run stopped before "
            f"saving this step (files on disk are from the last good step); {hint}"
        )
