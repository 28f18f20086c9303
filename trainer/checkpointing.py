"""Gradient checkpointing paused for micro-batches small enough to keep every activation.

``[optim] gradient_checkpointing`` (on by default) makes each decoder layer recompute its forward
in the backward pass: the activations of one layer at a time instead of all of them, for about a
third more compute. Below some size that trade does not pay: on the demo's SFT micro-batches
(2 demonstrations of at most 419 tokens) the kept activations cost ~1 GB more resident memory
and a step took 10.8 s instead of 14.9 s at 2 threads, with bit-identical adapter weights
(bench/RESULTS.md, issue 23). :func:`checkpointing_paused` turns the layers' flag off for one
block and back on after; :func:`keeps_activations` is the size rule.

What this does not do: turn checkpointing *on* for a model that has it off, or change which
layers checkpoint (transformers' ``every_n_layers``); the gradients are the same either way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

KEEP_ACTIVATIONS_TOKENS = 1024
"""Default ``[sft] keep_activations_tokens``: padded tokens (rows x length) of a micro-batch up
to which SFT keeps every activation; ~1.2 MB a token on the embedded model in bf16 autocast."""


def keeps_activations(rows: int, length: int, max_tokens: int) -> bool:
    """True when a micro-batch of ``rows`` x ``length`` padded tokens is at most ``max_tokens``
    (0 or less: never)."""
    return max_tokens > 0 and rows * length <= max_tokens


@contextlib.contextmanager
def checkpointing_paused(model: Any, pause: bool = True) -> Iterator[None]:
    """Run the block (forward *and* backward) with every checkpointed layer of ``model`` keeping
    its activations; the layers checkpoint again after, also on an error. Nothing changes when
    ``pause`` is False or no layer checkpoints."""
    if not pause:  # no walk over the model's modules for a micro-batch that checkpoints
        yield
        return
    layers = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    for m in layers:
        m.gradient_checkpointing = False
    try:
        yield
    finally:
        for m in layers:
            m.gradient_checkpointing = True
