"""Property-based fuzzing (hypothesis) of what an agent can send an env (issue 16).

Properties: the text tool-call parser never raises and only emits well-formed calls; ``step`` of
every built-in env (ToolUse, EmailSearch, CodeTests) never raises on any assistant message an
agent could write, and returns a Gymnasium-valid observation, a float reward and the info keys
of the contract. The cases issue 16 found by hand are pinned as ``@example``s. Sizes are kept
small (``max_examples`` per test) so the whole file runs in well under a minute; the issue's
linear-time cases are exercised once at full size as examples (no timing is asserted).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import rankgym.envs
from rankgym.envs import Env
from rankgym.envs.registry import BUILTINS
from rankgym.envs.toolcalls import parse_text

# ---- strategies ------------------------------------------------------------------------------

FRAGMENTS = [
    "<tool_call>", "</tool_call>", "<TOOL_CALL>", "```json\n", "```", "{", "}", "[", "]", "(", ")",
    '"', "'", ":", ",", "=", "-", "~", "\\", "\n", " ", "name", "arguments", '"name": ',
    '"arguments": ', "calculate(expression=", "true", "null", "None", "1e309", "9" * 40,
    "\ud800", "\x00", "\x1b[2J", "é中😀",
]  # fmt: skip
"""Pieces of the text protocol and of hostile input, glued together by ``agent_text``."""

agent_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=40).map("".join),
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def deep(n: int) -> str:
    return '{"a": ' * n + "1" + "}" * n


def native_call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    fn = {"name": name, "arguments": arguments}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "function": fn}]}


def text_call(name: str, arguments: dict[str, Any]) -> str:
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>{payload}</tool_call>"


# The cases issue 16 found by hand (text protocol and env tools), pinned as examples below.
UNARY_3K = "<tool_call>calculate(expression=" + "-" * 3000 + "1)</tool_call>"
UNARY_100K = "<tool_call>calculate(expression=" + "-" * 100_000 + "1)</tool_call>"
NESTED_5000 = text_call("calculate", {}).replace("{}", deep(5000))
SURROGATE = "The answer is \ud800 42"
KEYWORDS_40K = text_call("search_emails", {"keywords": " ".join(f"w{i}" for i in range(40_000))})
CALC_HUGE = text_call("calculate", {"expression": "1e309"})
CALC_199_DIGITS = text_call("calculate", {"expression": "9" * 199 + " + 1"})

# ---- the parser --------------------------------------------------------------------------------


@settings(
    max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(agent_text)
@example(UNARY_3K)
@example(UNARY_100K)
@example(NESTED_5000)
@example(SURROGATE)
@example("<tool_call>f(x=" + "[1," * 300 + "]" * 300 + ")</tool_call>")
@example('{"name": "a", "arguments": {}} ' * 2000)
def test_the_text_protocol_parser_never_raises_and_emits_only_well_formed_calls(text: str) -> None:
    parsed = parse_text(text)
    assert isinstance(parsed.content, str)
    assert all(isinstance(e, str) and len(e) < 300 for e in parsed.errors)
    for i, call in enumerate(parsed.tool_calls):
        assert call["id"] == f"call_{i}" and call["type"] == "function"
        assert isinstance(call["function"]["name"], str) and call["function"]["name"]
        assert isinstance(json.loads(call["function"]["arguments"]), dict)


# ---- env.step of every built-in env --------------------------------------------------------------

INFO_KEYS = {"turn", "tool_calls", "tool_errors", "parse_errors", "assistant_message"}


@functools.cache
def built_in(env_id: str) -> Env:
    """One env per id for the whole file (EmailSearch and CodeTests are slow to build)."""
    if env_id not in BUILTINS:
        pytest.skip(f"{env_id} is not registered in this version")
    return rankgym.envs.make(env_id)


# Actions too deep for hypothesis to print in its report: examples name them, ``play`` builds them.
BUILT = {"@native-deep-900": lambda: native_call("x", json.loads(deep(900)))}


def play(env: Env, seed: int, actions: list[Any]) -> None:
    """Reset, then step through ``actions`` (resetting when an episode ends); check the contract."""
    env.reset(seed=seed)
    for action in actions:
        if isinstance(action, str) and action in BUILT:
            action = BUILT[action]()
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs in env.observation_space, obs
        assert isinstance(reward, float) and isinstance(terminated, bool)
        assert set(info) >= INFO_KEYS, info.keys()
        if terminated or truncated:
            assert "final_answer" in info
            env.reset(seed=seed)


@st.composite
def actions(draw: st.DrawFn, tool_names: list[str]) -> list[Any]:
    """1-4 assistant actions: free text, text-protocol calls, or native calls with any arguments."""
    name = st.sampled_from([*tool_names, "unknown_tool", ""])
    one = st.one_of(
        agent_text,
        st.builds(text_call, name, st.dictionaries(st.text(max_size=10), json_values, max_size=3)),
        st.builds(native_call, name, json_values | agent_text),
        st.builds(native_call, json_values, json_values),  # a name that is not a string (issue 26)
        st.builds(
            native_call,
            name,
            st.fixed_dictionaries(
                {},
                optional={
                    n: json_values
                    for n in ("text", "keywords", "code", "expression", "message_id", "sources")
                },
            ),  # fmt: skip
        ),
    )
    return draw(st.lists(one, min_size=1, max_size=4))


def _fuzz(env_id: str, max_examples: int):  # noqa: ANN202 - a decorated test factory
    env_tools = {
        "rankgym/ToolUse-v0": [
            "calculate",
            "reverse_text",
            "count_letters",
            "word_count",
            "convert_units",
            "days_between",
            "lookup",
        ],  # fmt: skip
        "rankgym/EmailSearch-v0": ["search_emails", "read_email", "answer"],
        "rankgym/CodeTests-v0": ["run_python", "run_tests", "submit"],
    }[env_id]

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,  # nothing written into the checkout; failures print their example
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.integers(0, 50), actions(env_tools))
    @example(0, [UNARY_3K, UNARY_100K])
    @example(0, [NESTED_5000, "@native-deep-900"])
    @example(0, [SURROGATE])
    @example(0, [KEYWORDS_40K, CALC_HUGE, CALC_199_DIGITS])
    @example(0, ['<tool_call>{"name": "a", "arguments": {}}</tool_call>' * 200])
    @example(0, [native_call(5, "{}"), native_call(None, {}), native_call(["submit"], "{}")])
    def test(seed: int, steps: list[Any]) -> None:
        play(built_in(env_id), seed, steps)

    return test


test_tooluse_step_never_raises_on_agent_input = _fuzz("rankgym/ToolUse-v0", 150)
test_emailsearch_step_never_raises_on_agent_input = _fuzz("rankgym/EmailSearch-v0", 100)
test_codetests_step_never_raises_on_agent_input = _fuzz("rankgym/CodeTests-v0", 30)


def test_calculate_on_huge_numbers_answers_with_a_message() -> None:
    env = built_in("rankgym/ToolUse-v0")
    task = next((t for t in env.tasks("train") if "calculate" in _tool_names(env, t)), None)
    if task is None:
        pytest.skip("no ToolUse task offers calculate")
    for expression in ("1e309", "9" * 199 + " + 1"):
        env.reset(options={"task_id": task.id})
        obs, *_ = env.step(native_call("calculate", {"expression": expression}))
        assert obs[0]["role"] == "tool" and isinstance(obs[0]["content"], str)


def _tool_names(env: Env, task: Any) -> set[str]:
    from rankgym.envs.tools import ToolBox

    return set(ToolBox(env.tools_for(task)).tools)
