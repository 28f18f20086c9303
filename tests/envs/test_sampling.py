"""The policy's sampler: inverse-CDF draws have the weights' distribution, never a masked token,
and a row's draw depends on its own weights and generator only."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from rankgym.envs.policies.sampling import locate, sample_rows


def _gens(seeds: list[int]) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(s) for s in seeds]


def test_draws_follow_the_distribution() -> None:
    """20,000 draws of an uneven 7-way distribution, spread over blocks of 3 (the last block
    padded): a chi-square test does not reject it, and the zero-weight entry never comes up."""
    p = torch.tensor([0.30, 0.05, 0.0, 0.25, 0.15, 0.01, 0.24])
    n = 20_000
    gen = torch.Generator().manual_seed(0)
    tokens = sample_rows(p.expand(n, -1).contiguous(), [gen] * n, block=3)
    counts = torch.bincount(tokens, minlength=7).double()
    assert counts[2] == 0
    kept = p > 0
    expected = p[kept].double() / p.sum() * n
    assert chisquare(counts[kept].numpy(), expected.numpy()).pvalue > 1e-3


def test_draws_follow_a_top_k_distribution_over_the_full_vocabulary() -> None:
    """On a SmolLM2-sized vocabulary (49,152, top-k masked to 40 tokens, T 0.7) every draw is
    a kept token and the frequencies pass a chi-square test against the weights."""
    torch.manual_seed(1)
    logits = torch.randn(49_152) * 3
    kth = torch.topk(logits, 40).values[-1]
    probs = torch.softmax(logits.masked_fill(logits < kth, float("-inf")) / 0.7, dim=-1)
    n = 4_000
    gen = torch.Generator().manual_seed(2)
    ours = sample_rows(probs.expand(n, -1).contiguous(), [gen] * n)
    assert bool((probs[ours] > 0).all())
    support = probs > 0
    counts = torch.bincount(ours, minlength=probs.numel())[support].double()
    expected = probs[support].double() * n
    assert chisquare(counts.numpy(), expected.numpy() / expected.sum().item() * n).pvalue > 1e-3


def test_a_rows_draw_does_not_depend_on_the_batch() -> None:
    torch.manual_seed(3)
    weights = torch.softmax(torch.randn(5, 2_500), dim=-1)
    together = sample_rows(weights, _gens([10, 11, 12, 13, 14]))
    alone = [int(sample_rows(weights[j : j + 1], _gens([10 + j]))[0]) for j in range(5)]
    assert together.tolist() == alone
    # the same generator seed draws the same token again; another seed may not
    assert sample_rows(weights, _gens([10, 11, 12, 13, 14])).tolist() == together.tolist()


@settings(max_examples=60, deadline=None)
@given(
    weights=st.lists(
        st.one_of(st.just(0.0), st.floats(min_value=1e-30, max_value=1e6)), min_size=1, max_size=40
    ).filter(lambda w: any(x > 0 for x in w)),
    block=st.integers(min_value=1, max_value=16),
    seed=st.integers(min_value=0, max_value=2**31 - 1),
)
def test_never_a_zero_weight_index(weights: list[float], block: int, seed: int) -> None:
    """Any non-negative weights (tiny, huge, mostly zero), any block size: the index drawn is
    in range and carries weight."""
    w = torch.tensor(weights, dtype=torch.float32)[None]
    w = torch.where(torch.isfinite(w), w, torch.zeros_like(w))
    if not bool((w > 0).any()):
        return
    token = int(sample_rows(w, _gens([seed]), block=block)[0])
    assert 0 <= token < w.shape[1]
    assert float(w[0, token]) > 0


@pytest.mark.parametrize("block", [1, 2, 3, 8])
def test_the_ends_of_the_uniform_land_on_weighted_indices(block: int) -> None:
    """u = 0 draws the first weighted index, u as close to 1 as float64 gets the last one,
    whatever the zeros around them and the block size."""
    w = torch.tensor([[0.0, 0.2, 0.0, 0.8, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1e-30, 0.0]])
    first = locate(w, torch.tensor([0.0, 0.0], dtype=torch.float64), block)
    top = 1 - 2.0**-53
    last = locate(w, torch.tensor([top, top], dtype=torch.float64), block)
    assert first.tolist() == [1, 4]
    assert last.tolist() == [3, 4]


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([[0.0, 0.0]], "row 0"),
        ([[0.5, 0.5], [0.2, -0.1]], "row 1"),
        ([[float("nan"), 1.0]], "NaN"),
        ([[float("inf"), 1.0]], "not finite"),
    ],
)
def test_a_row_that_is_no_distribution_is_named(weights: list[list[float]], match: str) -> None:
    w = torch.tensor(weights)
    with pytest.raises(ValueError, match=match):
        sample_rows(w, _gens(list(range(len(weights)))))


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="rows x vocab"):
        sample_rows(torch.ones(3), _gens([0]))
    with pytest.raises(ValueError, match="one per row"):
        sample_rows(torch.ones(2, 3), _gens([0]))
