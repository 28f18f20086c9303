"""The text tool-call protocol: tool calls written as text by models without native tool calling.

The documented form (docs/envs.md) is one JSON object per call inside ``<tool_call>`` tags::

    <tool_call>{"name": "calculate", "arguments": {"expression": "7 + 9"}}</tool_call>

The parser is lenient in what it *accepts*, because small models rarely write the exact form:

- several ``<tool_call>`` blocks in one message, or a JSON list of calls inside one block;
- a missing closing tag at the very end of the message (generation stopped at the stop token);
- code fences (```` ```json ... ``` ````) inside or instead of the tags;
- when there are no tags: a bare JSON object with ``name`` and ``arguments`` anywhere in the text;
- key aliases: ``tool``/``function`` for ``name``; ``parameters``/``args``/``input`` for
  ``arguments``; ``{"function": {"name": ..., "arguments": ...}}`` (the OpenAI shape);
  arguments given as a JSON *string* (double-encoded);
- Python-style literals: single quotes, ``True``/``None``, trailing commas (parsed with
  ``ast.literal_eval``, which evaluates literals only, never code);
- inside tags only: a keyword call such as ``calculate(expression="7 + 9")``.

What it does not do: it never executes anything, and it does not check tool names or argument
types (``rankgym.envs.tools.Tool.call`` does that, strictly, before running a tool). A bare JSON
object needs both a name and an arguments key to count as a call, so ordinary JSON in a final
answer is not mistaken for a call; positional arguments are not accepted.

Call ids are deterministic (``call_0``, ``call_1``, ...) so that the env and a rollout driver
that both parse the same text agree on the ids.

Hostile text is bounded: every function here runs in time linear in the length of the text,
and none raises on any string. Python-literal parsing (``ast``) only sees blocks of at most
``AST_MAX_CHARS`` characters nested at most ``AST_MAX_DEPTH`` brackets deep (CPython's parser
overflows its stack on deeper input: ``f(x=`` + 3,000 ``-`` + ``1)`` raised RecursionError,
100,000 of them MemoryError); anything beyond is read as JSON only, or reported as unreadable.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from rankgym.types import assistant_call  # core since issue 27; still importable from here

__all__ = [
    "ParsedText",
    "assistant_call",
    "parse_text",
    "parse_tool_calls",
    "has_tool_call_markup",
    "protocol_prompt",
    "loads_lenient",
]

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
_TAG_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
AST_MAX_CHARS = 20_000
"""Longest block handed to ``ast`` (Python-literal and keyword-call forms); JSON has no cap."""
AST_MAX_DEPTH = 40
"""Deepest bracket nesting handed to ``ast``; real tool arguments are a few levels deep."""
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input", "kwargs")


@dataclass
class ParsedText:
    """What ``parse_text`` found in one assistant message.

    ``tool_calls`` are OpenAI-format dicts; ``content`` is the text with the call markup removed;
    ``errors`` describe ``<tool_call>`` blocks that were present but could not be read.
    """

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def has_tool_call_markup(text: str) -> bool:
    """True if the text contains a ``<tool_call>`` tag (well-formed or not)."""
    return _OPEN in text.lower()


def parse_tool_calls(text: str) -> list[dict[str, Any]]:
    """Parse tool calls written as text into OpenAI tool-call dicts.

    Returns ``[{"id": "call_0", "type": "function", "function": {"name": str,
    "arguments": json-string}}, ...]``, in order of appearance; ``[]`` when there is none.
    Never raises on any string input.
    """
    return parse_text(text).tool_calls


def parse_text(text: str) -> ParsedText:
    """Parse an assistant message's text: tool calls, leftover content and parse errors."""
    if not isinstance(text, str) or not text:
        return ParsedText(content=text if isinstance(text, str) else "")
    raw: list[dict[str, Any]] = []
    errors: list[str] = []
    if has_tool_call_markup(text):
        for match in _TAG_RE.finditer(text):
            body = match.group(1).strip()
            found = _calls_from_block(body, allow_python_call=True)
            if found:
                raw.extend(found)
            else:
                snippet = body[:80] + ("..." if len(body) > 80 else "")
                errors.append(f"could not read the tool call {snippet!r}")
        content = _TAG_RE.sub("", text).strip()
    else:
        spans: list[tuple[int, int]] = []
        for start, end in _json_object_spans(text):
            found = _calls_from_obj(loads_lenient(text[start:end]), require_args=True)
            if found:
                raw.extend(found)
                spans.append((start, end))
        content = _cut(text, spans)
        content = _FENCE_RE.sub(lambda m: m.group(0) if m.group(1).strip() else "", content)
        content = content.strip() if spans else text
    calls: list[dict[str, Any]] = []
    for c in raw:
        try:
            encoded = json.dumps(c["arguments"], ensure_ascii=False)
        except (ValueError, TypeError, RecursionError):
            errors.append(f"the arguments of {c['name'][:80]!r} are nested too deeply")
            continue
        calls.append(
            {
                "id": f"call_{len(calls)}",
                "type": "function",
                "function": {"name": c["name"], "arguments": encoded},
            }
        )
    return ParsedText(content=content, tool_calls=calls, errors=errors)


def protocol_prompt(tools: list[dict[str, Any]]) -> str:
    """Instructions for the text protocol plus a compact list of the tools, for a system prompt.

    ``tools`` are OpenAI function schemas (``{"type": "function", "function": {...}}``).
    Returns ``""`` for an empty tool list.
    """
    if not tools:
        return ""
    lines = [
        "You can call tools. To call one, write:",
        '<tool_call>{"name": "TOOL_NAME", "arguments": {"ARG": VALUE}}</tool_call>',
        "The result comes back in the next message. A reply without a tool call is your final "
        "answer.",
        "Tools:",
    ]
    for schema in tools:
        fn = schema.get("function", schema)
        props = fn.get("parameters", {}).get("properties", {})
        args = ", ".join(f"{k}: {_type_name(v)}" for k, v in props.items())
        desc = (fn.get("description") or "").strip().split("\n")[0]
        lines.append(f"- {fn['name']}({args}): {desc}".rstrip(": "))
    return "\n".join(lines)


def _type_name(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "|".join(json.dumps(v) for v in prop["enum"])
    if "anyOf" in prop:
        return "|".join(_type_name(p) for p in prop["anyOf"])
    t = prop.get("type", "any")
    if t == "array":
        return f"list[{_type_name(prop.get('items', {}))}]"
    return str(t)


# --------------------------------------------------------------------------------------------
# Reading one block / one object


def _calls_from_block(body: str, allow_python_call: bool) -> list[dict[str, Any]]:
    fenced = _FENCE_RE.search(body)
    if fenced and fenced.group(1).strip():
        body = fenced.group(1).strip()
    obj = loads_lenient(body)
    if obj is None:
        # Text around the JSON inside the tag ("Calling: {...}"): take the first object.
        for start, end in _json_object_spans(body):
            obj = loads_lenient(body[start:end])
            if obj is not None:
                break
    if obj is not None:
        found = _calls_from_obj(obj, require_args=False)
        if found:
            return found
    if allow_python_call:
        call = _python_call(body)
        if call:
            return [call]
    return []


def _calls_from_obj(obj: Any, require_args: bool, depth: int = 0) -> list[dict[str, Any]]:
    """Calls in a decoded object: a call, a list of calls, or the OpenAI ``function`` shape.

    Lists and ``function`` wrappers are followed 4 levels deep at most (deeper is no call).
    """
    if depth > 4:
        return []
    if isinstance(obj, list):
        out: list[dict[str, Any]] = []
        for item in obj:
            out.extend(_calls_from_obj(item, require_args, depth + 1))
        return out
    if not isinstance(obj, dict):
        return []
    if "function" in obj and isinstance(obj["function"], dict):  # OpenAI shape
        return _calls_from_obj(obj["function"], require_args, depth + 1)
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if not name or not name.strip():
        return []
    arg_key = next((k for k in _ARG_KEYS if k in obj), None)
    if arg_key is None:
        if require_args:
            return []
        args: Any = {}
    else:
        args = obj[arg_key]
    if isinstance(args, str):
        decoded = loads_lenient(args) if args.strip() else {}
        args = decoded if isinstance(decoded, dict) else None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return []
    return [{"name": name.strip(), "arguments": args}]


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the given sorted, disjoint ``(start, end)`` spans (one pass)."""
    pieces, pos = [], 0
    for start, end in spans:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def _ast_safe(text: str) -> bool:
    """True when ``text`` is small and shallow enough for ``ast`` not to blow CPython's stack.

    Counts bracket depth and runs of unary operators (``- - - 1`` nests like brackets); both
    in one linear pass. Quotes are not tracked, so brackets inside strings count too: that
    only makes the check stricter.
    """
    if len(text) > AST_MAX_CHARS:
        return False
    depth = unary = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            if depth > AST_MAX_DEPTH:
                return False
        elif ch in ")]}":
            depth = max(0, depth - 1)
        if ch in "-+~":
            unary += 1
            if unary > AST_MAX_DEPTH:
                return False
        elif not ch.isspace():
            unary = 0
    return True


def _literal_eval(text: str) -> Any:
    """``ast.literal_eval`` that returns ``_FAIL`` instead of raising (see ``_ast_safe``)."""
    if not _ast_safe(text):
        return _FAIL
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _FAIL


_FAIL = object()


def _python_call(body: str) -> dict[str, Any] | None:
    """``name(key=literal, ...)`` -> call dict; anything else (positional args, code) -> None."""
    body = body.strip()
    if not _ast_safe(body):
        return None
    try:
        node = ast.parse(body, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
        return None
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            return None
        try:
            args[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    return {"name": node.func.id, "arguments": args}


def loads_lenient(text: str) -> Any:
    """JSON, else a Python literal (single quotes, True/None), else JSON-ish fixed up; or None."""
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    fixed = _fix_jsonish(text)
    for candidate in (text, fixed):
        value = _literal_eval(candidate)
        if isinstance(value, dict | list):
            return value
    try:
        return json.loads(fixed)
    except (ValueError, RecursionError):
        return None


def _fix_jsonish(text: str) -> str:
    """Outside string literals: true/false/null -> Python names, trailing commas dropped."""
    out: list[str] = []
    i, n = 0, len(text)
    words = {"true": "True", "false": "False", "null": "None"}
    while i < n:
        ch = text[i]
        if ch in "\"'":
            j = _string_end(text, i)
            out.append(text[i:j])
            i = j
            continue
        if ch.isalpha():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append(words.get(word, word))
            i = j
            continue
        if ch == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] in "}]":
                i += 1
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal that opens at ``start`` (or len(text))."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return len(text)


def _json_object_spans(text: str) -> list[tuple[int, int]]:
    """Top-level balanced ``{...}`` spans, skipping braces inside string literals."""
    spans: list[tuple[int, int]] = []
    depth, start, i, n = 0, -1, 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'" and depth > 0:  # prose quotes/apostrophes outside objects are ignored
            i = _string_end(text, i)
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
        i += 1
    return spans
