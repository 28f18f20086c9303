"""Chunked log-probs (trainer/logprobs.py) against full-vocabulary logits on a tiny Llama."""

from __future__ import annotations

import pytest
import torch
from model_helpers import random_lora
from trainer_helpers import tiny_model

from rankgym.model import enable_checkpointing
from rankgym.trainer.grpo import MicroBatch, Sample, collate, token_logprobs
from rankgym.trainer.logprobs import full_logits_logprobs, hidden_logprobs, selected_logprobs


def _peft(seed: int = 0):
    """The tiny model with a non-zero adapter, so "adapter on" and "off" differ."""
    model, tok = tiny_model(seed)
    return random_lora(model, 8, ["q_proj", "v_proj", "down_proj"], seed=seed, std=0.05), tok


def _batch(pad_id: int) -> MicroBatch:
    """Three rows of different lengths, two multi-turn (context holes inside the completion)."""
    g = torch.Generator().manual_seed(4)
    samples = []
    for n_prompt, masks in ((9, [1, 1, 0, 0, 1, 1, 1]), (14, [1] * 5), (5, [1, 0, 1, 0, 0, 1])):
        ids = torch.randint(10, 3000, (n_prompt + len(masks),), generator=g).tolist()
        samples.append(Sample([(ids, [0] * n_prompt + masks)], 1.0))
    return collate(samples, pad_id)


@pytest.mark.parametrize("chunk", [1, 3, 256])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_logprobs_equal_full_logits_within_1e5_at_every_loss_position(chunk, temperature):
    model, tok = _peft()
    mb = _batch(tok.pad_token_id)
    with torch.no_grad():
        want = full_logits_logprobs(model, mb, temperature)
        got = token_logprobs(model, mb, temperature, chunk=chunk)
    m = mb.loss_mask.bool()
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert torch.allclose(got[m], want[m], atol=1e-5, rtol=0)
    assert torch.all(got[~m] == 0)  # context places are not computed


def test_chunked_logprobs_give_the_same_lora_gradients_as_full_logits():
    grads = []
    for fn in (full_logits_logprobs, lambda m, b: token_logprobs(m, b, chunk=4)):
        model, tok = _peft()
        mb = _batch(tok.pad_token_id)
        weights = torch.linspace(-1, 1, mb.loss_mask.numel()).reshape(mb.loss_mask.shape)
        (fn(model, mb) * mb.loss_mask * weights).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], rtol=1e-4, atol=1e-6)


def test_adapter_off_and_gradient_checkpointing_go_through_the_chunked_path():
    model, tok = _peft()
    mb = _batch(tok.pad_token_id)
    m = mb.loss_mask.bool()
    with torch.no_grad(), model.disable_adapter():
        ref_want, ref_got = full_logits_logprobs(model, mb), token_logprobs(model, mb)
    assert torch.allclose(ref_got[m], ref_want[m], atol=1e-5)
    with torch.no_grad():
        assert not torch.allclose(token_logprobs(model, mb)[m], ref_got[m])
    enable_checkpointing(model)
    model.train()
    lp = token_logprobs(model, mb)
    (lp * mb.loss_mask).sum().backward()
    assert any(float(p.grad.abs().sum()) > 0 for p in model.parameters() if p.requires_grad)


def test_selected_logprobs_score_any_token_at_any_place_and_reject_position_zero():
    model, _ = tiny_model(seed=2)
    ids = torch.randint(10, 3000, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logp = model(input_ids=ids).logits.float().log_softmax(-1)
        rows, cols, tg = torch.tensor([0, 0, 1]), torch.tensor([3, 3, 6]), torch.tensor([5, 9, 7])
        got = selected_logprobs(model, ids, None, None, rows, cols, tg)
        want = torch.stack([logp[0, 2, 5], logp[0, 2, 9], logp[1, 5, 7]])
        assert torch.allclose(got, want, atol=1e-5)
        with pytest.raises(ValueError, match="position 0"):
            selected_logprobs(model, ids, None, None, torch.tensor([0]), torch.tensor([0]))
        with pytest.raises(ValueError, match="chunk"):
            hidden_logprobs(model.lm_head, torch.zeros(2, 32), torch.tensor([1, 2]), chunk=0)


def test_chunked_logprobs_under_bf16_autocast_stay_close_to_fp32():
    model, tok = _peft()
    mb = _batch(tok.pad_token_id)
    m = mb.loss_mask.bool()
    with torch.no_grad():
        fp32 = token_logprobs(model, mb)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = token_logprobs(model, mb)
            want = full_logits_logprobs(model, mb)
    assert bf16.dtype == torch.float32
    assert torch.allclose(bf16[m], want[m], atol=0.05)
    assert torch.allclose(bf16[m], fp32[m], atol=0.2)


def test_judge_losses_from_chunked_logprobs_equal_those_from_full_logits():
    from rankgym.trainer.judge_train import Example, build_batch, judge_losses, model_judge_losses

    model, _ = tiny_model(seed=3)
    examples = [
        Example("with-answer", context=[5, 6, 7, 8], correct=11, wrong=12, answer=[11, 13, 2]),
        Example("margin-only", context=[9, 10], correct=12, wrong=11, answer=[]),
        Example("long", context=list(range(20, 31)), correct=11, wrong=12, answer=[12, 40]),
    ]
    b = build_batch(examples, pad_id=0)
    weighted = {**b, "weight": torch.tensor([3.0, 1.0, 0.25])}  # e.g. --human-weight 3 on row 0
    for gamma, batch in ((0.0, b), (0.7, b), (50.0, b), (0.7, weighted)):
        full = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
            logits_to_keep=batch["keep"],
        ).logits
        want = judge_losses(full, batch, gamma)
        got = model_judge_losses(model, batch, gamma)  # what judge training computes
        for k in want:
            assert float(got[k].detach()) == pytest.approx(float(want[k].detach()), abs=1e-5), k
    g1 = torch.autograd.grad(want["sft"] + want["margin"], model.model.layers[0].mlp.up_proj.weight)
    g2 = torch.autograd.grad(got["sft"] + got["margin"], model.model.layers[0].mlp.up_proj.weight)
    torch.testing.assert_close(g2[0], g1[0], rtol=1e-4, atol=1e-7)
    only_margin = build_batch(examples[1:2], pad_id=0)
    assert float(model_judge_losses(model, only_margin, 0.7)["sft"]) == 0.0
