"""The local/ LiteLLM provider's yes/no reader (``smollm2-yesno``) with a tiny random model (fast);
the real one is in the slow test."""

from __future__ import annotations

import asyncio
import json

import litellm
import pytest
from judge_fakes import make_group

from rankgym.judges.local_provider import CONTEXT_WINDOW, LocalJudgeLLM
from rankgym.judges.prompt import build_prompt


class TinyLocal(LocalJudgeLLM):
    """The real provider code with a 2-layer random Llama instead of SmolLM2 (same tokenizer)."""

    def __init__(self) -> None:
        super().__init__()
        import torch
        from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

        from rankgym.model import EmbeddedModelMissing, embedded_model_dir

        try:
            tok = AutoTokenizer.from_pretrained(embedded_model_dir())
        except EmbeddedModelMissing as e:
            pytest.skip(str(e))
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=CONTEXT_WINDOW)  # fmt: skip
        self.tiny = (LlamaForCausalLM(cfg).eval(), tok)

    def _model(self, model: str):
        return self.tiny


@pytest.fixture(scope="module")
def tiny():
    prov = TinyLocal()
    before = litellm.custom_provider_map
    litellm.custom_provider_map = [*before, {"provider": "tinylocal", "custom_handler": prov}]
    yield prov
    litellm.custom_provider_map = before


def test_constrained_answer_is_valid_json_for_every_id(tiny):
    p = build_prompt(make_group(3), "Prefer correct answers.")
    r = litellm.completion(
        model="tinylocal/smollm2-yesno", messages=p.messages, temperature=0, seed=0
    )
    out = json.loads(r.choices[0].message.content)
    assert [s["trajectory_id"] for s in out["scores"]] == ["T1", "T2", "T3"]
    assert all(0.0 <= s["score"] <= 1.0 and s["hack_suspected"] is False for s in out["scores"])
    assert r.usage.prompt_tokens > 100 and r.usage.completion_tokens == 3
    again = litellm.completion(model="tinylocal/smollm2-yesno", messages=p.messages)
    assert again.choices[0].message.content == r.choices[0].message.content  # deterministic


def test_async_and_plain_chat(tiny):
    msgs = [{"role": "user", "content": "hi"}]
    r = asyncio.run(
        litellm.acompletion(model="tinylocal/smollm2-yesno", messages=msgs, max_tokens=5)
    )
    assert isinstance(r.choices[0].message.content, str) and r.usage.completion_tokens <= 5


def test_too_long_prompt_is_a_context_window_error(tiny):
    long = [{"role": "user", "content": "word " * (CONTEXT_WINDOW + 10)}]
    with pytest.raises(litellm.ContextWindowExceededError):
        litellm.completion(model="tinylocal/smollm2-yesno", messages=long, max_tokens=5)
