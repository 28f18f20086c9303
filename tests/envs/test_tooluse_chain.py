"""ToolUse's chain credit: a wrong answer earns more the more of the oracle's chain it ran."""

from __future__ import annotations

import json

import gymnasium
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rankgym.envs  # noqa: F401  (registers the built-ins)
from rankgym.envs.tooluse import FORMAT_CREDIT, ToolUseEnv
from rankgym.envs.tooluse.env import chain_progress, solution_values


def _call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _lookup_chain(env: ToolUseEnv):
    task = next(t for t in env.tasks("train") if t.family == "lookup" and len(t.solution) == 2)
    lookup, calc = task.solution
    assert (lookup["name"], calc["name"]) == ("lookup", "calculate")
    price, k = calc["arguments"]["expression"].split(" * ")
    return task, lookup["arguments"], f"{k} * {price}"  # the oracle's product, operands swapped


def _play(env: ToolUseEnv, task, replies: list[str]) -> float:
    env.reset(options={"task_id": task.id})
    for reply in replies:
        out = env.step(reply)
    return out[4]["verifiable_reward"]


@pytest.fixture(scope="module")
def credited() -> ToolUseEnv:
    return gymnasium.make("rankgym/ToolUse-v0", difficulty="hard", chain_credit=0.3).unwrapped


def test_each_oracle_call_reproduced_adds_its_share(credited):
    task, lookup_args, swapped = _lookup_chain(credited)
    wrong = "The answer is 0.5."
    assert _play(credited, task, [wrong]) == 0.0  # no call: no credit of any kind
    stopped = _play(credited, task, [_call("lookup", **lookup_args), wrong])
    assert stopped == pytest.approx(FORMAT_CREDIT + 0.3 / 2)
    chained = _play(
        credited,
        task,
        [_call("lookup", **lookup_args), _call("calculate", expression=swapped), wrong],
    )
    assert chained == pytest.approx(FORMAT_CREDIT + 0.3)  # the same value, not the same text
    right = f"The answer is {task.answer}."
    assert _play(credited, task, [_call("lookup", **lookup_args), right]) == 1.0


def test_a_call_to_the_right_tool_with_another_result_is_not_progress(credited):
    task, lookup_args, _ = _lookup_chain(credited)
    other = {**lookup_args, "column": "stock"}
    assert _play(credited, task, [_call("lookup", **other), "no idea"]) == pytest.approx(0.2)
    twice = [_call("lookup", **lookup_args)] * 2 + ["no idea"]
    assert _play(credited, task, twice) == pytest.approx(0.35)  # one oracle call counts once


def test_a_chain_cut_at_the_turn_limit_earns_only_the_format_credit(credited):
    """Paying progress to an episode that never answers taught a policy to call tools until it
    was cut (bench/RESULTS.md, session 27): the credit is for a chain that ends in an answer."""
    task, lookup_args, swapped = _lookup_chain(credited)
    calls = [_call("lookup", **lookup_args), _call("calculate", expression=swapped)]
    env = ToolUseEnv(difficulty="hard", chain_credit=0.3, max_turns=2)
    env.reset(options={"task_id": task.id})
    out = [env.step(c) for c in calls][-1]
    assert out[3] and out[4]["verifiable_reward"] == pytest.approx(FORMAT_CREDIT)
    env = ToolUseEnv(difficulty="hard", chain_credit=0.3, max_turns=3)
    assert _play(env, task, [*calls, "The answer is 1."]) == pytest.approx(FORMAT_CREDIT + 0.3)


def test_default_is_the_flat_format_credit():
    env = ToolUseEnv(difficulty="hard")
    task, lookup_args, swapped = _lookup_chain(env)
    chained = [_call("lookup", **lookup_args), _call("calculate", expression=swapped), "no idea"]
    assert env.chain_credit == 0.0 and _play(env, task, chained) == pytest.approx(FORMAT_CREDIT)


@pytest.mark.parametrize("bad", [-0.1, 0.8, 1.5, "0.3", True, None])
def test_chain_credit_out_of_range_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="chain_credit=.*must be in \\[0, 0.8\\)"):
        ToolUseEnv(chain_credit=bad)


def test_the_oracle_reproduces_its_whole_chain_on_every_task():
    env = ToolUseEnv(chain_credit=0.3)
    for task in env.tasks("train") + env.tasks("test"):
        env.reset(options={"task_id": task.id})
        for msg in env.oracle(task)[:-1]:
            env.step(msg)
        assert chain_progress(task, env.state) == 1.0, task.id
        assert len(solution_values(task)) == len(task.solution)


@settings(max_examples=40, deadline=None)
@given(credit=st.floats(0.0, 0.79), calls=st.integers(0, 3))
def test_a_wrong_answer_never_reaches_success(credit, calls):
    env = ToolUseEnv(difficulty="hard", families="lookup", chain_credit=credit)
    task, lookup_args, swapped = _lookup_chain(env)
    made = [_call("lookup", **lookup_args), _call("calculate", expression=swapped)] * 2
    reward = _play(env, task, made[:calls] + ["The answer is -1."])
    assert 0.0 <= reward <= FORMAT_CREDIT + credit + 1e-12 and reward < 1.0
