"""``rankgym eval --device``: the adapter is evaluated on the device asked for, or refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankgym.cli import main


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="checks the refusal on a machine without GPU"
)
def test_eval_on_a_gpu_this_machine_lacks_is_refused_in_one_line(tmp_path: Path, capsys):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": None}))
    (tmp_path / "meta.json").write_text(json.dumps({"env": {"id": "rankgym/ToolUse-v0"}}))
    assert main(["eval", "--adapter", str(tmp_path), "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--device" in err and "'cuda'" in err
    assert "Traceback" not in err
