"""Attention for training steps on the CPU: plain matmul-softmax-matmul where the scores are small.

PyTorch's CPU flash-attention kernel (what ``sdpa`` runs there) is slow at the sizes a GRPO
micro-batch has: measured on this box at 2 rows x 450 tokens, 9 heads of 64, bf16, one thread,
its backward took 47 ms against 25 ms for the same attention written as two matmuls and a
softmax, and in one update of the demo's batch attention was a third of the time
(bench/RESULTS.md, issue 23). The plain form keeps the ``rows x heads x q x k`` probabilities
for backward, so it is only used while that tensor is small (:data:`EAGER_MAX_SCORES`); bigger
micro-batches (issue 23's 12 rows x 1,100 tokens: 130 M scores) stay on ``sdpa``, whose memory
does not grow with the square of the length. With gradient checkpointing only one layer's
probabilities are alive at a time.

:func:`training_attention` switches a transformers model to it for a block (forward and the
backward that recomputes checkpointed layers must see the same attention) and back after; the
masks are ``sdpa``'s (bool, True = attend; None = causal). Numbers equal ``sdpa``'s within float
rounding (tested). What this does not do: dropout in attention (it falls back to ``sdpa``),
softcapping, sliding windows, or anything for models whose attention is not dispatched through
transformers' ``AttentionInterface`` (those keep their own).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

NAME = "rankgym_train"
EAGER_MAX_SCORES = 6_000_000
"""Largest ``rows x heads x q x k`` run as plain matmuls (~12 bytes per score while a layer is
computed and recomputed: ~70 MB); above it, ``sdpa``."""


def train_attention_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers ``AttentionInterface`` function: plain attention when the scores are at
    most :data:`EAGER_MAX_SCORES` and nothing else is asked of it, else ``sdpa``."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    R, H, Tq, D = query.shape
    Tk = key.shape[2]
    plain = (
        R * H * Tq * Tk <= EAGER_MAX_SCORES
        and dropout == 0.0
        and kwargs.get("softcap") is None
        and kwargs.get("position_bias") is None
        and kwargs.get("sliding_window") is None
        and getattr(module, "is_causal", True)
        and (attention_mask is not None or Tq == Tk)
    )
    if not plain:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    n = H // key.shape[1]
    k, v = repeat_kv(key, n), repeat_kv(value, n)
    w = torch.matmul(query, k.transpose(2, 3))
    scale = D**-0.5 if scaling is None else scaling
    keep: torch.Tensor | None = None
    if attention_mask is None:  # causal, q and k aligned
        keep = torch.ones(Tq, Tk, dtype=torch.bool, device=w.device).tril()
    elif attention_mask.dtype == torch.bool:
        keep = attention_mask
    if keep is not None:  # an additive mask, a row smaller than the scores (no heads)
        bias = torch.zeros(keep.shape, dtype=w.dtype, device=w.device)
        bias.masked_fill_(~keep, torch.finfo(w.dtype).min / 2)  # finite: pad rows stay finite
    else:
        assert attention_mask is not None
        bias = attention_mask.to(w.dtype)
    w = torch.add(bias, w, alpha=scale)  # scale and mask in one pass (and one in backward)
    p = torch.softmax(w, -1, dtype=torch.float32).to(query.dtype)
    out = torch.matmul(p, v)
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, train_attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)


@contextlib.contextmanager
def training_attention(model: Any) -> Iterator[bool]:
    """Run ``model`` (transformers, or a peft model over one) with :func:`train_attention_forward`
    inside the block, restoring its attention after. Yields False and changes nothing for a
    model that does not use ``sdpa`` or cannot switch (e.g. flash attention on a GPU, eager)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = getattr(base, "config", None)
    before = getattr(cfg, "_attn_implementation", None)
    if cfg is None or before != "sdpa" or not hasattr(base, "set_attn_implementation"):
        yield False
        return
    try:
        _register()
        base.set_attn_implementation(NAME)
    except (ValueError, KeyError, ImportError):  # a model or version that refuses: left as is
        base.set_attn_implementation(before)
        yield False
        return
    if cfg._attn_implementation != NAME:
        yield False
        return
    try:
        yield True
    finally:
        base.set_attn_implementation(before)
