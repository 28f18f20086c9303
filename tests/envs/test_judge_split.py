"""The ``judge`` split: a fixed share of train tasks for judge data, never drawn by GRPO."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankgym.envs.judge_split import JUDGE_SPLIT, carve, in_judge_split
from rankgym.envs.policies import OraclePolicy
from rankgym.envs.registry import make
from rankgym.envs.rollout import rollout_groups

BUILT_IN = ["rankgym/ToolUse-v0", "rankgym/EmailSearch-v0", "rankgym/CodeTests-v0"]


@pytest.mark.parametrize("env_id", BUILT_IN)
def test_each_built_in_env_sets_aside_a_judge_split_that_train_no_longer_holds(env_id):
    env = make(env_id).unwrapped
    train = {t.id for t in env.tasks("train")}
    judge = env.tasks(JUDGE_SPLIT)
    test = {t.id for t in env.tasks("test")}
    assert JUDGE_SPLIT in env.splits
    assert judge and all(t.split == JUDGE_SPLIT for t in judge)
    ids = {t.id for t in judge}
    assert ids.isdisjoint(train) and ids.isdisjoint(test)
    share = len(ids) / (len(ids) + len(train))
    assert 0.08 < share < 0.25  # about 15% of the former train tasks
    assert [t.id for t in make(env_id).unwrapped.tasks(JUDGE_SPLIT)] == [t.id for t in judge]


def test_a_filtered_env_keeps_the_same_judge_tasks_it_has():
    full = {t.id for t in make("rankgym/ToolUse-v0").unwrapped.tasks(JUDGE_SPLIT)}
    hard = make("rankgym/ToolUse-v0", difficulty="hard").unwrapped.tasks(JUDGE_SPLIT)
    assert hard and {t.id for t in hard} <= full
    assert all(t.difficulty == "hard" for t in hard)


def test_an_episode_can_be_started_on_a_judge_task():
    env = make("rankgym/ToolUse-v0")
    task = env.unwrapped.tasks(JUDGE_SPLIT)[0]
    _, info = env.reset(seed=0, options={"split": JUDGE_SPLIT})
    assert info["split"] == JUDGE_SPLIT and in_judge_split(info["task_id"])
    assert env.unwrapped.get_task(task.id).id == task.id


def test_grpo_style_draws_from_train_never_return_a_judge_task():
    env = make("rankgym/ToolUse-v0").unwrapped
    judge = {t.id for t in env.tasks(JUDGE_SPLIT)}
    drawn: set[str] = set()
    for seed in range(6):  # the trainer draws n_tasks from split "train" with the run's seed
        groups = rollout_groups("rankgym/ToolUse-v0", OraclePolicy(), n_tasks=60, group_size=1,
                                split="train", seed=seed, progress=False)  # fmt: skip
        drawn |= {g.task_id for g in groups}
    assert len(drawn) > 200 and drawn.isdisjoint(judge)


def test_a_train_config_on_the_judge_split_is_refused_naming_the_key():
    from pydantic import ValidationError

    from rankgym.trainer.config import TrainConfig

    with pytest.raises(ValidationError, match="judge data, which GRPO must never"):
        TrainConfig.model_validate({"env": {"split": "judge"}})


@given(st.lists(st.text(min_size=1, max_size=30), max_size=40, unique=True))
def test_carving_partitions_any_task_list_by_id_alone(ids):
    from rankgym.envs.base import Task

    tasks = [Task(id=i, prompt="p", split="train") for i in ids]
    train, judge = carve(tasks, "train"), carve(tasks, JUDGE_SPLIT)
    assert sorted(t.id for t in train + judge) == sorted(ids)
    assert all(in_judge_split(t.id) for t in judge) and not any(in_judge_split(t.id) for t in train)
    with pytest.raises(ValueError, match="not 'test'"):
        carve(tasks, "test")


@pytest.mark.parametrize("env_id", BUILT_IN)
def test_an_env_made_with_judge_split_false_trains_on_every_train_task(env_id):
    """``judge_split=False``: nothing carved, so ``train`` is the carved train plus the judge
    split, in the same order, and the judge split is an error that names the kwarg."""
    carved = make(env_id).unwrapped
    whole = make(env_id, judge_split=False).unwrapped
    everything = {t.id for t in carved.tasks("train")} | {t.id for t in carved.tasks(JUDGE_SPLIT)}
    assert {t.id for t in whole.tasks("train")} == everything
    assert all(t.split == "train" for t in whole.tasks("train"))
    assert [t.id for t in whole.tasks("test")] == [t.id for t in carved.tasks("test")]
    with pytest.raises(ValueError, match="judge_split=False"):
        whole.tasks(JUDGE_SPLIT)
    assert len(make(env_id).unwrapped.tasks("train")) == len(carved.tasks("train"))  # no leak


def test_a_stage_that_reads_the_judge_split_is_refused_on_an_env_that_carves_none():
    from pydantic import ValidationError

    from rankgym.trainer.config import TrainConfig

    env = {"id": "rankgym/ToolUse-v0", "kwargs": {"judge_split": False}}
    TrainConfig.model_validate({"env": env, "sft": {"source": "oracle"}})  # fine without one
    with pytest.raises(ValidationError, match="judge_train learns from the env's judge split"):
        TrainConfig.model_validate({"env": env, "judge_train": {}})
    with pytest.raises(ValidationError, match="sft.judge_split = true"):
        TrainConfig.model_validate({"env": env, "sft": {"source": "oracle", "judge_split": True}})
