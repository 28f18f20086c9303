"""The truncation watch: a policy learning to never answer is flagged on the step line.

The maths on counts, then the trainer on a tiny model in an env that starts cutting every
episode at its turn limit after the first step (the shape of session 27's chain-credit hack).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import gymnasium
import pytest
from hypothesis import given
from hypothesis import strategies as st
from trainer_helpers import runs_page, save_tiny_model, tiny_config

from rankgym.config import validate_config
from rankgym.envs.base import Env, Task
from rankgym.store import Store
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.loop import Trainer
from rankgym.trainer.rewards import StepMetrics
from rankgym.trainer.step_report import step_line
from rankgym.trainer.truncation_watch import truncation_rising, watch_truncation
from rankgym.types import Group, Message, Trajectory

STALL = "trunctest/Stall-v0"


class StallEnv(Env):
    """Answers normally for the first ``honest`` episodes, then cuts every episode at once."""

    env_id = STALL
    max_turns = 2
    honest: ClassVar[int] = 8
    resets: ClassVar[int] = 0

    def tasks(self, split: str = "train") -> list[Task]:
        return [Task(id=f"{split}-{i}", prompt=f"Say {i}.", split=split) for i in range(6)]

    def reset(self, seed=None, options=None):
        type(self).resets += 1
        self.stalls = type(self).resets > type(self).honest
        return super().reset(seed=seed, options=options)

    def step(self, action):
        new, reward, terminated, truncated, info = super().step(action)
        if self.stalls:  # the policy "keeps calling tools": the episode never answers
            info["verifiable_reward"] = None
            return new, 0.0, False, True, info
        return new, reward, terminated, truncated, info

    def verify(self, task, answer, state) -> float:
        return float(len(str(answer)) % 2)


gymnasium.register(id=STALL, entry_point=StallEnv)


def test_a_share_shown_higher_than_the_first_steps_is_flagged():
    assert truncation_rising((3, 18), (13, 18))  # session 27's seed 3, first step vs fourth
    assert truncation_rising((0, 8), (8, 8))
    assert not truncation_rising((3, 18), (5, 18))  # more, but not shown to be
    assert not truncation_rising((9, 18), (3, 18))  # falling
    assert not truncation_rising((0, 0), (5, 5)) and not truncation_rising((1, 5), (0, 0))
    with pytest.raises(ValueError, match="0 <= truncated <= episodes"):
        truncation_rising((3, 2), (1, 2))


@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))
def test_a_share_not_above_the_first_is_never_flagged_and_more_cuts_never_unflag(a, n, b, m):
    a, b = min(a, n), min(b, m)
    if b * n <= a * m:
        assert not truncation_rising((a, n), (b, m))
    if truncation_rising((a, n), (b, m)) and b < m:
        assert truncation_rising((a, n), (b + 1, m))


def _group(cut: list[bool]) -> Group:
    trajs = [
        Trajectory(env_id="e", task_id="t", messages=[Message(role="user", content="q")],
                   verifiable_reward=None if c else 1.0, truncated=c)
        for c in cut
    ]  # fmt: skip
    return Group(run_id="r", env_id="e", task_id="t", trajectories=trajs)


def test_watch_reads_the_first_step_from_the_logged_rows_and_says_what_to_check():
    groups = [_group([True] * 4), _group([True, True, True, False])]
    first, said = watch_truncation(0, groups, [])
    assert first == {"truncated_trajectories": 7} and said is None
    logged = [{"step": 0, "metrics": {"truncated_trajectories": 0, "trajectories": 8}}]
    fields, said = watch_truncation(3, groups, logged)
    assert fields == {"truncated_trajectories": 7, "truncation_rising": True}
    assert said and "step 4: 7/8 episodes" in said and "0/8 at step 1" in said
    assert "never answers" in said and "docs/training.md" in said
    # a first row written before the count existed: counted, not compared
    old = [{"step": 0, "metrics": {"trajectories": 8}}]
    assert watch_truncation(3, groups, old) == ({"truncated_trajectories": 7}, None)


def test_a_run_whose_policy_stops_answering_is_flagged_on_the_step_line_and_runs_page(
    tmp_path: Path, monkeypatch
):
    StallEnv.resets = 0
    model = save_tiny_model(tmp_path / "m")
    raw = tiny_config(model, tmp_path / "run", steps=3)
    raw["env"] = {"id": STALL, "kwargs": {}, "tasks_per_step": 2, "group_size": 4}
    raw["reward"] = {"kind": "verifiable"}
    said: list[str] = []
    summary = Trainer(validate_config(raw, TrainConfig), progress=False, echo=said.append).run()
    assert summary["truncation_rising_steps"] == 2
    lines = [s for s in said if s.startswith(("step 1/3 ", "step 2/3 ", "step 3/3 "))]
    assert len(lines) == 3 and "truncated" not in lines[0]  # step 1: every episode answered
    assert all("truncated 8/8  TRUNCATION RISING" in s for s in lines[1:])
    assert sum("before answering, against 0/8 at step 1" in s for s in said) == 2
    with Store(tmp_path / "run" / "store.db", readonly=True) as s:
        rows = [StepMetrics.from_dict(r["metrics"]) for r in s.steps(summary["run_id"])]
    assert [m.truncated_trajectories for m in rows] == [0, 8, 8]
    assert [m.truncation_rising for m in rows] == [None, True, True]
    assert "TRUNCATION RISING" in step_line(rows[2], 2, 3)
    # the dashboard's Runs page charts the count and names the flagged steps
    at = runs_page(tmp_path / "run" / "store.db", monkeypatch)
    (warned,) = [w.value for w in at.warning if "cut at the turn limit" in w.value]
    assert "step(s) 1, 2" in warned and "never answer" in warned
