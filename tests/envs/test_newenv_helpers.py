"""The `rankgym new-env` scaffold writes its oracle and answer tool with the helpers the sample
package uses (``assistant_call``, ``@tool(terminal=True)``), not raw message dicts (issue 25)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from rankgym.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "example_env_package"


def test_the_scaffold_uses_the_helpers_the_sample_uses_and_its_oracle_scores_1(
    tmp_path: Path, monkeypatch
) -> None:
    assert main(["new-env", "vowelz", "--dir", str(tmp_path), "-q"]) == 0
    code = (tmp_path / "vowelz" / "vowelz" / "env.py").read_text()
    sample = (SAMPLE / "rankgym_reverse" / "env.py").read_text()
    for helper in ("from rankgym.envs.toolcalls import assistant_call", "@tool(terminal=True)"):
        assert helper in code and helper in sample
    assert '"tool_calls"' not in code and "json.dumps" not in code  # no hand-built messages

    monkeypatch.syspath_prepend(str(tmp_path / "vowelz"))
    env_mod = importlib.import_module("vowelz.env")
    try:
        env = env_mod.VowelzEnv()
        for split in ("train", "test"):
            for task in env.tasks(split):
                env.reset(options={"task_id": task.id})
                for message in env.oracle(task):
                    _, _, terminated, truncated, info = env.step(message)
                assert terminated and not truncated
                assert info["verifiable_reward"] == 1.0, task.id
    finally:
        for name in [m for m in sys.modules if m == "vowelz" or m.startswith("vowelz.")]:
            del sys.modules[name]
