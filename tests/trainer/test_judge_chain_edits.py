"""Chain edits: a success whose chain stops a call early, or takes one more call the policy made
elsewhere, answering with what the edited chain returned; labelled by the env's replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankgym.envs.registry import make
from rankgym.store import Store
from rankgym.trainer.judge_chain_edits import EDIT_STORE, chain_edits, restate
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


def call(name: str, **arguments: Any) -> dict[str, Any]:
    fn = {"name": name, "arguments": json.dumps(arguments)}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": fn}]}  # fmt: skip


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def two_call_task() -> Any:
    """A train task whose oracle makes two calls (add_days, then day_of_week)."""
    env = make(ENV)
    return next(t for t in env.tasks("train") if t.id.startswith("tooluse-dates-hard"))


def calc_tasks(n: int) -> list[Any]:
    env = make(ENV)
    return [t for t in env.tasks("train") if t.id.startswith("tooluse-calc-easy")][:n]


def calc_store(path: Path) -> None:
    """Six calc tasks, each a group of the oracle's success and a chain one call too long."""
    with Store(path) as s:
        for task in calc_tasks(6):
            oracle = make(ENV).oracle(task)
            expr = json.loads(oracle[0]["tool_calls"][0]["function"]["arguments"])["expression"]
            good = play(task.id, oracle)
            bad = play(task.id, [call("calculate", expression=expr), call("calculate", expression=f"({expr}) + 77"), answer("The answer is 0.")])  # fmt: skip
            s.put_group(Group(env_id=ENV, task_id=task.id, trajectories=[good, bad]))


def test_restate_replaces_the_stated_result_verbatim_or_rounded() -> None:
    assert restate("The answer is 30.", "30", "660") == "The answer is 660."
    assert restate("<answer>30</answer>", "30", "7") == "<answer>7</answer>"
    assert restate("It is 291.48 kelvin.", "291.483333", "-342.67") == "It is -342.67 kelvin."
    assert restate("About 291 K.", "291.483333", "12.5") == "About 12 K."  # the digits shown
    assert restate("30 + 3 = 33, so 33.", "33", "9") == "30 + 3 = 33, so 9."  # the last statement
    assert restate("The answer is 330.", "30", "9") is None  # not a whole number of the reply
    assert restate("The answer is 30.", "30", "30") is None
    assert restate("About 1.0 m.", "1.04", "1.0") is None  # rounds alike: the same reply
    assert restate("Monday it is.", "Monday", "2027-04-19") == "2027-04-19 it is."
    assert restate("Done.", "Monday", "Tuesday") is None


@given(st.text(max_size=80), st.text(max_size=20), st.text(max_size=20))
def test_restate_never_raises_and_states_the_new_result_where_it_answers(text: str, old: str, new: str) -> None:  # fmt: skip
    out = restate(text, old, new)
    if out is not None:
        assert out != text
        stated = new.strip()
        try:
            y = float(stated)
        except ValueError:
            assert stated in out
        else:
            assert stated in out or any(f"{y:.{d}f}" in out for d in range(0, 12))


def test_a_drop_stops_one_call_early_and_answers_with_the_result_before(tmp_path: Path) -> None:
    task = two_call_task()
    good = play(task.id, make(ENV).oracle(task))
    assert good.verifiable_reward == 1.0
    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id=ENV, task_id=task.id, trajectories=[good]))
        pairs, stats = chain_edits({"s": s}, [], 2, max_per_task=8)
    assert stats.successes == 1 and stats.dropped == 1 and stats.extended == 0
    (p,) = pairs
    assert p.store == EDIT_STORE and p.source == "verifier" and p.winner.messages == good.messages
    calls = [m for m in p.loser.messages if m.role == "assistant" and m.tool_calls]
    assert [c.tool_calls[0].function.name for c in calls if c.tool_calls] == ["add_days"]
    first, last = [m.content or "" for m in good.messages if m.role == "tool"]
    assert p.loser.messages[-1].content == (good.messages[-1].content or "").replace(last, first)
    assert p.loser.messages[-2].role == "tool"  # the env's record of the replay, tool output kept
    assert p.loser.verifiable_reward is not None and p.loser.verifiable_reward < 1.0
    assert len(p.loser.messages) < len(good.messages)


def test_an_extend_takes_a_call_from_a_failed_episode_and_answers_with_its_result(tmp_path: Path) -> None:  # fmt: skip
    (task,) = calc_tasks(1)
    oracle = make(ENV).oracle(task)
    good = play(task.id, oracle)
    expr = json.loads(oracle[0]["tool_calls"][0]["function"]["arguments"])["expression"]
    wrong = play(task.id, [call("calculate", expression=expr), call("calculate", expression=f"({expr}) * 1000"), answer("The answer is 5.")])  # fmt: skip
    assert good.verifiable_reward == 1.0 and wrong.verifiable_reward is not None
    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id=ENV, task_id=task.id, trajectories=[good, wrong]))
        pairs, stats = chain_edits({"s": s}, [], 2, max_per_task=8)
    assert stats.extended == 1 and stats.dropped == 0  # one call: nothing to drop
    (p,) = pairs
    value = 1000 * float(task.answer)
    assert p.loser.messages[-1].content == f"The answer is {value:g}."
    assert [m.content for m in p.loser.messages if m.role == "tool"][-1] == f"{value:g}"
    assert p.loser.messages[: len(good.messages) - 1] == good.messages[:-1]
    assert p.loser.verifiable_reward is not None and p.loser.verifiable_reward < 1.0


def test_held_out_tasks_a_denied_reward_and_a_call_that_does_not_run_give_no_edits(tmp_path: Path) -> None:  # fmt: skip
    a, b = calc_tasks(2)
    good_a = play(a.id, make(ENV).oracle(a))
    bad_a = play(a.id, [call("calculate", expression="1 +"), answer("The answer is 5.")])
    lying = play(b.id, [answer("The answer is 123456.")]).model_copy(
        update={"verifiable_reward": 1.0}
    )
    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id=ENV, task_id=a.id, trajectories=[good_a, bad_a]))
        s.put_group(Group(env_id=ENV, task_id=b.id, trajectories=[lying]))
        held, held_stats = chain_edits({"s": s}, [(ENV, b.id)], 2, max_per_task=8)
        _, stats = chain_edits({"s": s}, [], 2, max_per_task=8)
    assert held == [] and held_stats.successes == 1  # a's failed call errs: no extend from it
    assert held_stats.not_worse == 1
    assert stats.not_reproduced == 1  # b's stored 1.0 does not replay as a success


def test_an_env_that_is_not_here_gives_no_edits_and_says_so(tmp_path: Path) -> None:
    t = Trajectory(env_id="nowhere/Env-v0", task_id="t1", verifiable_reward=1.0,
                   messages=[Message(role="user", content="q"), Message(role="assistant", content="a")])  # fmt: skip
    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id="nowhere/Env-v0", task_id="t1", trajectories=[t]))
        pairs, stats = chain_edits({"s": s}, [], 2, max_per_task=8)
    assert pairs == [] and stats.no_env == ["nowhere/Env-v0"]


def test_judge_train_data_edits_on_the_training_side_only(tmp_path: Path) -> None:
    calc_store(tmp_path / "s.db")
    job = JudgeTrainJob(tmp_path / "jt", stores=[str(tmp_path / "s.db")], heldout_fraction=0.34,
                        length_balance=False, chain_edits=2, answer_swaps=1, max_per_task=4)  # fmt: skip
    train, heldout, stats = job_dataset(job)
    edits = [p for p in train if p.store == EDIT_STORE]
    held_tasks = {p.task_id for p in heldout}
    assert edits and held_tasks and not [p for p in heldout if p.store == EDIT_STORE]
    assert not {p.task_id for p in edits} & held_tasks
    assert stats["chain_edits"]["extended"] >= len(edits) == stats["used"]["train_chain_edits"]
    assert stats["used"]["train_answer_swaps"] > 0  # both kinds side by side


def test_the_flag_and_the_stage_section_reach_the_job(tmp_path: Path, capsys) -> None:  # fmt: skip
    import argparse

    from rankgym.cli import main
    from rankgym.trainer import judge_train_command as jtc
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.demo import demo_config
    from rankgym.trainer.judge_stage import _job

    p = argparse.ArgumentParser()
    jtc.JUDGE_TRAIN.add_arguments(p)
    assert jtc._job(p.parse_args(["--out", "o", "--chain-edits", "3"])).chain_edits == 3
    assert main(["judge-train", "--store", "x.db", "--out", str(tmp_path), "--chain-edits", "65"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "--chain-edits" in err and "Traceback" not in err
    raw = demo_config(str(tmp_path / "run"), 1, "judge+verifiable", 0, judge_train=True)
    raw["judge_train"]["chain_edits"] = 2
    cfg = TrainConfig.model_validate(raw)
    assert cfg.judge_train is not None
    assert _job(cfg, cfg.judge_train, tmp_path / "jt", []).chain_edits == 2
    with pytest.raises(ValueError, match="chain_edits"):
        TrainConfig.model_validate({**raw, "judge_train": {**raw["judge_train"], "chain_edits": -1}})  # fmt: skip


def test_judge_train_says_how_many_counterfactuals_it_made_and_why_no_more() -> None:
    from rankgym.trainer.judge_train_command import counterfactual_lines

    made = {
        "answer_swaps": {
            "successes": 44,
            "swaps": 176,
            "not_reproduced": 0,
            "not_worse": 34,
            "no_task": 0,
            "no_env": [],
        },  # fmt: skip
        "chain_edits": {
            "successes": 0,
            "dropped": 0,
            "reversed": 0,
            "extended": 0,
            "not_reproduced": 0,
            "no_answer": 0,
            "not_worse": 0,
            "no_task": 0,
            "no_env": ["acme/Env-v0"],
        },  # fmt: skip
    }
    swaps, edits = counterfactual_lines(made)
    assert swaps.startswith("answer swaps: 176 made from 44") and "34 not worse" in swaps
    assert "0 drop, 0 reverse, 0 extend" in edits and "acme/Env-v0" in edits
    assert "no success on the training side" in edits
    assert counterfactual_lines({}) == []


def test_the_cap_keeps_every_real_pair_before_any_counterfactual(tmp_path: Path) -> None:
    calc_store(tmp_path / "s.db")
    kw: dict[str, Any] = {"stores": [str(tmp_path / "s.db")], "heldout_fraction": 0.34, "length_balance": False, "max_per_task": 4}  # fmt: skip
    real, _, _ = job_dataset(JudgeTrainJob(tmp_path / "jt0", **kw))
    train, _, _ = job_dataset(JudgeTrainJob(tmp_path / "jt", chain_edits=2, answer_swaps=2, max_train_pairs=len(real) + 1, **kw))  # fmt: skip
    assert {p.id for p in real} <= {p.id for p in train}  # no real pair crowded out
    assert len(train) == len(real) + 1
