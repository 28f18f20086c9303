"""Shared by the env and policy tests: the embedded tokenizer and a tiny random Llama on it."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    """The embedded model's tokenizer (SmolLM2), padding on the left as the policies pad."""
    from transformers import AutoTokenizer

    from rankgym.model import embedded_model_dir

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    tok.padding_side = "left"
    return tok


@pytest.fixture(scope="session")
def tiny(tokenizer: Any) -> Any:
    """A 2-layer, 32-wide Llama with the SmolLM2 vocabulary and random weights (fp32, seed 0)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    return LlamaForCausalLM(config).eval()
