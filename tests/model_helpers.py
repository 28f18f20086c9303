"""A LoRA with a random, non-zero B on a model, so "adapter on" and "adapter off" compute
different things (a fresh LoRA's B is zero). Shared by the tests of named adapters, the shared
base, the local judge on it and the chunked log-probs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def random_lora(
    model: Any,
    r: int,
    targets: Sequence[str],
    *,
    seed: int,
    std: float = 0.5,
    name: str | None = None,
) -> Any:
    """``model`` wrapped in a peft LoRA (rank ``r``, alpha ``2r``, on ``targets``; adapter
    ``name`` or peft's default) whose B matrices are drawn from N(0, ``std``) after seeding
    torch with ``seed``."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    cfg = LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(targets))
    peft = get_peft_model(model, cfg) if name is None else get_peft_model(model, cfg, adapter_name=name)  # fmt: skip
    with torch.no_grad():
        for n, p in peft.named_parameters():
            if "lora_B" in n:
                p.normal_(0, std)
    return peft
