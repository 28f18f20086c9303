"""SFT micro-batches (issue 23): a batch split into micro-batches trains exactly as one pass."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from trainer_helpers import tiny_model

from rankgym.envs.policies import TransformersPolicy
from rankgym.trainer.setup import make_env_factory
from rankgym.trainer.sft import oracle_conversations, render_rows, sft_train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _lora_and_rows() -> tuple[Any, Any, Any, list[Any]]:
    """A tiny model, its seeded LoRA, the tokenizer and 4 oracle demonstrations' rows."""
    from peft import LoraConfig, get_peft_model

    model, tok = tiny_model(seed=2)
    env = make_env_factory("rankgym/ToolUse-v0", {"difficulty": "hard", "families": ["lookup"]})
    rows = render_rows(TransformersPolicy(model, tok), oracle_conversations(env, n_tasks=4))
    torch.manual_seed(0)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")  # fmt: skip
    return model, get_peft_model(model, lora), tok, rows


def _train(micro: int) -> tuple[list[float], dict[str, torch.Tensor]]:
    _, peft, tok, rows = _lora_and_rows()
    st = sft_train(peft, rows, pad_id=tok.pad_token_id, steps=2, lr=5e-3, batch_size=4,
                   micro_batch_size=micro)  # fmt: skip
    trained = {n: p.detach().clone() for n, p in peft.named_parameters() if p.requires_grad}
    return st.losses, trained


def test_sft_in_micro_batches_gives_the_losses_and_weights_of_one_pass():
    whole_losses, whole = _train(micro=4)
    split_losses, split = _train(micro=1)
    assert split_losses == pytest.approx(whole_losses, rel=1e-5)
    for n, p in whole.items():
        torch.testing.assert_close(split[n], p, rtol=1e-4, atol=1e-6)


def _checkpointed_train(keep_tokens: int) -> tuple[dict[str, torch.Tensor], int, list[bool]]:
    """SFT of a checkpointed tiny LoRA model; returns its weights, how many times the first
    decoder layer's attention ran forward, and every layer's checkpointing flag after."""
    from rankgym.model import enable_checkpointing

    model, peft, tok, rows = _lora_and_rows()
    enable_checkpointing(peft)
    layers = model.model.layers
    calls = []
    layers[0].self_attn.register_forward_hook(lambda *_: calls.append(1))
    sft_train(peft, rows, pad_id=tok.pad_token_id, steps=2, lr=5e-3, batch_size=4,
              micro_batch_size=2, keep_activations_tokens=keep_tokens)  # fmt: skip
    trained = {n: p.detach().clone() for n, p in peft.named_parameters() if p.requires_grad}
    return trained, len(calls), [bool(layer.gradient_checkpointing) for layer in layers]


def test_small_micro_batches_keep_their_activations_with_the_same_weights():
    recomputed, calls_recomputed, flags_after = _checkpointed_train(keep_tokens=0)
    kept, calls_kept, flags_kept = _checkpointed_train(keep_tokens=100_000)
    assert calls_recomputed == 2 * calls_kept  # checkpointing runs each forward again
    assert calls_kept == 4  # 2 steps x 2 micro-batches, one forward each
    for n, p in recomputed.items():
        assert torch.equal(kept[n], p), n
    assert all(flags_after) and all(flags_kept)  # checkpointing is back on after SFT


def test_the_size_rule_and_the_pause_of_a_model_without_checkpointing():
    from rankgym.trainer.checkpointing import checkpointing_paused, keeps_activations

    assert keeps_activations(2, 512, 1024) and not keeps_activations(2, 513, 1024)
    assert not keeps_activations(1, 1, 0)
    model, _ = tiny_model(seed=2)
    with checkpointing_paused(model):  # nothing checkpoints: nothing to pause or restore
        assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
    assert not any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
