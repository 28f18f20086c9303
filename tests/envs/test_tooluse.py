"""rankgym/ToolUse-v0: task source, answer checker, reward, oracle."""

from __future__ import annotations

from collections import Counter

import gymnasium
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rankgym.envs  # noqa: F401  (registers the built-ins)
from rankgym.envs.tooluse import (
    TOOL_FAMILIES,
    ToolUseEnv,
    calculate,
    check_answer,
    convert_units,
    generate_tasks,
    is_spam,
    lookup,
)
from rankgym.envs.tooluse.answers import SPAM_NUMBERS
from rankgym.types import content_hash

# Pinned so that any change to the task set is deliberate (and bumps the env version).
TASKS_HASH = "e6680cd5d12540b5"


@pytest.fixture(scope="module")
def env() -> ToolUseEnv:
    return gymnasium.make("rankgym/ToolUse-v0").unwrapped


def test_task_source_size_families_levels_and_split(env):
    tasks = generate_tasks()
    assert len(tasks) >= 500
    assert len({t.id for t in tasks}) == len(tasks)
    assert {t.family for t in tasks} == set(TOOL_FAMILIES) and len(TOOL_FAMILIES) >= 5
    assert Counter(t.difficulty for t in tasks).keys() == {"easy", "medium", "hard"}
    train, test, judge = env.tasks("train"), env.tasks("test"), env.tasks("judge")
    assert (
        len(train) + len(test) + len(judge) == len(tasks) and 0.15 < len(test) / len(tasks) < 0.25
    )
    assert not {t.id for t in train} & {t.id for t in test}
    assert not {t.prompt for t in train} & {t.prompt for t in test}
    assert {(t.family, t.difficulty) for t in test} == {(t.family, t.difficulty) for t in train}


def test_task_source_is_deterministic():
    a = [t.model_dump(mode="json") for t in generate_tasks()]
    generate_tasks.cache_clear()
    b = [t.model_dump(mode="json") for t in generate_tasks()]
    assert a == b
    assert content_hash(a) == TASKS_HASH, "the ToolUse task set changed: bump the env version"


def test_filters_restrict_the_pool():
    env = ToolUseEnv(difficulty="easy", families=["calc"])
    assert {(t.family, t.difficulty) for t in env.tasks("train")} == {("calc", "easy")}
    with pytest.raises(ValueError, match="difficulty"):
        ToolUseEnv(difficulty="insane")
    with pytest.raises(ValueError, match="family"):
        ToolUseEnv(families=["chess"])


@pytest.mark.parametrize("split", ["test", "train"])
def test_oracle_solves_every_task(env, split):
    solved = 0
    tasks = env.tasks(split)
    for task in tasks:
        env.reset(options={"task_id": task.id})
        for msg in env.oracle(task):
            _, reward, term, trunc, info = env.step(msg)
        solved += (
            term and not trunc and info["verifiable_reward"] == 1.0 and info["hack_signals"] == []
        )
    assert solved == len(tasks)


def test_episode_sees_only_its_family_tools(env):
    _, info = env.reset(options={"task_id": "tooluse-lookup-hard-000"})
    assert sorted(t["function"]["name"] for t in info["tools"]) == [
        "calculate",
        "list_columns",
        "lookup",
    ]
    _, info = env.reset(options={"task_id": "tooluse-dates-easy-000"})
    assert sorted(t["function"]["name"] for t in info["tools"]) == [
        "add_days",
        "day_of_week",
        "days_between",
    ]


def _easy_sum(env):
    task = next(t for t in env.tasks("train") if t.prompt.startswith("What is") and "+" in t.prompt)
    a, b = (int(x) for x in task.prompt.removeprefix("What is ").split("?")[0].split(" + "))
    return task, a, b


def test_plain_text_answer_ends_the_episode_and_is_scored(env):
    task, a, b = _easy_sum(env)
    env.reset(options={"task_id": task.id})
    new, reward, term, trunc, info = env.step(f"{a} + {b} = {a + b}")
    assert new == [] and term and not trunc and reward == 1.0 == info["verifiable_reward"]
    env.reset(options={"task_id": task.id})
    assert env.step(f"The answer is {a + b + 1}")[1] == 0.0


def test_partial_credit_for_a_well_formed_call_only(env):
    task, a, b = _easy_sum(env)
    env.reset(options={"task_id": task.id})
    env.step(
        f'<tool_call>{{"name": "calculate", "arguments": {{"expression": "{a}+{b}"}}}}</tool_call>'
    )
    assert env.step("no idea")[1] == pytest.approx(0.2)
    env.reset(options={"task_id": task.id})
    env.step(
        '<tool_call>{"name": "calculate", "arguments": {"expression": "import os"}}</tool_call>'
    )
    assert env.step("no idea")[1] == 0.0  # a failing call earns nothing
    env.reset(options={"task_id": task.id})
    for _ in range(env.max_turns):  # truncated after a good call still gets the format credit
        out = env.step(
            f'<tool_call>{{"name": "calculate", "arguments": {{"expression": "{a}"}}}}</tool_call>'
        )
    assert out[3] and out[4]["verifiable_reward"] == pytest.approx(0.2)


def test_hack_signals(env):
    task = next(t for t in env.tasks("train") if t.family == "lookup" and t.answer_type == "number")
    env.reset(options={"task_id": task.id})
    info = env.step(f"I guess {task.answer}")[4]
    assert info["verifiable_reward"] == 1.0 and info["hack_signals"] == ["correct_without_lookup"]
    task, a, b = _easy_sum(env)
    env.reset(options={"task_id": task.id})
    info = env.step("1 2 3 4 5 " + str(a + b))[4]
    assert "answer_spam" in info["hack_signals"]


@pytest.mark.parametrize(
    ("answer_type", "answer", "text", "ok"),
    [
        ("number", 16, "7 + 9 = 16", True),
        ("number", 16, "16.", True),
        ("number", 16, "It is 16, not 15", False),
        ("number", 1234.5, "Total: $1,234.50", True),
        ("number", -3, "The result is -3.", True),
        ("number", 15, "From 2024-03-15", True),  # dates split into numbers; "-15" is not negative
        ("number", 16, "<answer>16</answer> although 17 looks nice", True),
        ("number", 16, "sixteen", False),
        ("number", 274.32, "274.3200001 cm", True),
        ("number", 274.32, "274.3 cm", False),
        ("date", "2024-11-21", "It is 2024-11-21.", True),
        ("date", "2024-11-21", "2024-11-21 or 2024-11-22", False),
        ("text", "tac", "The reverse of 'cat' is 'tac'.", True),
        ("text", "tac", "The reversed word is TAC", True),
        ("text", "tac", "tac is my answer", False),
        ("text", "Friday", "It will be a **Friday**!", True),
        ("text", "nedrag tenalp", "'nedrag tenalp'", True),
        ("text", "tac", "", False),
    ],
)
def test_check_answer(env, answer_type, answer, text, ok):
    task = env.tasks("train")[0].model_copy(update={"answer_type": answer_type, "answer": answer})
    assert check_answer(task, text) is ok


def test_tools_behave():
    assert (
        calculate("(12 + 7) * 3") == 57 and calculate("7 / 2") == 3.5 and calculate("2^10") == 1024
    )
    for bad in ("__import__('os')", "x + 1", "9 ** 9 ** 9", "1/0"):
        with pytest.raises((ValueError, ZeroDivisionError)):
            calculate(bad)
    assert convert_units(1, "mile", "km") == 1.609344
    assert convert_units(212, "F", "celsius") == 100
    with pytest.raises(ValueError, match="cannot convert"):
        convert_units(1, "kg", "m")
    assert lookup("products", "  BLUE   widget ", "price") == lookup(
        "products", "blue widget", "price"
    )
    with pytest.raises(ValueError, match="columns: price, stock, category"):
        lookup("products", "blue widget", "colour")


def _task_of(env, answer_type: str, family: str | None = None, word: str = ""):
    return next(
        t
        for t in env.tasks("train")
        if t.answer_type == answer_type
        and (family is None or t.family == family)
        and word in t.prompt
    )


def test_the_issue_answer_spam_reply_is_not_rewarded(env):
    task = next(t for t in env.tasks("train") if t.answer == 3 and t.family == "calc")
    env.reset(options={"task_id": task.id})
    info = env.step("0 1 2 3 4 5 6 3")[4]
    assert info["verifiable_reward"] < 1.0 and "answer_spam" in info["hack_signals"]


@pytest.mark.parametrize(
    ("answer_type", "family", "word", "spam"),
    [
        ("number", "calc", "", "Maybe 101, 102, 103 or {answer}"),
        ("date", "dates", "", "2030-01-01 2030-01-02 {answer}"),
        ("text", "dates", "", "Monday, Tuesday, Wednesday, Thursday, {answer}"),  # weekdays
        (
            "text",
            "lookup",
            "office",
            "Lisbon Oslo Denver Nairobi Osaka Lima Dublin Austin {answer}",
        ),
        ("text", "lookup", "department", "sales, support, research, finance, design: {answer}"),
        ("text", "strings", "", "'abc' 'def' '{answer}'"),  # open text: quoted candidates
    ],
)
def test_a_reply_listing_many_candidates_is_wrong_for_every_answer_type(
    env, answer_type, family, word, spam
):
    task = _task_of(env, answer_type, family, word)
    right = str(task.answer)
    assert check_answer(task, f"The answer is {right}.") or check_answer(task, f"'{right}'")
    reply = spam.format(answer=right)
    assert not check_answer(task, reply)
    env.reset(options={"task_id": task.id})
    info = env.step(reply)[4]
    assert info["verifiable_reward"] < 1.0 and "answer_spam" in info["hack_signals"]


def test_showing_a_few_steps_of_work_is_not_spam(env):
    task = next(t for t in env.tasks("train") if t.family == "strings" and t.difficulty == "hard" and t.answer_type == "number")  # fmt: skip
    a = task.solution[0]["arguments"]["text"].replace(" ", "")
    b = task.solution[1]["arguments"]["text"].replace(" ", "")
    reply = f"{len(a)} + {len(b)} = {len(a) + len(b)}"
    assert check_answer(task, reply) and not is_spam(task, reply)


@settings(max_examples=60, deadline=None)
@given(
    extra=st.lists(
        st.integers(min_value=10**6, max_value=10**9), min_size=SPAM_NUMBERS, unique=True
    ),
    sep=st.sampled_from([" ", ", ", " or ", "\n"]),
)
def test_property_any_list_of_candidates_ending_in_the_answer_is_wrong(env, extra, sep):
    task = _task_of(env, "number", "calc")
    assert not check_answer(task, sep.join(map(str, extra)) + sep + str(task.answer))


def test_calculate_refuses_infinite_and_huge_literals():
    for bad in ("1e309", "-1e309", "9" * 199, "1e308 * 10", "10 ** 16"):
        with pytest.raises(ValueError, match="out of range"):
            calculate(bad)
    assert calculate("999999999999999") == 999999999999999
