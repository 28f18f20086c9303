"""One optimizer recipe for GRPO and the SFT warm start: AdamW on trainable weights + warmup."""

from __future__ import annotations

import pytest
import torch

from rankgym.trainer.config import TrainConfig
from rankgym.trainer.setup import adamw_with_warmup, make_optimizer


def _model() -> torch.nn.Module:
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    m[0].requires_grad_(False)  # a frozen base: only the trainable layer is optimised
    return m


def test_only_trainable_weights_are_optimised_and_the_rate_ramps_over_the_warmup():
    model = _model()
    opt, sched = adamw_with_warmup(model, 1e-2, warmup_steps=4)
    (group,) = opt.param_groups
    assert [p.shape for p in group["params"]] == [torch.Size([1, 2]), torch.Size([1])]
    rates = []
    for _ in range(6):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert rates == pytest.approx([2.5e-3, 5e-3, 7.5e-3, 1e-2, 1e-2, 1e-2])


def test_no_warmup_means_the_full_rate_from_the_first_step():
    opt, _ = adamw_with_warmup(_model(), 3e-4, warmup_steps=0)
    assert opt.param_groups[0]["lr"] == pytest.approx(3e-4)


def test_grpo_takes_betas_weight_decay_and_warmup_from_the_optim_section():
    cfg = TrainConfig.model_validate(
        {"optim": {"lr": 1e-3, "betas": [0.8, 0.9], "weight_decay": 0.1, "warmup_steps": 2}}
    )
    opt, _ = make_optimizer(_model(), cfg)
    g = opt.param_groups[0]
    assert g["betas"] == (0.8, 0.9) and g["weight_decay"] == 0.1
    assert g["lr"] == pytest.approx(5e-4)
