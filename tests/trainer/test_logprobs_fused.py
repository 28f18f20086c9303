"""The lm_head gradient computed in forward (trainer/logprobs.py ``_FusedChunk``) against
autograd through recomputed logits, and the update's LoRA-input casting (trainer/grpo.py)."""

from __future__ import annotations

import contextlib

import pytest
import torch
from model_helpers import random_lora
from trainer_helpers import tiny_model

from rankgym.trainer import grpo, logprobs
from rankgym.trainer.grpo import Sample, UpdateSettings, grpo_update
from rankgym.trainer.logprobs import hidden_logprobs


def _head_and_hidden(seed: int = 0) -> tuple[torch.nn.Linear, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(32, 500, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(500, 32, generator=g) * 0.3)
    head.weight.requires_grad_(False)
    hidden = torch.randn(11, 32, generator=g)
    targets = torch.randint(0, 500, (11,), generator=g)
    return head, hidden, targets


def _grads(head, hidden, targets, temperature, chunk, fused: bool, monkeypatch):
    monkeypatch.setattr(logprobs, "_fusable", lambda _: fused)
    h = hidden.clone().requires_grad_()
    lp = hidden_logprobs(head, h, targets, temperature, chunk)
    weights = torch.linspace(-2, 1, lp.numel())
    (lp * weights).sum().backward()
    return lp.detach(), h.grad


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("chunk", [1, 4, 256])
def test_the_gradient_computed_in_forward_equals_autograd_through_recomputed_logits(
    temperature, chunk, monkeypatch
):
    head, hidden, targets = _head_and_hidden()
    lp_ref, g_ref = _grads(head, hidden, targets, temperature, chunk, False, monkeypatch)
    lp, g = _grads(head, hidden, targets, temperature, chunk, True, monkeypatch)
    torch.testing.assert_close(lp, lp_ref, rtol=0, atol=1e-6)
    # float32 sums in another order: one element in 352 differed by 3e-7 (1.8e-5 relative) on
    # a CPU with AMX and AVX-512 BF16, against 1e-7 elsewhere
    torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-6)


def test_under_bf16_autocast_the_fused_gradient_stays_within_bf16_rounding(monkeypatch):
    head, hidden, targets = _head_and_hidden(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lp_ref, g_ref = _grads(head, hidden, targets, 1.0, 4, False, monkeypatch)
        lp, g = _grads(head, hidden, targets, 1.0, 4, True, monkeypatch)
    torch.testing.assert_close(lp, lp_ref, rtol=0, atol=1e-6)  # same bf16 logits
    assert g.dtype == g_ref.dtype
    assert float((g - g_ref).abs().max()) <= 0.02 * float(g_ref.abs().max())


def test_a_trainable_or_biased_lm_head_takes_the_recomputing_path_and_gets_its_gradient():
    head, hidden, targets = _head_and_hidden(2)
    assert logprobs._fusable(head)
    head.weight.requires_grad_(True)
    assert not logprobs._fusable(head)
    hidden_logprobs(head, hidden.clone().requires_grad_(), targets, chunk=4).sum().backward()
    assert head.weight.grad is not None and float(head.weight.grad.abs().sum()) > 0
    assert not logprobs._fusable(torch.nn.Linear(32, 500))  # a bias


def _lora_after_update(uncast: bool, monkeypatch) -> dict[str, torch.Tensor]:
    if not uncast:
        monkeypatch.setattr(grpo, "lora_inputs_uncast", lambda m, a: contextlib.nullcontext())
    model, tok = tiny_model(0)
    model = random_lora(model, 8, ["q_proj", "o_proj", "down_proj"], seed=0, std=0.05)
    g = torch.Generator().manual_seed(3)
    samples = []
    for i in range(4):
        ids = torch.randint(10, 2000, (14 + 3 * i,), generator=g).tolist()
        samples.append(Sample([(ids, [0] * 9 + [1] * (5 + 3 * i))], [1.0, -1.0][i % 2]))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    s = UpdateSettings(micro_batch_size=2, bf16=True)
    grpo_update(model, opt, samples, s, tok.pad_token_id)
    return {k: v.clone() for k, v in model.state_dict().items() if "lora_" in k}


def test_leaving_lora_inputs_uncast_under_autocast_gives_the_same_update_bit_for_bit(monkeypatch):
    with monkeypatch.context() as m:
        want = _lora_after_update(False, m)
    got = _lora_after_update(True, monkeypatch)
    for k in want:
        assert torch.equal(got[k], want[k]), k
