"""One real GRPO step on a multi-turn tool-use trajectory: only assistant tokens carry gradient.

The trajectory is a ToolUse oracle episode (two tool calls, two tool results, a final answer)
rendered by ``TransformersPolicy.demonstration`` — the same rendering the rollout uses — on a
tiny random Llama with LoRA.
"""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from trainer_helpers import tiny_model

from rankgym.envs.policies import TransformersPolicy
from rankgym.envs.registry import make
from rankgym.trainer.grpo import LossSettings, Sample, UpdateSettings, grpo_update, trajectory_rows
from rankgym.trainer.logprobs import split_lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _oracle_episode():
    env = make("rankgym/ToolUse-v0", difficulty="hard", families=["lookup"])
    task = env.tasks("train")[0]
    messages, info = env.reset(options={"task_id": task.id})
    for action in env.oracle(task):
        new, reward, *_ = env.step(action)
        messages = messages + [action] + new
    assert reward == 1.0
    return messages, info["tools"]


def test_one_real_step_trains_assistant_tokens_and_not_prompt_or_tool_output_tokens():
    model, tok = tiny_model(seed=1)
    messages, tools = _oracle_episode()
    turns = TransformersPolicy(model, tok).demonstration(messages, tools)
    assert len(turns) == 3  # two tool calls and the answer
    rows = trajectory_rows(turns)
    assert len(rows) == 1  # each turn's prompt extends the previous one
    ids, mask = rows[0]
    n = len(ids)
    between = tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 0][-120:])
    assert "<tool_response" in between  # tool output lies among the masked tokens

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lora)
    captured: dict[str, torch.Tensor] = {}

    def keep_hidden(_module, _inp, out):  # final hidden states: position p predicts token p + 1
        out.last_hidden_state.retain_grad()
        captured["hidden"] = out.last_hidden_state

    hook = split_lm(peft_model)[0].register_forward_hook(keep_hidden)
    before = {k: v.detach().clone() for k, v in peft_model.named_parameters() if v.requires_grad}
    opt = torch.optim.SGD([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    settings = UpdateSettings(loss=LossSettings(loss_type="dapo"), micro_batch_size=1, bf16=False)
    stats = grpo_update(peft_model, opt, [Sample(rows, 1.0)], settings, pad_id=tok.pad_token_id)
    hook.remove()

    assert stats.trained_trajectories == 1 and stats.optimizer_steps == 1
    changed = [k for k, v in peft_model.named_parameters() if v.requires_grad and not torch.equal(v, before[k])]  # fmt: skip
    assert changed  # a real optimizer step happened

    grad = captured["hidden"].grad[0].abs().sum(-1)  # (n,): no padding in a one-row batch
    assert grad.shape[0] == n
    per_token = [0.0] + [float(g) for g in grad[:-1]]  # gradient reaching the row predicting i
    assert float(grad[-1]) == 0.0  # the position after the last token predicts nothing
    assistant = [per_token[i] for i in range(n) if mask[i] == 1]
    context = [per_token[i] for i in range(n) if mask[i] == 0]
    assert len(assistant) == sum(len(t.completion_token_ids) for t in turns)
    assert all(g > 0 for g in assistant)
    assert all(g == 0 for g in context)  # system, user, tool output and template tokens
