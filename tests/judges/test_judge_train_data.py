"""The judge-training dataset: pairs from verifier and people, split by task, balanced."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.judges.judge_data import (
    PairItem,
    baselines,
    build_dataset,
    human_pairs,
    length_balance,
    split_by_task,
    verifier_pairs,
)
from rankgym.judges.pair_files import presentations, read_jsonl, write_jsonl
from rankgym.store import Store
from rankgym.types import Group, Message, Trajectory


def traj(task: str, text: str, reward: float | None, env: str = "e/Env-v0") -> Trajectory:
    return Trajectory(
        env_id=env,
        task_id=task,
        messages=[
            Message(role="user", content=f"task {task}"),
            Message(role="assistant", content=text),
        ],
        verifiable_reward=reward,
    )


def pair(task: str, w: str, lo: str, env: str = "e/Env-v0") -> PairItem:
    return PairItem(
        env, task, traj(task, w, 1.0, env), traj(task, lo, 0.0, env), "verifier", "s", 1.0
    )


def test_verifier_pairs_pool_one_task_across_stores_and_runs(tmp_path: Path):
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        a.put_group(Group(run_id="oracle", env_id="e/Env-v0", task_id="t1",
                          trajectories=[traj("t1", "right", 1.0), traj("t1", "right", 1.0)]))  # fmt: skip
        b.put_group(Group(run_id="random", env_id="e/Env-v0", task_id="t1",
                          trajectories=[traj("t1", "wrong", 0.0), traj("t1", "half", 0.25)]))  # fmt: skip
        a.put_group(Group(run_id="oracle", env_id="e/Env-v0", task_id="t2",
                          trajectories=[traj("t2", "x", 1.0), traj("t2", "y", None)]))  # fmt: skip
        pairs = verifier_pairs({"a": a, "b": b}, min_gap=0.5)
    # identical "right" trajectories count once; 0.25 vs 0.0 is below the gap; None is unlabelled
    assert sorted(
        (p.task_id, p.winner.messages[1].content, p.loser.messages[1].content) for p in pairs
    ) == [
        ("t1", "right", "half"),
        ("t1", "right", "wrong"),
    ]
    assert {p.source for p in pairs} == {"verifier"} and all(p.gap >= 0.5 for p in pairs)
    assert {p.store for p in pairs} == {"a"}  # the winner's store is recorded


def test_human_pairs_follow_the_mean_rank_of_each_labelers_latest_ranking(tmp_path: Path):
    ts = [traj("t1", "a", None), traj("t1", "b", None), traj("t1", "c", None)]
    g = Group(env_id="e/Env-v0", task_id="t1", trajectories=ts)
    with Store(tmp_path / "h.db") as s:
        s.put_group(g)
        s.add_human_ranking(g.id, "ann", {ts[0].id: 3, ts[1].id: 1, ts[2].id: 2})
        s.add_human_ranking(g.id, "ann", {ts[0].id: 1, ts[1].id: 2, ts[2].id: 3})  # latest wins
        s.add_human_ranking(g.id, "bob", {ts[0].id: 1, ts[1].id: 3, ts[2].id: 2})
        pairs = human_pairs({"h.db": s})
    # mean ranks: a 1, b 2.5, c 2.5 -> a beats b and c; b vs c tie is dropped
    won = sorted((p.winner.messages[1].content, p.loser.messages[1].content) for p in pairs)
    assert won == [("a", "b"), ("a", "c")]
    assert all(p.source == "human" and p.gap == 1.5 for p in pairs)


@settings(max_examples=40, deadline=None)
@given(
    tasks=st.lists(
        st.tuples(st.sampled_from(["e/A-v0", "e/B-v0"]), st.integers(0, 30)),
        min_size=1,
        max_size=60,
    ),
    fraction=st.floats(0.05, 0.9),
    seed=st.integers(0, 5),
)
def test_no_task_is_on_both_sides_of_the_split(tasks, fraction, seed):
    pairs = [pair(f"t{k}", "w", "l", env) for env, k in tasks]
    train, held = split_by_task(pairs, fraction, seed)
    assert {p.task_key for p in train}.isdisjoint({p.task_key for p in held})
    assert len(train) + len(held) == len(pairs)
    for env in {e for e, _ in tasks}:
        n_tasks = len({k for e, k in tasks if e == env})
        held_tasks = {p.task_key for p in held if p.env_id == env}
        if n_tasks >= 2:  # every env with two tasks has both sides
            assert 1 <= len(held_tasks) <= n_tasks - 1


@settings(max_examples=60, deadline=None)
@given(n_tasks=st.integers(1, 12), fraction=st.floats(0.05, 0.9), min_tasks=st.integers(1, 5))
def test_the_split_holds_out_at_least_min_tasks_and_leaves_one_to_train_on(n_tasks, fraction, min_tasks):  # fmt: skip
    pairs = [pair(f"t{k}", "w", "l") for k in range(n_tasks)]
    _, held = split_by_task(pairs, fraction, 0, min_tasks)
    n_held = len({p.task_key for p in held})
    if n_tasks >= 2:
        assert n_held == min(max(round(fraction * n_tasks), min_tasks, 1), n_tasks - 1)
    else:  # one task: the fraction alone decides (min_tasks would leave nothing to train on)
        assert n_held == round(fraction)


def test_split_is_deterministic_and_labels_each_pair():
    pairs = [pair(f"t{k}", "w", "l") for k in range(20)]
    a = split_by_task(pairs, 0.3, seed=1)
    keys = [p.task_key for p in a[1]]
    b = split_by_task(pairs, 0.3, seed=1)
    assert [p.task_key for p in b[1]] == keys and len(keys) == 6
    assert all(p.split == "heldout" for p in a[1]) and all(p.split == "train" for p in a[0])


def test_length_balance_leaves_longer_wins_at_chance_and_first_wins_is_exactly_half():
    long_wins = [pair(f"t{k}", "a long and correct answer", "no") for k in range(10)]
    short_wins = [pair(f"s{k}", "42", "a long rambling wrong answer") for k in range(3)]
    kept, dropped = length_balance(long_wins + short_wins, seed=0)
    assert dropped == 7 and len(kept) == 6
    assert baselines(kept) == {"first_wins": 0.5, "longer_wins": 0.5}
    assert baselines(long_wins)["longer_wins"] == 1.0
    shown = presentations(kept)
    assert len(shown) == 12 and sum(first for _, first in shown) == 6


def test_build_dataset_reports_counts_and_round_trips_through_jsonl(tmp_path: Path):
    with Store(tmp_path / "s.db") as s:
        for k in range(12):
            s.put_group(Group(env_id="e/Env-v0", task_id=f"t{k}",
                              trajectories=[traj(f"t{k}", "correct answer here", 1.0),
                                            traj(f"t{k}", "no" if k % 2 else "wrong and verbose answer", 0.0)]))  # fmt: skip
        ds = build_dataset({"s.db": s}, heldout_fraction=0.25, seed=0)
    assert ds.stats["pairs_found"] == 12 and ds.stats["dropped_for_length_balance"] == 0
    assert ds.stats["heldout"]["tasks"] == 3 and ds.stats["train"]["tasks"] == 9
    write_jsonl(tmp_path / "p.jsonl", ds.train)
    back = read_jsonl(tmp_path / "p.jsonl")
    assert [p.id for p in back] == [p.id for p in ds.train]
    assert back[0].winner == ds.train[0].winner and back[0].split == "train"


def test_split_rejects_a_fraction_outside_zero_to_one():
    with pytest.raises(ValueError, match="heldout_fraction"):
        split_by_task([], 1.0)
