"""GRPO maths against hand-computed values (advantages, ratios, clipping, aggregations, KL)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.trainer.grpo import (
    LossSettings,
    MicroBatch,
    Sample,
    collate,
    group_advantages,
    grpo_loss,
    trajectory_rows,
)
from rankgym.types import Turn

S3 = math.sqrt(1 / 3)  # Bessel std of [1, 0, 0, 1]


def test_group_advantages_group_scaling():
    a = group_advantages([[1.0, 0.0, 0.0, 1.0]], scale="group")
    x = 0.5 / (S3 + 1e-4)
    assert a.values[0] == pytest.approx([x, -x, -x, x])
    assert a.zero_variance_groups == 0


def test_group_advantages_none_and_batch_scaling():
    a = group_advantages([[1.0, 0.0], [0.5, 0.5]], scale="none")
    assert a.values == [[0.5, -0.5], [0.0, 0.0]]
    assert a.zero_variance_groups == 1
    b = group_advantages([[1.0, 0.0], [0.5, 0.5]], scale="batch")
    batch_std = math.sqrt((0.25 + 0.25) / 3)
    assert b.values[0] == pytest.approx([0.5 / (batch_std + 1e-4), -0.5 / (batch_std + 1e-4)])
    assert b.values[1] == [0.0, 0.0]


def test_group_advantages_unscored_and_singletons():
    a = group_advantages([[1.0, None, 0.0], [0.7], [None, None]], scale="group")
    s = math.sqrt(0.5)
    assert a.values[0] == pytest.approx([0.5 / (s + 1e-4), 0.0, -0.5 / (s + 1e-4)])
    assert a.values[1] == [0.0] and a.values[2] == [0.0, 0.0]
    assert a.unscored == 3 and a.zero_variance_groups == 2


def _mb(mask: list[list[float]], adv: list[float], row_traj: list[int] | None = None) -> MicroBatch:
    m = torch.tensor(mask)
    r = m.shape[0]
    z = torch.zeros(m.shape, dtype=torch.long)
    rt = torch.arange(r) if row_traj is None else torch.tensor(row_traj)
    return MicroBatch(z, z, z, m, rt, torch.tensor(adv))


def _ratios(*rs: float) -> tuple[torch.Tensor, torch.Tensor]:
    logp = torch.tensor([[math.log(r) for r in rs]])
    return logp, torch.zeros_like(logp)


@pytest.mark.parametrize(
    ("adv", "eps_high", "expected", "clipped"),
    [
        (1.0, None, [-1.2, -0.5, -1.0], 1),  # 1.5 clipped to 1.2 (A>0); 0.5 not (min keeps it)
        (-1.0, None, [1.5, 0.8, 1.0], 1),  # 0.5 clipped to 0.8 (A<0); 1.5 not
        (1.0, 0.28, [-1.28, -0.5, -1.0], 1),
    ],
)
def test_token_ratio_clipping(adv, eps_high, expected, clipped):
    logp, old = _ratios(1.5, 0.5, 1.0)
    s = LossSettings(loss_type="dapo", epsilon=0.2, epsilon_high=eps_high)
    loss, st = grpo_loss(logp, old, _mb([[1, 1, 1]], [adv]), s, 1, 3.0)
    assert float(loss) == pytest.approx(sum(expected) / 3, rel=1e-5)
    assert st["clip_count"] == clipped and st["clip_total"] == 3


def test_sequence_level_ratio():
    logp, old = _ratios(1.5, 0.5, 7.0)  # third token is masked: it must not enter the ratio
    s = LossSettings(loss_type="grpo", importance_sampling_level="sequence")
    loss, st = grpo_loss(logp, old, _mb([[1, 1, 0]], [1.0]), s, 1, 2.0)
    w = math.exp((math.log(1.5) + math.log(0.5)) / 2)  # 0.866 -> inside [0.8, 1.2]
    assert float(loss) == pytest.approx(-w, rel=1e-5)
    assert st["clip_count"] == 0 and st["clip_total"] == 1


def _two_trajectories():
    # trajectory 0: 2 completion tokens (A=+1), trajectory 1: 4 tokens in two rows (A=-0.5)
    logp = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    mask = [[0, 0, 1, 1], [1, 1, 0, 0], [0, 1, 1, 0]]
    return logp, _mb(mask, [1.0, -0.5], row_traj=[0, 1, 1])


@pytest.mark.parametrize(
    ("loss_type", "expected"),
    [
        ("grpo", ((-1 - 1) / 2 + (0.5 * 4) / 4) / 2),
        ("dapo", (-2 + 2) / 6 + 0.0),
        ("dr_grpo", (-2 + 2) / (2 * 10)),
    ],
)
def test_aggregations_equal_ratio(loss_type, expected):
    logp, mb = _two_trajectories()
    s = LossSettings(loss_type=loss_type, max_completion_length=10)
    loss, _ = grpo_loss(logp, logp.clone(), mb, s, 2, 6.0)
    assert float(loss) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_aggregations_unequal_tokens(loss_type):
    # ratio 1 everywhere, trajectory 1 has A=-0.25: per-token losses -1 (x2) and +0.25 (x4)
    logp, mb = _two_trajectories()
    mb.advantages = torch.tensor([1.0, -0.25])
    s = LossSettings(loss_type=loss_type, max_completion_length=10)
    loss, _ = grpo_loss(logp, logp.clone(), mb, s, n_traj_total=4, n_tokens_total=12.0)
    expected = {
        "grpo": (-1.0 + 0.25) / 4,  # token-means per trajectory, averaged over all 4 of the step
        "dapo": (-2.0 + 1.0) / 12,  # token sum over all 12 completion tokens of the step
        "dr_grpo": (-2.0 + 1.0) / (4 * 10),  # token sum / (N * max_completion_length)
    }[loss_type]
    assert float(loss) == pytest.approx(expected, abs=1e-6)


def test_kl_term():
    logp = torch.tensor([[math.log(0.5), math.log(0.25)]])
    ref = torch.tensor([[math.log(0.25), math.log(0.25)]])
    s = LossSettings(loss_type="dapo", beta=0.1)
    loss, st = grpo_loss(logp, logp.clone(), _mb([[1, 1]], [0.0]), s, 1, 2.0, ref_logp=ref)
    d = math.log(0.25) - math.log(0.5)
    kl0 = math.exp(d) - d - 1
    assert st["kl_sum"] == pytest.approx(kl0, rel=1e-5)
    assert float(loss) == pytest.approx(0.1 * kl0 / 2, rel=1e-5)


def test_masked_tokens_get_zero_gradient():
    logp = torch.randn(3, 4, requires_grad=True)
    _, mb = _two_trajectories()
    for lt in ("grpo", "dapo", "dr_grpo"):
        for level in ("token", "sequence"):
            logp.grad = None
            s = LossSettings(loss_type=lt, importance_sampling_level=level, beta=0.05)
            loss, _ = grpo_loss(logp, logp.detach() - 0.1, mb, s, 2, 6.0, torch.zeros(3, 4))
            loss.backward()
            assert torch.all(logp.grad[mb.loss_mask == 0] == 0), (lt, level)
            assert torch.all(logp.grad[mb.loss_mask == 1] != 0), (lt, level)


def test_trajectory_rows_merge_and_split():
    t1 = Turn(message_index=2, prompt_token_ids=[1, 2, 3], completion_token_ids=[4, 5])
    t2 = Turn(message_index=4, prompt_token_ids=[1, 2, 3, 4, 5, 6, 7], completion_token_ids=[8])
    t3 = Turn(message_index=6, prompt_token_ids=[1, 2, 9, 9], completion_token_ids=[10, 11])
    rows = trajectory_rows([t1, t2, t3])
    assert rows == [
        ([1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 0, 1, 1, 0, 0, 1]),
        ([1, 2, 9, 9, 10, 11], [0, 0, 0, 0, 1, 1]),
    ]


def test_collate_left_pads_and_keeps_every_completion_token():
    a = Sample(rows=[([1, 2, 3, 4], [0, 0, 1, 1])], advantage=1.0)
    b = Sample(rows=[([5, 6], [0, 1]), ([7, 8, 9, 10, 11, 12], [0, 1, 0, 0, 1, 1])], advantage=-1)
    mb = collate([a, b], pad_id=0)
    assert mb.input_ids.tolist()[0] == [0, 0, 1, 2, 3, 4]
    assert mb.row_traj.tolist() == [0, 1, 1]
    assert mb.loss_mask.sum().item() == 2 + 1 + 3
    assert mb.position_ids.tolist()[1] == [0, 0, 0, 0, 0, 1]


def test_wilson_and_paired_bootstrap():
    from rankgym.trainer.evaluate import paired_bootstrap, wilson

    lo, hi = wilson(5, 20)  # textbook value for 5/20: [0.112, 0.469]
    assert lo == pytest.approx(0.1119, abs=1e-3) and hi == pytest.approx(0.4687, abs=1e-3)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    a = {f"t{i}": [0, 0] for i in range(10)}
    b = {f"t{i}": [1, 0] if i < 5 else [0, 0] for i in range(10)}
    lo, hi = paired_bootstrap(a, b, seed=0)
    assert 0.0 <= lo < 0.25 < hi <= 0.5
    assert paired_bootstrap(a, a) == (0.0, 0.0)


def test_the_paired_bootstrap_weighs_each_side_by_its_own_episodes():
    from rankgym.trainer.evaluate import paired_bootstrap

    # a: 0 of 4 and 1 of 1 (mean 0.2); b: 0 of 1 and 4 of 4 (mean 0.8). The old code divided
    # both sides by a's counts and gave b - a = 0.6 for one task and 0.75 for the other.
    lo, hi = paired_bootstrap({"t0": [0] * 4, "t1": [1]}, {"t0": [0], "t1": [1] * 4}, seed=1)
    assert (lo, hi) == pytest.approx((0.0, 0.6))
    assert paired_bootstrap({"x": [0, 1]}, {"x": [1, 1]}) == (0.5, 0.5)  # one task: the point
    assert paired_bootstrap({"x": [1]}, {"y": [1]}) == (0.0, 0.0)  # nothing shared


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.integers(0, 1), min_size=1, max_size=4),
                  st.lists(st.integers(0, 1), min_size=1, max_size=4)),
        min_size=2, max_size=8,
    ),
    st.integers(0, 3),
)  # fmt: skip
def test_swapping_the_two_policies_mirrors_the_paired_interval(tasks, seed):
    from rankgym.trainer.evaluate import paired_bootstrap

    a = {f"t{i}": x for i, (x, _) in enumerate(tasks)}
    b = {f"t{i}": y for i, (_, y) in enumerate(tasks)}
    lo, hi = paired_bootstrap(a, b, n_boot=200, seed=seed)
    lo2, hi2 = paired_bootstrap(b, a, n_boot=200, seed=seed)
    assert -1.0 <= lo <= hi <= 1.0
    assert (lo2, hi2) == pytest.approx((-hi, -lo))
