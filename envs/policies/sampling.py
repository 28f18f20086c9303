"""One categorical draw per row, by inverse CDF with one uniform from that row's generator.

``torch.multinomial(p, 1)`` draws one exponential per vocabulary entry (49,152 for SmolLM2)
for every row and every token: at 30 rows that was 30 ms per decode step on 2 CPU cores.
:func:`sample_rows` draws the same distribution from a single float64 uniform per row: it sums
the weights in blocks, finds the block the uniform falls in, then the token inside that block
(a float64 cumulative sum of one block): 8 ms at 30 rows, softmax included (bench/sampler.py).
The draws differ from ``torch.multinomial``'s; the distribution does not.

Each row reads only its own weights and its own generator, so a row's token does not depend on
what else is in the batch. What it does not do: temperature, top-k or top-p (the caller
filters the weights first), or sampling without replacement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

BLOCK = 1024
"""Vocabulary entries per block: the float64 cumulative sum runs over one block per row."""


def sample_rows(
    weights: torch.Tensor, generators: Sequence[torch.Generator], block: int = BLOCK
) -> torch.Tensor:
    """Draw one index per row of ``weights`` (rows x vocab, non-negative, any scale) with
    probability proportional to its weight, each row from its own generator; returns a long
    tensor of ``rows``. A zero-weight index is never drawn. Raises ValueError naming the row
    when a row's weights are negative, not finite or all zero."""
    import torch

    if weights.dim() != 2:
        raise ValueError(f"weights must be rows x vocab, got shape {tuple(weights.shape)}")
    rows = weights.shape[0]
    if len(generators) != rows:
        raise ValueError(f"{len(generators)} generators for {rows} rows: one per row")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    device = weights.device
    u = torch.cat(
        [torch.rand(1, generator=g, dtype=torch.float64, device=device) for g in generators]
    )
    return locate(weights, u, block)


def locate(weights: torch.Tensor, u: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """The index of each row where ``u`` (one float64 in [0, 1) per row) falls in the row's
    cumulative weights: :func:`sample_rows` without the random draw (what tests pin)."""
    import torch

    (rows, vocab), device = weights.shape, weights.device
    pad = (-vocab) % block
    padded = torch.nn.functional.pad(weights, (0, pad)) if pad else weights
    blocks = padded.reshape(rows, -1, block)
    mass = blocks.sum(dim=-1, dtype=torch.float64)  # rows x n_blocks
    _check(mass, weights)
    cum = mass.cumsum(dim=-1)
    target = u * cum[:, -1]
    n_blocks = mass.shape[1]
    index = torch.arange(n_blocks, device=device).expand(rows, n_blocks)
    last = torch.where(mass > 0, index, -1).amax(dim=-1)  # a rounded-up target lands here
    b = torch.minimum(torch.searchsorted(cum, target[:, None], right=True)[:, 0], last)
    before = torch.where(b > 0, cum.gather(1, (b - 1).clamp(min=0)[:, None])[:, 0], 0.0)
    inner = blocks[torch.arange(rows, device=device), b].to(torch.float64).cumsum(dim=-1)
    # strictly below the block's total, so the index found has a weight above zero
    rest = torch.minimum(target - before, inner[:, -1] * (1 - 2.0**-40))
    i = torch.searchsorted(inner, rest[:, None], right=True)[:, 0]
    return b * block + i


def _check(mass: torch.Tensor, weights: torch.Tensor) -> None:
    """Raise on a row that is no distribution (what ``torch.multinomial`` refuses too)."""
    import torch

    total = mass.sum(dim=-1)
    bad = ~torch.isfinite(total) | (total <= 0) | (weights.amin(dim=-1) < 0)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"row {row} of the sampling weights is not a distribution (negative, not finite or "
            f"all zero; sum {float(total[row])}): check the logits for NaN/inf"
        )
