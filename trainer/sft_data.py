"""SFT demonstrations from outside: the JSONL schema, its limits, and the token budget of every message.

``rankgym sft --source jsonl`` reads one chat example per line in ART's SFT format,
``{"messages": [...], "tools": [...]}`` (OpenAI chat messages and tool schemas). Each line is
validated by the pydantic models below; the first problem ends the read with one
:class:`~rankgym.errors.UserError` naming the file, the line and the field, e.g.
``d.jsonl:3: messages.1.role: must be one of system, user, assistant, tool (got 'hacker')``.

What is validated and what is refused:

- the file: at most :data:`MAX_FILE_BYTES` and :data:`MAX_EXAMPLES` examples; UTF-8 (a leading
  byte-order mark is accepted); each line at most :data:`MAX_LINE_BYTES`, JSON nested at most
  :data:`MAX_DEPTH` deep;
- a message: ``role`` one of system/user/assistant/tool; ``content`` a string (or null on an
  assistant message with tool calls), no lone surrogates; ``tool_calls`` only on assistant
  messages, each with a ``function`` whose ``name`` is a non-empty string and whose
  ``arguments`` are a JSON object (as a string, as OpenAI sends them, or as an object);
- an example: a user message before the first assistant message, at least one assistant
  message, at most :data:`MAX_MESSAGES` messages; ``tools`` a list (at most :data:`MAX_TOOLS`) of
  ``{"type": "function", "function": {"name": ...}}`` schemas.

Every source (oracle, store, JSONL) then goes through :func:`fit_conversation` before rendering:
each message's content is cut to :data:`MAX_MESSAGE_TOKENS` tokens (assistant content to
``max_completion_tokens``), so no demonstration can make a row the trainer cannot hold; the
rendered completions are cut to ``max_completion_tokens`` too (``sft.render_rows``).

What it does not do: check that a demonstration is correct or that its tool calls name the
tools it lists; cut tool-call arguments (an argument string over :data:`MAX_ARGUMENT_CHARS`
is refused instead, since a cut JSON object is no longer one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rankgym.errors import UserError

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_COMPLETION_TOKENS",
    "MAX_DEPTH",
    "MAX_EXAMPLES",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "MAX_MESSAGE_TOKENS",
    "MAX_MESSAGES",
    "MAX_TOOLS",
    "Example",
    "fit_conversation",
    "parse_line",
    "read_jsonl",
]

MAX_FILE_BYTES = 256 * 2**20
MAX_LINE_BYTES = 2**20
MAX_EXAMPLES = 200_000
MAX_DEPTH = 32
MAX_MESSAGES = 256
MAX_TOOLS = 128
MAX_ARGUMENT_CHARS = 16_384
MAX_MESSAGE_TOKENS = 2048
"""Token budget of one message's content (the rollout's prompt budget)."""
MAX_COMPLETION_TOKENS = 512
"""Default token budget of one assistant message (content and rendered completion)."""
_CHARS_PER_TOKEN = 8
"""Content is first cut to ``budget * 8`` characters, so no tokenizer sees a 50 MB string."""


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


def _text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("holds a lone surrogate (not valid Unicode text)") from None
    return value


class Function(_Strict):
    name: str = Field(min_length=1, max_length=256)
    arguments: str | dict[str, Any] = "{}"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _text(v)

    @field_validator("arguments")
    @classmethod
    def _json_object(cls, v: str | dict[str, Any]) -> str:
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        if len(text) > MAX_ARGUMENT_CHARS:
            raise ValueError(f"is {len(text)} characters; at most {MAX_ARGUMENT_CHARS}")
        try:
            parsed = json.loads(_text(text))
        except (ValueError, RecursionError):
            raise ValueError(f"must be a JSON object, got {text[:40]!r}") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"must be a JSON object, got {type(parsed).__name__}")
        return text


class ToolCall(_Strict):
    id: str | None = None
    type: Literal["function"] = "function"
    function: Function


class Message(_Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = Field(None, max_length=64)
    tool_call_id: str | None = None
    name: str | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, v: str | None) -> str | None:
        return None if v is None else _text(v)

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"tool_calls are only allowed on assistant messages (role {self.role!r})")  # fmt: skip
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content must be a string (null only on an assistant tool call)")
        return self

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content or ""}
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id or f"call_{i}", "type": "function",
                 "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for i, c in enumerate(self.tool_calls)
            ]  # fmt: skip
        for key in ("tool_call_id", "name"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


class ToolFunction(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1, max_length=256, strict=True)


class ToolSchema(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["function"] = "function"
    function: ToolFunction


class Example(_Strict):
    """One JSONL line: the conversation and the tool schemas the policy saw."""

    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    tools: list[ToolSchema] | None = Field(None, max_length=MAX_TOOLS)

    @model_validator(mode="after")
    def _turns(self) -> Example:
        roles = [m.role for m in self.messages]
        if "assistant" not in roles:
            raise ValueError("has no assistant message to learn from")
        if "user" not in roles[: roles.index("assistant")]:
            raise ValueError("needs a user message before the first assistant message")
        return self


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def _depth(text: str) -> int:
    """Deepest bracket nesting of a JSON text (strings skipped); regex speed, no recursion."""
    depth = best = 0
    for ch in _BRACKET.findall(_STRING.sub("", text)):
        if ch in "[{":
            depth += 1
            best = max(best, depth)
        else:
            depth -= 1
    return best


def _where(err: Mapping[str, Any]) -> str:
    loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("function-", "str", "dict", "list")))  # fmt: skip
    return loc or "(line)"


def parse_line(text: str, where: str) -> Example:
    """Validate one JSONL line (``where`` = ``file:line`` for the message); raises UserError."""
    if _depth(text) > MAX_DEPTH:
        raise UserError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    try:
        row = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise UserError(f"{where}: not JSON ({e})") from None
    if not isinstance(row, dict):
        raise UserError(f"{where}: must be a JSON object with a 'messages' list, got {type(row).__name__}")  # fmt: skip
    try:
        return Example.model_validate(row)
    except ValidationError as e:
        err = e.errors()[0]
        got = repr(err.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] != "value_error":  # our own messages already say what they got
            msg += f" (got {got})"
        raise UserError(f"{where}: {_where(err)}: {msg}") from None


def read_jsonl(path: str | Path) -> list[tuple[int, Example]]:
    """Every example of a JSONL file with its line number (blank lines skipped); UserError on the first bad one."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"sft.path: {str(path)!r} is not a file")
    size = p.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UserError(f"sft.path: {str(path)!r} is {size / 2**20:.0f} MiB; at most {MAX_FILE_BYTES // 2**20} MiB (split it)")  # fmt: skip
    out: list[tuple[int, Example]] = []
    with p.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            where = f"{path}:{n}"
            if len(raw) > MAX_LINE_BYTES:
                raise UserError(f"{where}: the line is {len(raw)} bytes; at most {MAX_LINE_BYTES} (shorten its messages)")  # fmt: skip
            if n == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UserError(f"{where}: not UTF-8 (byte {e.start}); save the file as UTF-8") from None  # fmt: skip
            if not text.strip():
                continue
            out.append((n, parse_line(text, where)))
            if len(out) > MAX_EXAMPLES:
                raise UserError(f"sft.path: {str(path)!r} holds more than {MAX_EXAMPLES} examples; split it")  # fmt: skip
    if not out:
        raise UserError(f"sft.path: {str(path)!r} holds no examples")
    return out


def _cut(tokenizer: Any, text: str, budget: int) -> str:
    text = text[: budget * _CHARS_PER_TOKEN]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return text if len(ids) <= budget else tokenizer.decode(ids[:budget])


def fit_conversation(
    messages: list[dict[str, Any]],
    tokenizer: Any,
    *,
    max_message_tokens: int = MAX_MESSAGE_TOKENS,
    max_completion_tokens: int = MAX_COMPLETION_TOKENS,
) -> list[dict[str, Any]]:
    """``messages`` with each string content cut to its token budget (assistant: the completion
    budget); messages within budget are returned unchanged (the same dicts)."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str) and content:
            budget = max_completion_tokens if m.get("role") == "assistant" else max_message_tokens
            cut = _cut(tokenizer, content, budget)
            if cut != content:
                m = {**m, "content": cut}
        out.append(m)
    return out
