"""One GRPO step on a tiny random Llama: the direction of the update and the token mask."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from trainer_helpers import tiny_model

from rankgym.model import enable_checkpointing
from rankgym.trainer.grpo import (
    LossSettings,
    Sample,
    UpdateSettings,
    collate,
    grpo_loss,
    grpo_update,
    token_logprobs,
)
from rankgym.trainer.logprobs import split_lm


def _peft(seed: int = 0):
    model, tok = tiny_model(seed)
    torch.manual_seed(seed)
    lora = LoraConfig(
        r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "up_proj", "down_proj"]
    )
    return get_peft_model(model, lora), tok


def _samples() -> list[Sample]:
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(4):
        prompt = torch.randint(10, 2000, (12 + i,), generator=g).tolist()
        comp = torch.randint(10, 2000, (5 + i,), generator=g).tolist()
        out.append(
            Sample([(prompt + comp, [0] * len(prompt) + [1] * len(comp))], [1.0, -1.0][i % 2])
        )
    return out


def _seq_logps(model, samples, pad_id) -> list[float]:
    with torch.no_grad():
        out = []
        for s in samples:
            mb = collate([s], pad_id)
            out.append(float((token_logprobs(model, mb) * mb.loss_mask).sum()))
        return out


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("level", ["token", "sequence"])
def test_one_step_moves_logprobs_with_the_advantage(loss_type, level):
    model, tok = _peft()
    samples = _samples()
    before = _seq_logps(model, samples, tok.pad_token_id)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    s = UpdateSettings(
        loss=LossSettings(
            loss_type=loss_type, importance_sampling_level=level, max_completion_length=16
        ),
        micro_batch_size=2,
    )
    st = grpo_update(model, opt, samples, s, pad_id=tok.pad_token_id)
    after = _seq_logps(model, samples, tok.pad_token_id)
    assert st.optimizer_steps == 1 and st.trained_trajectories == 4
    for x, b, a in zip(samples, before, after, strict=True):
        assert (a > b) if x.advantage > 0 else (a < b), (loss_type, level, x.advantage, b, a)


def test_zero_advantage_everywhere_is_no_step():
    model, tok = _peft()
    samples = [Sample(x.rows, 0.0) for x in _samples()]
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    before = {k: v.clone() for k, v in model.state_dict().items() if "lora" in k}
    st = grpo_update(model, opt, samples, UpdateSettings(), pad_id=tok.pad_token_id)
    assert st.optimizer_steps == 0 and st.skipped_zero_advantage == 4
    for k, v in model.state_dict().items():
        if "lora" in k:
            assert torch.equal(v, before[k])


def test_masked_positions_get_zero_gradient():
    """Tool/user tokens between two assistant turns: no gradient reaches the positions that
    predict them (final hidden state at p predicts token p + 1)."""
    model, tok = _peft()
    ids, mask = [5, 6, 7, 8, 9, 10, 11, 12], [0, 0, 0, 1, 1, 0, 0, 1]
    sample = Sample([(ids, mask)], 1.0)
    captured = {}

    def keep(_mod, _inp, out):
        out.last_hidden_state.retain_grad()
        captured["hidden"] = out.last_hidden_state

    hook = split_lm(model)[0].register_forward_hook(keep)
    try:
        mb = collate([sample], tok.pad_token_id)
        logp = token_logprobs(model, mb)
        loss, _ = grpo_loss(logp, logp.detach(), mb, LossSettings(), 1, float(sum(mask)))
        loss.backward()
    finally:
        hook.remove()
    per_target = captured["hidden"].grad[0, :-1].abs().sum(-1)  # row p predicts token p + 1
    m = torch.tensor(mask[1:])
    assert torch.all(per_target[m == 0] == 0)
    assert torch.all(per_target[m == 1] > 0)
    assert float(captured["hidden"].grad[0, -1].abs().sum()) == 0.0


def test_kl_to_adapter_off_reference_and_multiple_iterations():
    model, tok = _peft()
    samples = _samples()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-2)
    s = UpdateSettings(
        loss=LossSettings(beta=0.1, epsilon=0.05), micro_batch_size=2, num_iterations=3
    )
    st = grpo_update(model, opt, samples, s, pad_id=tok.pad_token_id)
    assert st.optimizer_steps == 3
    # iteration 1 starts at the base model (LoRA B = 0): KL 0 there, > 0 once the adapter moved
    assert st.kl is not None and st.kl > 0
    # old log-probs are fixed before iteration 1, so iterations 2-3 see ratios != 1 and clip
    assert 0 < st.clip_fraction < 1
    with torch.no_grad():
        mb = collate(samples, tok.pad_token_id)
        with model.disable_adapter():
            ref = token_logprobs(model, mb)
        cur = token_logprobs(model, mb)
    assert not torch.allclose(ref, cur)  # the adapter changed the policy, not the base weights


def test_gradient_checkpointing_gives_the_same_step():
    results = []
    for ckpt in (False, True):
        model, tok = _peft()
        if ckpt:
            enable_checkpointing(model)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        grpo_update(model, opt, _samples(), UpdateSettings(micro_batch_size=2), tok.pad_token_id)
        results.append({k: v.clone() for k, v in model.state_dict().items() if "lora_B" in k})
    for k in results[0]:
        torch.testing.assert_close(results[0][k], results[1][k], rtol=1e-4, atol=1e-6)


def test_logprobs_are_those_of_the_sampling_temperature():
    model, tok = _peft()
    mb = collate([_samples()[2]], tok.pad_token_id)
    K = mb.loss_mask.shape[1]
    with torch.no_grad():
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits.float()
        targets = mb.input_ids[:, -K:].unsqueeze(-1)
        for t in (1.0, 0.7, 1.3):
            want = torch.log_softmax(logits[:, -K - 1 : -1] / t, -1).gather(-1, targets)[..., 0]
            got = token_logprobs(model, mb, t)
            assert torch.allclose(got, want, atol=1e-5), t
        assert torch.equal(token_logprobs(model, mb, 0.0), token_logprobs(model, mb))
    # the trainer passes the rollout temperature through (greedy counts as 1)
    from rankgym.config import validate_config
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.setup import update_settings

    for sampled, used in ((0.7, 0.7), (0.0, 1.0), (1.0, 1.0)):
        cfg = validate_config({"policy": {"temperature": sampled}}, TrainConfig)
        assert update_settings(cfg, 2, False).temperature == used
