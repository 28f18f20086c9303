"""The typed hand-offs say what the dicts really hold: ``StepInfo``/``ResetInfo`` name exactly
the keys ``step``/``reset`` return, ``PresentationRecord`` the keys a ``Presentation`` stores,
and the docs' typed env example runs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import NotRequired, get_origin, get_type_hints

from rankgym.envs.base import ResetInfo, StepInfo
from rankgym.envs.tooluse import ToolUseEnv
from rankgym.judges.record import Presentation
from rankgym.types import PresentationRecord

DOCS = Path(__file__).resolve().parents[2] / "docs" / "envs.md"


def _all(td: type) -> set[str]:
    return set(get_type_hints(td))


def _required(td: type) -> set[str]:
    """Keys not marked NotRequired (read from the hints: with ``from __future__ import
    annotations`` Python 3.11's ``__required_keys__`` cannot see the marks)."""
    hints = get_type_hints(td, include_extras=True)
    return {k for k, v in hints.items() if get_origin(v) is not NotRequired}


def test_step_info_names_every_key_step_returns_and_marks_the_last_step_ones_optional() -> None:
    env = ToolUseEnv()
    _, reset_info = env.reset(seed=0)
    assert set(reset_info) == _all(ResetInfo) == _required(ResetInfo)
    seen: list[set[str]] = []
    done = False
    while not done:
        _, _, term, trunc, info = env.step("I do not know.")
        seen.append(set(info))
        done = term or trunc
    assert all(_required(StepInfo) <= keys <= _all(StepInfo) for keys in seen)
    assert "final_answer" in seen[-1]
    assert _all(StepInfo) - _required(StepInfo) == {"final_answer", "env_error"}


def test_a_turn_that_raises_still_returns_a_step_info() -> None:
    env = ToolUseEnv()
    env.reset(seed=0)
    env.state.tools = None  # type: ignore[assignment]  # the env's own state is broken
    call = {"id": "c0", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    _, _, _, _, info = env.step({"role": "assistant", "content": None, "tool_calls": [call]})
    assert _required(StepInfo) <= set(info) <= _all(StepInfo) and "env_error" in info


def test_presentation_record_names_the_fields_a_presentation_stores() -> None:
    fields = {f.name for f in dataclasses.fields(Presentation)}
    assert _all(PresentationRecord) == fields
    stored = Presentation(order=["a"]).to_dict()
    assert _required(PresentationRecord) - {"service_s", "queue_s"} <= set(stored)
    assert set(stored) <= fields
    hints = get_type_hints(PresentationRecord)
    assert hints["scores"] == dict[str, float] and hints["order"] == list[str]


def test_the_docs_typed_env_example_runs(capsys) -> None:
    doc = DOCS.read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "Env[WordTask]" in b)
    exec(compile(block, "docs/envs.md", "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out.strip() == "1.0 1 True"
