"""Tools: plain typed Python functions exposed to an agent.

A tool is any function (or bound method) with type-annotated parameters and a Google-style
docstring. A parameter without a type hint is refused (``TypeError`` naming the function, when
the env builds its tools); a missing docstring is allowed (``documented`` is False, and
``rankgym envs --check`` warns). ``Tool.from_function`` reads the signature and docstring into an OpenAI function
schema; ``Tool.call`` validates the arguments against the signature with pydantic (lax mode:
``"7"`` becomes ``7`` for an ``int`` parameter, a number becomes a string for a ``str`` one;
unknown or missing arguments are errors), runs the function, and returns a ``ToolResult``.

What ``Tool.call`` never does is raise: a malformed call, a validation failure or an exception
inside the tool all come back as an ``"Error: ..."`` message for the agent (``ok=False``).
What it does not do: sandboxing, timeouts, or resource limits. A tool runs in-process with the
caller's rights; a tool that loops forever hangs the episode. Envs that run untrusted code must
do that in a separate process themselves.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from rankgym.envs.toolcalls import loads_lenient

__all__ = [
    "Tool",
    "ToolResult",
    "ToolBox",
    "tool",
    "as_tool",
    "parse_docstring",
    "require_type_hints",
]

_MARK = "__rankgym_tool__"
_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?):\s*$"
)
_ARG_RE = re.compile(r"^\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    terminal: bool = False,
) -> Any:
    """Mark a function as a tool, optionally renaming it or making it end the episode.

    Usable bare (``@tool``) or with options (``@tool(terminal=True)``). Returns the function
    unchanged (so it still works on methods); plain unmarked functions are tools too, this
    decorator only adds options. ``terminal=True``: a successful call ends the episode and its
    validated arguments become the final answer (e.g. an ``answer(text, sources)`` tool).
    """

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        target = getattr(f, "__func__", f)
        setattr(target, _MARK, {"name": name, "description": description, "terminal": terminal})
        return f

    return mark(fn) if fn is not None else mark


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call: the text the agent sees, and what happened."""

    content: str
    ok: bool
    name: str
    arguments: dict[str, Any] | None = None
    """The validated arguments (None when validation failed)."""
    value: Any = None
    """The tool's raw return value (None on error)."""
    terminal: bool = False
    """True when a terminal tool succeeded: the episode ends with ``arguments`` as the answer."""


@dataclass(frozen=True)
class Tool:
    """A callable exposed to the agent, with its OpenAI schema and argument validator."""

    name: str
    description: str
    fn: Callable[..., Any]
    parameters: dict[str, Any]
    terminal: bool = False
    max_output_chars: int = 8000
    documented: bool = True
    """False when the function had no docstring and no description was given."""
    _model: type[BaseModel] | None = field(default=None, repr=False, compare=False)
    _aliases: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        terminal: bool | None = None,
    ) -> Tool:
        """Build a tool from a typed function.

        Raises TypeError, naming the function, for ``*args``/``**kwargs`` and for a parameter
        without a type hint (it would be accepted unvalidated, as ``any``).
        """
        mark = getattr(fn, _MARK, None) or {}
        name = name or mark.get("name") or getattr(fn, "__name__", None)
        if not name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", name):
            raise TypeError(f"tool name {name!r} must match [A-Za-z_][A-Za-z0-9_.-]*")
        summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
        documented = bool(description or mark.get("description") or summary)
        description = description or mark.get("description") or summary or name
        terminal = bool(mark.get("terminal", False) if terminal is None else terminal)
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # unresolvable forward refs: fall back to Any
            hints = {}
        fields: dict[str, Any] = {}
        aliases: list[tuple[str, str]] = []
        for i, (pname, p) in enumerate(inspect.signature(fn).parameters.items()):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"tool {name!r}: *args/**kwargs are not supported")
            if p.annotation is inspect.Parameter.empty:
                require_type_hints(fn, name)
            ann = hints.get(pname, Any)
            default = ... if p.default is inspect.Parameter.empty else p.default
            key = f"p{i}"
            fields[key] = (ann, Field(default, alias=pname, description=arg_docs.get(pname)))
            aliases.append((key, pname))
        model = create_model(
            f"{name}_arguments",
            __config__=ConfigDict(extra="forbid", coerce_numbers_to_str=True),
            **fields,
        )
        params = _strip_titles(model.model_json_schema(by_alias=True))
        params.setdefault("properties", {})
        return cls(
            name=name,
            description=description,
            fn=fn,
            parameters=params,
            terminal=terminal,
            documented=documented,
            _model=model,
            _aliases=tuple(aliases),
        )

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema: ``{"type": "function", "function": {...}}`` (a new dict)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json.loads(json.dumps(self.parameters)),
            },
        }

    def validate(self, arguments: str | dict[str, Any] | None) -> dict[str, Any]:
        """Decode and validate arguments; raises ValueError with an agent-readable message.

        A string is decoded as JSON, or leniently (single quotes, trailing commas) like the
        text protocol; the decoded value must be an object.
        """
        allowed = ", ".join(a for _, a in self._aliases) or "none"
        if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
            arguments = {}
        if isinstance(arguments, str):
            decoded = loads_lenient(arguments)
            if decoded is None:
                raise ValueError(f"arguments are not valid JSON (parameters: {allowed})")
            arguments = decoded
        if not isinstance(arguments, dict):
            raise ValueError(
                f"arguments must be a JSON object, got {type(arguments).__name__} "
                f"(parameters: {allowed})"
            )
        assert self._model is not None
        try:
            parsed = self._model.model_validate(arguments)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(x) for x in err['loc']) or 'arguments'}: {err['msg']}"
                for err in e.errors()
            )
            raise ValueError(f"{problems} (parameters: {allowed})") from None
        return {alias: getattr(parsed, key) for key, alias in self._aliases}

    def call(self, arguments: str | dict[str, Any] | None) -> ToolResult:
        """Validate and run; every failure becomes an ``Error: ...`` result, never an exception."""
        try:
            args = self.validate(arguments)
        except ValueError as e:
            return ToolResult(f"Error: invalid arguments for {self.name}: {e}", False, self.name)
        except RecursionError:
            msg = f"Error: invalid arguments for {self.name}: nested too deeply"
            return ToolResult(msg, False, self.name)
        except Exception as e:  # a validator that raised something else: still the agent's input
            msg = f"Error: invalid arguments for {self.name}: {type(e).__name__}"
            return ToolResult(msg, False, self.name)
        try:
            value = self.fn(**args)
            text = self._render(value)
        except Exception as e:  # the agent sees the error; the episode goes on
            msg = _safe_str(e) or type(e).__name__
            return ToolResult(
                f"Error: {self.name} failed: {type(e).__name__}: {msg}", False, self.name, args
            )
        return ToolResult(text, True, self.name, args, value=value, terminal=self.terminal)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def _render(self, value: Any) -> str:
        if isinstance(value, str):
            text = value
        elif value is None:
            text = "OK"
        else:
            try:
                text = json.dumps(value, ensure_ascii=False, default=str)
            except Exception:  # not JSON-able, a hostile __str__, or nested too deep
                text = _safe_str(value) or f"<a {type(value).__name__} that cannot be shown>"
        if len(text) > self.max_output_chars:
            cut = len(text) - self.max_output_chars
            text = text[: self.max_output_chars] + f"\n[... {cut} more characters cut]"
        return text


def require_type_hints(fn: Callable[..., Any], name: str | None = None) -> None:
    """Raise TypeError naming ``fn`` if one of its parameters has no type hint (cheap check)."""
    name = name or getattr(fn, "__name__", repr(fn))
    for pname, p in inspect.signature(fn).parameters.items():
        if p.annotation is inspect.Parameter.empty and p.kind not in (
            p.VAR_POSITIONAL,
            p.VAR_KEYWORD,
        ):
            where = getattr(fn, "__qualname__", name)
            raise TypeError(
                f"tool {name!r} ({where}): parameter {pname!r} has no type hint; annotate "
                f"every parameter, e.g. {pname}: str"
            )


def _safe_str(obj: Any) -> str:
    """``str(obj)``, or ``""`` when that raises (deep nesting, a hostile ``__str__``)."""
    try:
        return str(obj)
    except Exception:
        return ""


def as_tool(obj: Callable[..., Any] | Tool) -> Tool:
    """A ``Tool`` from a function, bound method or an existing ``Tool``."""
    return obj if isinstance(obj, Tool) else Tool.from_function(obj)


class ToolBox:
    """The tools available in one episode, called by name from OpenAI tool-call dicts."""

    def __init__(self, tools: Iterable[Callable[..., Any] | Tool]) -> None:
        self.tools: dict[str, Tool] = {}
        for t in tools:
            t = as_tool(t)
            if t.name in self.tools:
                raise ValueError(f"two tools are named {t.name!r}")
            self.tools[t.name] = t

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of every tool (new dicts on each call)."""
        return [t.schema() for t in self.tools.values()]

    def call(self, tool_call: Any) -> ToolResult:
        """Run one OpenAI-format tool call (dict); unknown tools and bad shapes become errors."""
        fn = tool_call.get("function") if isinstance(tool_call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return ToolResult("Error: malformed tool call (no function name).", False, "")
        name = fn["name"]
        if not name.strip():
            msg = "Error: malformed tool call: no function name (give the tool's name as a string)."
            return ToolResult(msg, False, "")
        t = self.tools.get(name)
        if t is None:
            avail = ", ".join(self.tools) or "none"
            return ToolResult(
                f"Error: unknown tool {name!r}. Available tools: {avail}.", False, name
            )
        return t.call(fn.get("arguments"))


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Google-style docstring -> (description before the first section, {arg: description})."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    desc: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        m = _SECTION_RE.match(stripped)
        if m and (len(line) - len(line.lstrip())) == 0:
            section, current, arg_indent = m.group(1), None, None
            continue
        if section is None:
            desc.append(line)
        elif section in ("Args", "Arguments", "Parameters", "Params") and stripped:
            indent = len(line) - len(line.lstrip())
            am = _ARG_RE.match(stripped)
            if am and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = am.group(1)
                args[current] = am.group(3).strip()
            elif current is not None:
                args[current] = (args[current] + " " + stripped).strip()
    return "\n".join(desc).strip(), args


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's auto-generated ``title`` keys (not properties that happen to be named so)."""
    if isinstance(schema, list):
        return [_strip_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k == "title" and isinstance(v, str):
            continue
        if k in ("properties", "$defs", "definitions") and isinstance(v, dict):
            out[k] = {name: _strip_titles(sub) for name, sub in v.items()}
        else:
            out[k] = _strip_titles(v)
    return out
