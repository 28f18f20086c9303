"""Answer swaps: a success with another reply in place of its answer, labelled by the env's replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankgym.envs.registry import make
from rankgym.store import Store
from rankgym.trainer.judge_counterfactuals import SWAP_STORE, answer_swaps
from rankgym.trainer.judge_job import JudgeTrainJob
from rankgym.trainer.judge_pairs import job_dataset
from rankgym.types import Group, Message, Trajectory

ENV = "rankgym/ToolUse-v0"


def play(task_id: str, actions: list[dict[str, Any]]) -> Trajectory:
    """The ToolUse episode of ``actions`` on a train task, as rollout would store it."""
    env = make(ENV)
    env.reset(options={"task_id": task_id, "split": "train"})
    reward = None
    for a in actions:
        _, reward, _, _, _ = env.step(a)
    msgs = [Message.model_validate(m) for m in env.state.messages]
    return Trajectory(env_id=ENV, task_id=task_id, messages=msgs, verifiable_reward=reward)


def tasks(n: int) -> list[Any]:
    """``n`` train tasks that take at least one tool call (their oracle ends in an answer)."""
    env = make(ENV)
    return [t for t in env.tasks("train") if len(env.oracle(t) or []) >= 2][:n]


def episodes(task: Any, wrong: str) -> tuple[Trajectory, Trajectory]:
    """(the oracle's success, the same calls ending in the reply ``wrong``)."""
    oracle = make(ENV).oracle(task) or []
    return play(task.id, oracle), play(task.id, [*oracle[:-1], {"role": "assistant", "content": wrong}])  # fmt: skip


def test_a_swap_keeps_the_episode_and_takes_the_failures_answer(tmp_path: Path) -> None:
    (task,) = tasks(1)
    good, bad = episodes(task, "The answer is 123456789.")
    assert good.verifiable_reward == 1.0 and bad.verifiable_reward is not None
    assert bad.verifiable_reward < 1.0  # the same calls, a wrong final reply: format credit
    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id=ENV, task_id=task.id, trajectories=[good, bad]))
        pairs, stats = answer_swaps({"s": s}, [], 2, max_per_task=8)
    assert stats.successes == 1 and stats.swaps == 1 and stats.not_reproduced == 0
    (p,) = pairs
    assert p.winner.messages == good.messages and p.store == SWAP_STORE
    assert p.loser.messages[:-1] == good.messages[:-1]
    assert p.loser.messages[-1].content == "The answer is 123456789."
    assert p.loser.verifiable_reward == bad.verifiable_reward  # scored by the env's replay
    assert p.gap == pytest.approx(1.0 - bad.verifiable_reward) and p.source == "verifier"


def test_other_tasks_replies_fill_in_and_a_right_reply_is_not_a_swap(tmp_path: Path) -> None:
    a, b = tasks(2)
    good_a, _ = episodes(a, "x")
    good_b, _ = episodes(b, "x")
    same = good_a.model_copy(update={"id": "traj-same-answer"})  # another success, same reply
    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id=ENV, task_id=a.id, trajectories=[good_a, same]))
        s.put_group(Group(env_id=ENV, task_id=b.id, trajectories=[good_b]))
        pairs, stats = answer_swaps({"s": s}, [], 3, max_per_task=8)
    # each task's success takes the other task's answer (its own is never swapped in)
    got = {p.task_id: p.loser.messages[-1].content for p in pairs}
    assert got == {a.id: good_b.messages[-1].content, b.id: good_a.messages[-1].content}
    assert all(p.winner.verifiable_reward == 1.0 for p in pairs)


def test_held_out_tasks_get_no_swaps_and_a_reward_the_replay_denies_gets_none(tmp_path: Path) -> None:  # fmt: skip
    a, b = tasks(2)
    good_a, bad_a = episodes(a, "The answer is 123456789.")
    good_b, bad_b = episodes(b, "The answer is 987654321.")
    lying = bad_b.model_copy(update={"id": "traj-lying", "verifiable_reward": 1.0})
    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id=ENV, task_id=a.id, trajectories=[good_a, bad_a]))
        s.put_group(Group(env_id=ENV, task_id=b.id, trajectories=[lying, bad_a.model_copy(update={"id": "t2", "task_id": b.id})]))  # fmt: skip
        held, _ = answer_swaps({"s": s}, [(ENV, a.id)], 2, max_per_task=8)
        assert held == []  # task a is held out; task b's only "success" does not replay as one
        _, stats = answer_swaps({"s": s}, [(ENV, a.id)], 2, max_per_task=8)
    assert stats.not_reproduced == 1 and stats.swaps == 0


def test_an_env_that_is_not_here_gives_no_swaps_and_says_so(tmp_path: Path) -> None:
    t = Trajectory(env_id="nowhere/Env-v0", task_id="t1", verifiable_reward=1.0,
                   messages=[Message(role="user", content="q"), Message(role="assistant", content="a")])  # fmt: skip
    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id="nowhere/Env-v0", task_id="t1", trajectories=[t]))
        pairs, stats = answer_swaps({"s": s}, [], 2, max_per_task=8)
    assert pairs == [] and stats.no_env == ["nowhere/Env-v0"]


def test_judge_train_data_swaps_on_the_training_side_only(tmp_path: Path) -> None:
    picked = tasks(6)
    with Store(tmp_path / "s.db") as s:
        for i, task in enumerate(picked):
            good, bad = episodes(task, f"The answer is {900_000 + i}.")
            s.put_group(Group(env_id=ENV, task_id=task.id, trajectories=[good, bad]))
    job = JudgeTrainJob(tmp_path / "jt", stores=[str(tmp_path / "s.db")], heldout_fraction=0.34,
                        length_balance=False, answer_swaps=2, max_per_task=4)  # fmt: skip
    train, heldout, stats = job_dataset(job)
    swaps = [p for p in train if p.store == SWAP_STORE]
    held_tasks = {p.task_id for p in heldout}
    assert swaps and held_tasks
    assert not [p for p in heldout if p.store == SWAP_STORE]
    assert not {p.task_id for p in swaps} & held_tasks
    assert stats["answer_swaps"]["swaps"] >= len(swaps) == stats["used"]["train_answer_swaps"]
    # without swaps the real pairs and their split are the same
    plain = JudgeTrainJob(tmp_path / "jt0", stores=job.stores, heldout_fraction=0.34,
                          length_balance=False, max_per_task=4)  # fmt: skip
    train0, heldout0, _ = job_dataset(plain)
    assert [p.id for p in heldout0] == [p.id for p in heldout]
    assert {p.id for p in train0} == {p.id for p in train if p.store != SWAP_STORE}


def test_the_flag_reaches_the_job_and_a_bad_count_is_a_one_line_error(tmp_path: Path, capsys) -> None:  # fmt: skip
    import argparse

    from rankgym.cli import main
    from rankgym.trainer import judge_train_command as jtc

    p = argparse.ArgumentParser()
    jtc.JUDGE_TRAIN.add_arguments(p)
    assert jtc._job(p.parse_args(["--out", "o", "--answer-swaps", "3"])).answer_swaps == 3
    assert main(["judge-train", "--store", "x.db", "--out", str(tmp_path), "--answer-swaps", "-1"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "--answer-swaps" in err and "Traceback" not in err


def test_the_stage_section_sets_swaps_length_balance_and_the_replay_env(tmp_path: Path) -> None:
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.demo import demo_config
    from rankgym.trainer.judge_stage import _job

    raw = demo_config(str(tmp_path / "run"), 1, "judge+verifiable", 0, judge_train=True)
    raw["judge_train"].update({"answer_swaps": 3, "length_balance": False})
    cfg = TrainConfig.model_validate(raw)
    assert cfg.judge_train is not None
    job = _job(cfg, cfg.judge_train, tmp_path / "jt", [])
    assert job.answer_swaps == 3 and job.length_balance is False
    assert job.env_kwargs == {ENV: cfg.env.kwargs}  # replayed in the env the stage rolls out
    plain = TrainConfig.model_validate(demo_config(str(tmp_path / "r2"), 1, "judge+verifiable", 0, judge_train=True))  # fmt: skip
    assert plain.judge_train is not None
    default = _job(plain, plain.judge_train, tmp_path / "jt2", [])
    assert default.answer_swaps == 0 and default.length_balance is True
    with pytest.raises(ValueError, match="answer_swaps"):
        TrainConfig.model_validate({**raw, "judge_train": {**raw["judge_train"], "answer_swaps": -1}})  # fmt: skip
