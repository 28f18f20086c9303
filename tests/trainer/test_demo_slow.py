"""`rankgym demo` end to end on the real embedded model and judge (one step, tiny eval)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankgym.cli import main


@pytest.mark.slow
def test_demo_one_step_json(tmp_path: Path, capsys):
    out = tmp_path / "demo"
    rc = main(
        [
            "demo",
            "--steps",
            "1",
            "--eval-tasks",
            "2",
            "--eval-samples",
            "1",
            "--out",
            str(out),
            "--json",
            "-q",
        ]  # fmt: skip
    )
    assert rc == 0
    s = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("store", "adapter", "steps", "reward", "base_success", "trained_success", "base_ci", "trained_ci"):  # fmt: skip
        assert key in s, key
    assert s["steps"] == 1 and s["reward"] == "judge+verifiable" and s["n"] == 2
    assert Path(s["store"]).is_file() and (Path(s["adapter"]) / "adapter_config.json").is_file()
    from rankgym.store import Store

    store = Store(s["store"], readonly=True)
    (row,) = store.steps(s["run_id"])
    assert row["metrics"]["judge_calls"] >= 1  # the embedded judge really ran
    assert row["metrics"]["groups"] == 4
