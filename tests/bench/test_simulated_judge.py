"""bench/simulated_judge.py: its noise gives the pairwise accuracy asked for, an episode cut at
its turn limit counts as a failure, and the step records count the decided pairs it ordered."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from script_loader import load_script

from rankgym.trainer.rewards import REWARDS, reward_class
from rankgym.types import Group, Message, Trajectory

sim = load_script("bench/simulated_judge.py")


@pytest.fixture(autouse=True)
def _registry_restored():
    """Kinds a test registers leave the global registry with it (other tests list the registry)."""
    before = dict(REWARDS)
    yield
    REWARDS.clear()
    REWARDS.update(before)


def _group(rewards: list[float | None], task: str = "t") -> Group:
    trs = [
        Trajectory(env_id="e", task_id=task, verifiable_reward=r, truncated=r is None,
                   messages=[Message(role="user", content=str(i))])
        for i, r in enumerate(rewards)
    ]  # fmt: skip
    return Group(run_id="r", step=0, env_id="e", task_id=task, trajectories=trs)


@pytest.mark.parametrize("accuracy", [0.6, 0.75, 0.85, 0.95])
def test_a_pass_outranks_a_failure_as_often_as_asked(accuracy: float):
    sigma, rng, n = sim.sigma_for(accuracy), random.Random(0), 40_000
    right = sum(1.0 + sigma * rng.gauss(0, 1) > sigma * rng.gauss(0, 1) for _ in range(n))
    assert right / n == pytest.approx(accuracy, abs=0.01)


@pytest.mark.parametrize("bad", [0.5, 0.3, 1.2])
def test_an_accuracy_outside_the_interval_is_refused(bad: float):
    with pytest.raises(ValueError, match=r"must lie in \(0.5, 1\]"):
        sim.sigma_for(bad)


def test_accuracy_one_is_the_pass_fail_itself_and_ties_stay_tied():
    reward = reward_class(sim.simulated_kind("simulated-1.0"))()
    out = reward.score([_group([1.0, 0.4, None]), _group([0.0, 0.3], "u")])
    assert out.rewards == [[1.0, 0.0, 0.0], [0.0, 0.0]]
    assert reward.steps[-1]["pairwise"] == 1.0


def test_a_kind_registers_once_and_names_its_accuracy():
    kind = sim.simulated_kind("simulated-0.9")
    assert sim.simulated_kind("simulated-0.9") == kind
    cls = reward_class(kind)
    assert cls.accuracy == 0.9 and not cls.needs_judge and REWARDS[kind] is cls
    with pytest.raises(ValueError, match="e.g. simulated-0.85"):
        sim.simulated_kind("simulated-high")
    with pytest.raises(ValueError, match="not a simulated judge arm"):
        sim.simulated_kind("judge")


def test_a_step_is_scored_from_the_verifier_labels_and_recorded():
    reward = reward_class(sim.simulated_kind("simulated-0.99"))()
    # group 1: a pass, a failure, a truncated episode (a failure the judge sees); group 2: ties
    groups = [_group([1.0, 0.4, None]), _group([0.0, 0.0], "u")]
    out = reward.score(groups)
    assert all(r is not None for row in out.rewards for r in row)
    top = out.rewards[0]
    assert top[0] > top[1] and top[0] > top[2]  # at 0.99 the pass wins both (sigma 0.30)
    step = reward.steps[-1]
    assert step["decided_pairs"] == 2 and step["right"] == 2 and step["pairwise"] == 1.0
    assert 0 < step["signal"] <= 1
    cal = reward.calibration()
    assert cal["decided_pairs_run"] == 2 and cal["pairwise_run"] == 1.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 1), min_size=2, max_size=8),
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=8, max_size=8),
)
def test_a_step_record_counts_every_decided_pair(passes: list[int], scores: list[float]):
    rewards = scores[: len(passes)]
    rec = sim.step_record([(passes, rewards)])
    k = sum(passes)
    assert rec["decided_pairs"] == k * (len(passes) - k)
    assert 0 <= rec["right"] <= rec["decided_pairs"]
    assert rec["signal"] is None or -1 <= rec["signal"] <= 1  # Cauchy-Schwarz: |cos| <= 1
