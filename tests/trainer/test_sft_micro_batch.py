"""SFT micro-batches (issue 23): a batch split into micro-batches trains exactly as one pass."""

from __future__ import annotations

import pytest
import torch
from trainer_helpers import tiny_model

from rankgym.envs.policies import TransformersPolicy
from rankgym.trainer.setup import make_env_factory
from rankgym.trainer.sft import oracle_conversations, render_rows, sft_train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train(micro: int) -> tuple[list[float], dict[str, torch.Tensor]]:
    from peft import LoraConfig, get_peft_model

    model, tok = tiny_model(seed=2)
    env = make_env_factory("rankgym/ToolUse-v0", {"difficulty": "hard", "families": ["lookup"]})
    rows = render_rows(TransformersPolicy(model, tok), oracle_conversations(env, n_tasks=4))
    torch.manual_seed(0)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")  # fmt: skip
    peft = get_peft_model(model, lora)
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
