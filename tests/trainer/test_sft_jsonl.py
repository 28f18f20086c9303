"""`rankgym sft --source jsonl`: every line validated (schema, limits, errors naming line and field),
every message cut to its token budget before rendering (issue 26)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trainer_helpers import tiny_model

from rankgym.envs.policies import TransformersPolicy
from rankgym.errors import UserError
from rankgym.trainer import sft_data
from rankgym.trainer.sft import Conversation, jsonl_conversations, render_rows
from rankgym.trainer.sft_data import MAX_COMPLETION_TOKENS, MAX_LINE_BYTES, parse_line

USER = {"role": "user", "content": "What is 2+2?"}
ANSWER = {"role": "assistant", "content": "4"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 1}'}}
    ],  # fmt: skip
}


def _write(tmp_path: Path, *rows: Any, raw: bytes = b"") -> Path:
    f = tmp_path / "d.jsonl"
    f.write_bytes(raw + b"\n".join(json.dumps(r).encode() for r in rows) + b"\n")
    return f


@pytest.mark.parametrize(
    ("messages", "tools", "field"),
    [
        ([{"role": None, "content": "x"}, ANSWER], None, "messages.0.role"),
        ([{"role": 3, "content": "x"}, ANSWER], None, "messages.0.role"),
        ([{"role": "hacker", "content": "x"}, ANSWER], None, "messages.0.role"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "x"}]}, ANSWER],
            None,
            "messages.0.content",
        ),  # fmt: skip
        ([{"role": "user", "content": {"a": 1}}, ANSWER], None, "messages.0.content"),
        ([{"role": "user", "content": 7}, ANSWER], None, "messages.0.content"),
        ([{"role": "system", "content": "s"}, ANSWER], None, "needs a user message"),
        (
            [USER, {"role": "assistant", "tool_calls": [{"id": "c"}]}],
            None,
            "messages.1.tool_calls.0.function",
        ),  # fmt: skip
        ([USER, {"role": "assistant", "tool_calls": "calc()"}], None, "messages.1.tool_calls"),
        ([USER, ANSWER], [1, "x", None], "tools.0"),
        (
            [
                USER,
                {**CALL, "tool_calls": [{"function": {"name": "calc", "arguments": "not json"}}]},
            ],
            None,
            "arguments: must be a JSON object",
        ),  # fmt: skip
        (
            [USER, {**CALL, "tool_calls": [{"function": {"name": 5, "arguments": "{}"}}]}],
            None,
            "function.name",
        ),  # fmt: skip
        ([USER, {"role": "user", "content": "no answer"}], None, "no assistant message"),
        ([{**USER, "tool_calls": CALL["tool_calls"]}, ANSWER], None, "only allowed on assistant"),
    ],
)
def test_malformed_lines_are_one_error_naming_line_and_field(
    tmp_path: Path, messages: Any, tools: Any, field: str
):
    row: dict[str, Any] = {"messages": messages}
    if tools is not None:
        row["tools"] = tools
    f = _write(tmp_path, {"messages": [USER, ANSWER]}, row)
    with pytest.raises(UserError) as e:
        jsonl_conversations(f)
    assert "d.jsonl:2: " in str(e.value) and field in str(e.value) and "\n" not in str(e.value)


def test_a_lone_surrogate_and_deep_nesting_are_refused_not_tracebacks(tmp_path: Path):
    f = tmp_path / "d.jsonl"
    f.write_text('{"messages": [{"role": "user", "content": "\\ud800"}, {"role": "assistant", "content": "x"}]}\n')  # fmt: skip
    with pytest.raises(UserError, match=r"d.jsonl:1: messages.0.content: .*lone surrogate"):
        jsonl_conversations(f)
    f.write_text('{"messages": ' + "[" * 3000 + "]" * 3000 + "}\n")
    with pytest.raises(UserError, match=r"d.jsonl:1: JSON nested deeper than"):
        jsonl_conversations(f)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path):
    f = _write(tmp_path, {"messages": [USER, ANSWER]}, raw=b"\xef\xbb\xbf")
    (conv,) = jsonl_conversations(f)
    assert conv.messages[0] == {"role": "user", "content": "What is 2+2?"}


def test_tool_calls_and_tool_schemas_come_back_in_openai_shape(tmp_path: Path):
    tool = {"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}
    row = {"messages": [USER, CALL, {"role": "tool", "tool_call_id": "c1", "content": "1"}, ANSWER], "tools": [tool]}  # fmt: skip
    (conv,) = jsonl_conversations(_write(tmp_path, row))
    assert conv.tools == [tool]
    assert conv.messages[1]["tool_calls"][0]["function"] == {"name": "calc", "arguments": '{"x": 1}'}  # fmt: skip
    assert conv.messages[2]["tool_call_id"] == "c1"


def test_a_line_over_the_size_limit_is_refused_before_parsing(tmp_path: Path):
    big = {"messages": [{"role": "user", "content": "x" * (MAX_LINE_BYTES + 10)}, ANSWER]}
    f = _write(tmp_path, {"messages": [USER, ANSWER]}, big)
    t0 = time.perf_counter()
    with pytest.raises(UserError, match=rf"d.jsonl:2: the line is \d+ bytes; at most {MAX_LINE_BYTES}"):  # fmt: skip
        jsonl_conversations(f)
    assert time.perf_counter() - t0 < 5


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(sft_data, "MAX_FILE_BYTES", 100)
    f = _write(tmp_path, *[{"messages": [USER, ANSWER]}] * 5)
    with pytest.raises(UserError, match="MiB"):
        jsonl_conversations(f)


def test_every_message_and_the_completion_are_cut_to_the_token_budget():
    model, tok = tiny_model()
    policy = TransformersPolicy(model, tok)
    long_reply = " ".join(f"word{i}" for i in range(4000))  # ~ 4k+ tokens
    long_user = "data " * 150_000  # 750 KB, under the line limit
    convs = [Conversation([{"role": "user", "content": long_user}, {"role": "assistant", "content": long_reply}], [])]  # fmt: skip
    t0 = time.perf_counter()
    (rows,) = render_rows(policy, convs)
    assert time.perf_counter() - t0 < 30
    assert sum(sum(mask) for _, mask in rows) <= MAX_COMPLETION_TOKENS
    assert max(len(ids) for ids, _ in rows) <= policy.max_prompt_tokens + MAX_COMPLETION_TOKENS


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),  # fmt: skip
    max_leaves=20,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "hacker", None, 1])},
    optional={"content": _json, "tool_calls": _json, "tool_call_id": _json, "name": _json},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=st.one_of(_json, st.fixed_dictionaries({"messages": st.lists(_message, max_size=5)}, optional={"tools": _json})))  # fmt: skip
def test_fuzzed_lines_parse_or_fail_with_a_one_line_user_error(row: Any):
    try:
        ex = parse_line(json.dumps(row), "f:1")
    except UserError as e:
        assert str(e).startswith("f:1: ") and "\n" not in str(e)
        return
    msgs = [m.to_openai() for m in ex.messages]
    assert all(isinstance(m["content"], str) for m in msgs)
    assert any(m["role"] == "assistant" for m in msgs)


def test_a_bad_jsonl_line_fails_sft_and_train_before_the_model_loads_or_run_json(
    tmp_path: Path, capsys
):
    from rankgym.cli import main

    bad = _write(tmp_path, {"messages": [{"role": "hacker", "content": "x"}, ANSWER]})
    assert main(["sft", "--out", str(tmp_path / "o"), "--source", "jsonl", "--path", str(bad), "-q"]) == 2  # fmt: skip
    assert "d.jsonl:1: messages.0.role" in capsys.readouterr().err
    cfg = tmp_path / "t.toml"
    cfg.write_text(f'out_dir = "{tmp_path / "run"}"\n[sft]\nsource = "jsonl"\npath = "{bad}"\n')
    assert main(["train", "--config", str(cfg), "-q"]) == 2
    assert "d.jsonl:1: messages.0.role" in capsys.readouterr().err
    assert not (tmp_path / "run" / "run.json").exists() and not (tmp_path / "o").exists()


def _nesting(v: Any) -> int:
    if isinstance(v, dict):
        return 1 + max((_nesting(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_nesting(x) for x in v), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_the_nesting_limit_measures_json_depth_exactly(value: Any):
    from rankgym.trainer.sft_data import _depth

    assert _depth(json.dumps(value)) == _nesting(value)
