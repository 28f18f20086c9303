"""Issue 26: malformed tool calls in an assistant message are the agent's mistake, told to it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.envs import Env, Task
from rankgym.envs.spaces import is_message


def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


class DoubleEnv(Env):
    env_id = "test/BadCalls-v0"
    max_turns = 50
    tools = [double]

    def tasks(self, split="train"):
        return [Task(id="d1", prompt="Double 1.", answer=2, split=split)]

    def verify(self, task, answer, state):
        return 0.0


def _with_call(tc) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [tc]}


@pytest.mark.parametrize(
    "tc",
    [
        {"id": "a", "type": "function", "function": {"name": 5, "arguments": "{}"}},
        {"id": "a", "type": "function", "function": {"name": None, "arguments": {"x": 1}}},
        {"id": 3, "function": {"name": ["double"], "arguments": "{}"}},
        {"function": "double"},
        {},
        7,
        None,
    ],
)
def test_a_tool_call_whose_name_is_not_a_string_is_a_message_to_the_agent(tc):
    env = DoubleEnv()
    env.reset()
    new, reward, terminated, truncated, info = env.step(_with_call(tc))
    assert new[0]["role"] == "tool" and "no function name" in new[0]["content"]
    assert not terminated and not truncated and info["tool_errors"] == 1
    assert "env_error" not in info
    assert all(is_message(m) for m in env.state.messages)  # the history stays well-formed


def test_a_good_call_next_to_a_bad_one_still_runs():
    env = DoubleEnv()
    env.reset()
    good = {"id": "g", "type": "function", "function": {"name": "double", "arguments": '{"x": 4}'}}
    msg = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": 1}}, good]}
    new = env.step(msg)[0]
    assert "no function name" in new[0]["content"] and new[1]["content"] == "8"


def test_what_is_not_an_assistant_message_is_still_the_callers_mistake():
    env = DoubleEnv()
    env.reset()
    for bad in (42, {"role": "user", "content": "hi"}, {"content": 5, "tool_calls": []}):
        with pytest.raises(TypeError, match="assistant message"):
            env.step(bad)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_calls = st.lists(
    st.one_of(
        _json,
        st.fixed_dictionaries(
            {"function": st.fixed_dictionaries({"name": _json, "arguments": _json})},
            optional={"id": _json, "type": _json},
        ),
    ),
    max_size=4,
)


@given(_calls)
@settings(max_examples=150, deadline=None)
def test_any_tool_calls_list_never_raises_from_step(calls):
    env = DoubleEnv()
    env.reset()
    new, _, _, _, info = env.step({"role": "assistant", "content": None, "tool_calls": calls})
    assert all(is_message(m) for m in env.state.messages)
    assert len([m for m in new if m["role"] == "tool"]) == len(calls)
