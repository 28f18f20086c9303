"""The judge-split rollout keeps at most ``max_concurrent`` episodes in flight and labels only
judge-split tasks (train tasks GRPO never draws)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium

from rankgym.envs.base import Env, Task
from rankgym.envs.judge_split import JUDGE_SPLIT, in_judge_split
from rankgym.envs.policies.base import Generation, Row
from rankgym.envs.policies.scripted import OraclePolicy
from rankgym.envs.rollout import select_tasks
from rankgym.store import Store
from rankgym.trainer.judge_rollout import MAX_CONCURRENT, rollout_judge_split

ENV = "rankgym/ToolUse-v0"


class _CountingOracle(OraclePolicy):
    """The oracle, recording how many conversations each batched call held."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def generate_rows(self, rows: list[Row]) -> list[Generation]:
        self.batches.append(len(rows))
        return super().generate_rows(rows)


def test_no_more_than_max_concurrent_episodes_are_generated_at_once(tmp_path: Path) -> None:
    policy = _CountingOracle()
    res = rollout_judge_split(
        policy, ENV, tmp_path / "r.db", tasks=5, group_size=4, max_concurrent=6
    )
    assert res["groups"] == 5 and res["trajectories"] == 20
    assert max(policy.batches) <= 6
    assert res["mean_verifiable_reward"] == 1.0  # the oracle solves every task it is given


def test_the_default_cap_bounds_a_whole_split_rollout(tmp_path: Path) -> None:
    policy = _CountingOracle()
    rollout_judge_split(policy, ENV, tmp_path / "r.db", tasks=20, group_size=8)
    assert max(policy.batches) == MAX_CONCURRENT  # 160 episodes, 64 at a time


def test_every_rolled_out_task_is_a_judge_split_task_of_all_families(tmp_path: Path) -> None:
    store = tmp_path / "r.db"
    rollout_judge_split(OraclePolicy(), ENV, store, group_size=2, env_kwargs={})
    with Store(store, readonly=True) as s:
        tasks = {s.get_group(g).task_id for g in s.group_ids()}
    assert len(tasks) == 68 and all(in_judge_split(t) for t in tasks)
    assert {t.split("-")[1] for t in tasks} == {"calc", "units", "dates", "lookup", "strings"}


COUNTED = "judgetest/Counted-v0"


class CountedEnv(Env):
    """A one-turn env with a judge split that counts how many of it were built."""

    env_id = COUNTED
    max_turns = 1
    splits = ("train", JUDGE_SPLIT, "test")
    built = 0

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        CountedEnv.built += 1

    def tasks(self, split: str = "train") -> list[Task]:
        return [
            Task(id=f"{split}-{i}", prompt=f"Say {i}.", answer=i, split=split) for i in range(6)
        ]

    def verify(self, task: Task, answer: Any, state: Any) -> float:
        return float(str(task.answer) == (answer or "").strip())

    def oracle(self, task: Task) -> list[dict[str, Any]]:
        return [{"role": "assistant", "content": str(task.answer)}]


gymnasium.register(id=COUNTED, entry_point=CountedEnv)


def test_the_env_that_counts_the_judge_split_is_the_rollouts_first_env(tmp_path: Path) -> None:
    expected = select_tasks(CountedEnv().tasks(JUDGE_SPLIT), n_tasks=4, seed=3)
    CountedEnv.built = 0
    res = rollout_judge_split(
        OraclePolicy(), COUNTED, tmp_path / "r.db", tasks=4, group_size=2, seed=3, max_concurrent=2
    )
    assert CountedEnv.built == 4 * 2  # one env per episode, none built only to count tasks
    assert res["groups"] == 4 and res["mean_verifiable_reward"] == 1.0
    with Store(tmp_path / "r.db", readonly=True) as s:
        stored = [s.get_group(g).task_id for g in s.group_ids()]
    assert sorted(stored) == sorted(t.id for t in expected)
