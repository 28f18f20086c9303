"""The Env base class: episode semantics, info contract, spaces and robustness of step()."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from rankgym.envs import Env, Task, tool
from rankgym.envs.spaces import AssistantActionSpace, MessagesSpace
from rankgym.types import Message, ToolCall, ToolCallFunction


def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


def explode(x: int) -> int:
    """Raise an error."""
    raise RuntimeError("kaboom")


@tool(terminal=True)
def submit(value: int) -> str:
    """Submit the final value.

    Args:
        value: The answer.
    """
    return "submitted"


class DoubleEnv(Env):
    env_id = "test/Double-v0"
    max_turns = 3
    tools = [double, explode, submit]

    def tasks(self, split="train"):
        xs = range(1, 6) if split == "train" else range(6, 8)
        return [Task(id=f"d{x}", prompt=f"Double {x}.", answer=2 * x, split=split) for x in xs]

    def verify(self, task, answer, state):
        if isinstance(answer, dict):
            return float(answer["value"] == task.answer)
        return 0.5 if answer and str(task.answer) in answer else 0.0

    def hack_signals_for(self, task, state):
        return ["no_tools"] if state.tool_successes == 0 else []


class NoVerifierEnv(Env):
    def tasks(self, split="train"):
        return [Task(id="only", prompt="Say hi.")]


def call(name, args, id="c1"):
    fn = {"name": name, "arguments": json.dumps(args)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": id, "type": "function", "function": fn}],
    }


def test_reset_returns_messages_and_info_contract():
    env = DoubleEnv()
    obs, info = env.reset(seed=0, options={"task_id": "d3"})
    assert [m["role"] for m in obs] == ["system", "user"] and obs[1]["content"] == "Double 3."
    assert "<tool_call>" in obs[0]["content"] and "double(x: integer)" in obs[0]["content"]
    assert info["task_id"] == "d3" and info["task"].answer == 6 and info["split"] == "train"
    assert [t["function"]["name"] for t in info["tools"]] == ["double", "explode", "submit"]
    assert obs in env.observation_space
    # the task can be found in another split than the env's default
    assert env.reset(options={"task_id": "d7"})[1]["split"] == "test"
    with pytest.raises(KeyError):
        env.reset(options={"task_id": "nope"})


def test_seeded_reset_is_deterministic_and_split_option_is_used():
    env = DoubleEnv()
    ids = [env.reset(seed=s)[1]["task_id"] for s in range(20)]
    assert ids == [env.reset(seed=s)[1]["task_id"] for s in range(20)]
    assert len(set(ids)) > 1
    assert {env.reset(options={"split": "test"})[1]["task_id"] for _ in range(20)} <= {"d6", "d7"}


def test_tool_then_text_answer_episode():
    env = DoubleEnv()
    env.reset(options={"task_id": "d3"})
    new, reward, term, trunc, info = env.step(call("double", {"x": "3"}))
    assert new == [{"role": "tool", "tool_call_id": "c1", "name": "double", "content": "6"}]
    assert (reward, term, trunc) == (0.0, False, False)
    assert (
        info["verifiable_reward"] is None and info["tool_calls"] == 1 and info["tool_errors"] == 0
    )
    new, reward, term, trunc, info = env.step("It is 6.")
    assert new == [] and term and not trunc
    assert reward == 0.5 == info["verifiable_reward"] and info["final_answer"] == "It is 6."
    assert info["hack_signals"] == []
    assert [m["role"] for m in env.state.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("again")


def test_terminal_tool_ends_episode_with_its_arguments_as_answer():
    env = DoubleEnv()
    env.reset(options={"task_id": "d2"})
    action = call("submit", {"value": 4})
    action["tool_calls"].append(
        {"id": "c2", "type": "function", "function": {"name": "double", "arguments": "{}"}}
    )
    new, reward, term, trunc, info = env.step(action)
    assert term and reward == 1.0 and info["final_answer"] == {"value": 4}
    assert new[0]["content"] == "submitted"
    assert new[1]["content"].startswith("Error: not run")
    assert info["hack_signals"] == []


def test_tool_errors_are_messages_and_turn_limit_truncates():
    env = DoubleEnv()
    env.reset(options={"task_id": "d1"})
    new, *_, info = env.step(call("explode", {"x": 1}))
    assert (
        new[0]["content"] == "Error: explode failed: RuntimeError: kaboom"
        and info["tool_errors"] == 1
    )
    new, *_ = env.step(call("nope", {}))
    assert "unknown tool 'nope'" in new[0]["content"]
    new, reward, term, trunc, info = env.step(call("double", {"y": 1}))
    assert "invalid arguments" in new[0]["content"]
    assert trunc and not term and reward == 0.0 and info["verifiable_reward"] == 0.0
    assert info["final_answer"] is None and info["hack_signals"] == ["no_tools"]
    assert env.state.tool_errors == 3


def test_text_protocol_call_and_nudge_on_unreadable_markup():
    env = DoubleEnv()
    env.reset(options={"task_id": "d4"})
    new, _, term, _, info = env.step(
        '<tool_call>{"name": "double", "arguments": {"x": 4}}</tool_call>'
    )
    assert not term and new[0]["content"] == "8" and new[0]["tool_call_id"] == "call_0"
    assert info["assistant_message"]["tool_calls"][0]["function"]["name"] == "double"
    new, _, term, trunc, info = env.step("<tool_call>{'name': double</tool_call>")
    assert not term and not trunc and new[0]["role"] == "user" and info["parse_errors"]
    assert "could not be read" in new[0]["content"]
    assert env.state.parse_errors == 1


def test_actions_as_message_objects_and_dicts_without_role_or_ids():
    env = DoubleEnv()
    env.reset(options={"task_id": "d5"})
    msg = Message(
        role="assistant",
        tool_calls=[
            ToolCall(id="t9", function=ToolCallFunction(name="double", arguments='{"x": 5}'))
        ],
    )
    assert env.step(msg)[0][0] == {
        "role": "tool",
        "tool_call_id": "t9",
        "name": "double",
        "content": "10",
    }
    new = env.step({"tool_calls": [{"function": {"name": "double", "arguments": {"x": 1}}}]})[0]
    assert new[0]["tool_call_id"] == "call_2_0" and new[0]["content"] == "2"
    with pytest.raises(TypeError):
        env.step(42)
    with pytest.raises(TypeError):
        env.step({"role": "user", "content": "hi"})


def test_env_without_verifier_reports_none_and_needs_reset():
    env = NoVerifierEnv()
    with pytest.raises(RuntimeError, match="reset"):
        env.step("hi")
    obs, info = env.reset()
    assert info["tools"] == [] and "<tool_call>" not in obs[0]["content"]
    _, reward, term, _, info = env.step("hi")
    assert term and reward == 0.0 and info["verifiable_reward"] is None
    assert env.oracle(env.tasks()[0]) is None


def test_check_env_passes_for_a_user_env_and_step_survives_random_actions():
    gymnasium.register(id="test/Double-v0", entry_point=DoubleEnv)
    try:
        env = gymnasium.make("test/Double-v0")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped)
        env = env.unwrapped
        env.action_space.seed(0)
        for i in range(300):
            if i % 3 == 0:
                env.reset(seed=i)
            action = env.action_space.sample()
            assert action in env.action_space
            obs, reward, term, trunc, info = env.step(action)
            assert obs in env.observation_space and isinstance(reward, float)
            if term or trunc:
                env.reset(seed=i)
    finally:
        gymnasium.registry.pop("test/Double-v0", None)


def test_spaces_contain_exactly_the_chat_shapes():
    obs, act = MessagesSpace(seed=1), AssistantActionSpace(["double"], seed=1)
    assert [] in obs and obs.sample() in obs
    assert [{"role": "user", "content": "a b"}] in obs
    assert [{"role": "robot", "content": "x"}] not in obs
    assert [{"role": "user", "content": 3}] not in obs
    assert [{"role": "user", "content": "x", "extra": 1}] not in obs
    assert "any text, with spaces\n" in act and {"content": "x"} in act
    assert {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"function": {"name": "f"}}],
    } in act
    assert {"role": "user", "content": "x"} not in act and 3 not in act
    assert {"role": "assistant", "tool_calls": [{"function": {}}]} not in act


def test_docs_example_env_runs(capsys):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "envs.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "class VowelsEnv" in b)
    try:
        exec(compile(block, "docs/envs.md", "exec"), {"__name__": "docs_example"})
    finally:
        gymnasium.registry.pop("demo/Vowels-v0", None)
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0] == "[{'role': 'tool', 'tool_call_id': 'c1', 'name': 'count_vowels', 'content': '3'}]"
    )
    assert out[1] == "(1.0, True)"


# ---- hostile input (issue 16): nothing the agent writes raises out of step -------------------


class BrokenVerifierEnv(DoubleEnv):
    def verify(self, task, answer, state):
        raise ZeroDivisionError("verifier bug")


def test_unparseable_deep_keyword_call_is_a_nudge_not_a_recursion_error():
    env = DoubleEnv()
    env.reset(seed=0)
    text = "<tool_call>double(x=" + "-" * 3000 + "1)</tool_call>"
    obs, reward, term, trunc, info = env.step(text)
    assert not term and info["parse_errors"] and obs[0]["role"] == "user"
    assert "could not be read" in obs[0]["content"]


def test_deeply_nested_native_arguments_are_a_tool_error():
    env = DoubleEnv()
    env.reset(seed=0)
    deep: dict = {}
    for _ in range(5000):
        deep = {"a": deep}
    obs, _, term, _, info = env.step(
        {
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "double", "arguments": deep}}],
        }
    )
    assert not term and info["tool_errors"] == 1 and obs[0]["content"].startswith("Error:")


def test_an_exception_inside_the_env_is_reported_to_the_agent_and_the_turn_is_undone():
    env = DoubleEnv()
    env.reset(seed=0)
    n = len(env.state.messages)
    env.state.tools = None  # env bug: calling a tool now raises AttributeError
    obs, reward, term, trunc, info = env.step(call("double", {"x": 2}))
    assert info["env_error"].startswith("AttributeError")
    assert [m["role"] for m in env.state.messages[n:]] == ["assistant", "user"]
    assert obs == [env.state.messages[-1]] and "could not be processed" in obs[0]["content"]
    assert env.state.turn == 1 and not term and reward == 0.0


def test_a_verifier_that_raises_ends_the_episode_with_no_reward_and_the_error_in_info():
    env = BrokenVerifierEnv()
    env.reset(seed=0)
    _, reward, term, _, info = env.step("4")
    assert term and reward == 0.0 and info["verifiable_reward"] is None
    assert "ZeroDivisionError: verifier bug" in info["env_error"]


def test_only_the_first_calls_of_a_turn_run():
    from rankgym.envs.base import MAX_CALLS_PER_TURN

    env = DoubleEnv()
    env.reset(seed=0)
    text = '<tool_call>{"name": "double", "arguments": {"x": 1}}</tool_call>' * 100
    obs, _, _, _, info = env.step(text)
    assert len(obs) == 100 and info["tool_errors"] == 100 - MAX_CALLS_PER_TURN
    assert all(m["content"] == "2" for m in obs[:MAX_CALLS_PER_TURN])
    assert "at most" in obs[-1]["content"]


def test_an_env_without_env_id_is_named_by_its_class_in_the_oracle_error():
    from rankgym.envs.policies import EpisodeContext, OraclePolicy

    env = NoVerifierEnv()
    assert env.env_id == "NoVerifierEnv" and DoubleEnv().env_id == "test/Double-v0"
    msgs, _ = env.reset()
    ctx = EpisodeContext(task=env.state.task, env=env)
    [gen] = OraclePolicy().generate([msgs], [[]], [ctx])
    assert gen.error == "env NoVerifierEnv has no oracle"


def test_a_failure_after_the_episode_ended_still_ends_it():
    env = DoubleEnv()
    env.reset(seed=0)
    # make the end-of-episode bookkeeping fail after `done` is set
    env._finish = lambda st, answer, info: (_ for _ in ()).throw(RecursionError("deep"))
    _, reward, term, trunc, info = env.step(call("submit", {"value": 4}))
    assert (term or trunc) and env.state.done and reward == 0.0
    assert info["env_error"].startswith("RecursionError")
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("again")
