"""trainer/attention.py: plain attention for small training micro-batches against sdpa."""

from __future__ import annotations

import pytest
import torch
from model_helpers import random_lora
from trainer_helpers import tiny_model

from rankgym.model import enable_checkpointing
from rankgym.trainer import attention
from rankgym.trainer.attention import training_attention
from rankgym.trainer.grpo import Sample, collate, token_logprobs


def _model_and_batch():
    model, tok = tiny_model(0)
    model = random_lora(model, 8, ["q_proj", "v_proj", "o_proj"], seed=0, std=0.05)
    g = torch.Generator().manual_seed(4)
    samples = []
    for n_prompt, masks in ((9, [1, 1, 0, 0, 1, 1, 1]), (14, [1] * 5), (5, [1, 0, 1, 0, 0, 1])):
        ids = torch.randint(10, 3000, (n_prompt + len(masks),), generator=g).tolist()
        samples.append(Sample([(ids, [0] * n_prompt + masks)], 1.0))
    return model, collate(samples, tok.pad_token_id)


def _logprobs_and_grads(model, mb):
    model.zero_grad(set_to_none=True)
    lp = token_logprobs(model, mb)
    (lp * mb.loss_mask * torch.linspace(-1, 1, lp.shape[1])).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    return lp.detach(), grads


@pytest.mark.parametrize("padded", [True, False])
def test_plain_attention_gives_sdpas_logprobs_and_gradients_and_is_switched_back(
    padded, monkeypatch
):
    model, mb = _model_and_batch()
    if not padded:  # one row: no padding, transformers passes no mask (causal)
        mb = collate([Sample([(list(range(20, 40)), [0] * 8 + [1] * 12)], 1.0)], 0)
    enable_checkpointing(model)
    model.train()
    want, want_g = _logprobs_and_grads(model, mb)
    calls = []
    real = attention.train_attention_forward

    def spy(module, query, *a, **kw):
        calls.append(query.shape)
        return real(module, query, *a, **kw)

    monkeypatch.setattr(attention, "train_attention_forward", spy)
    with training_attention(model) as on:
        assert on and model.get_base_model().config._attn_implementation == attention.NAME
        got, got_g = _logprobs_and_grads(model, mb)
    assert model.get_base_model().config._attn_implementation == "sdpa"
    assert calls  # it ran (forward and the checkpointed recompute)
    m = mb.loss_mask.bool()
    torch.testing.assert_close(got[m], want[m], rtol=0, atol=1e-5)
    for n in want_g:
        torch.testing.assert_close(got_g[n], want_g[n], rtol=1e-4, atol=1e-6)


def test_scores_above_the_limit_go_to_sdpa_with_the_same_numbers(monkeypatch):
    model, mb = _model_and_batch()
    with torch.no_grad():
        want = token_logprobs(model, mb)
        monkeypatch.setattr(attention, "EAGER_MAX_SCORES", 0)
        used = []
        import transformers.integrations.sdpa_attention as sd

        real = sd.sdpa_attention_forward
        monkeypatch.setattr(sd, "sdpa_attention_forward", lambda *a, **k: used.append(1) or real(*a, **k))  # fmt: skip
        with training_attention(model):
            got = token_logprobs(model, mb)
    assert used
    assert torch.equal(got, want)


def test_a_model_not_on_sdpa_is_left_as_it_is():
    model, _ = tiny_model(1)
    model.set_attn_implementation("eager")
    with training_attention(model) as on:
        assert not on and model.config._attn_implementation == "eager"
