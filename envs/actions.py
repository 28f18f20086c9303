"""An assistant action as ``Env.step`` reads it, and what the env tells the agent back.

``step`` accepts a plain string, an OpenAI assistant dict or a ``Message``; :func:`normalise`
turns any of them into a fresh dict with only OpenAI keys (tool-call arguments as JSON
strings, malformed calls kept for the tool box to refuse). :func:`brief` and :func:`nudge` are
the texts the agent gets for an error and for an unreadable ``<tool_call>``.

What this module does not do: parse the text protocol (``rankgym.envs.toolcalls``) or run
tools (``rankgym.envs.tools``).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["assistant_with_bad_calls", "brief", "normalise", "nudge", "text_of"]


def normalise(action: Any) -> dict[str, Any]:
    """A fresh assistant dict with only OpenAI keys; arguments become JSON strings."""
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    if hasattr(action, "model_dump"):
        action = action.model_dump(mode="json", exclude_none=True)
    msg: dict[str, Any] = {"role": "assistant", "content": action.get("content")}
    calls = []
    for tc in action.get("tool_calls") or []:
        if not isinstance(tc, dict):
            tc = {}
        fn = tc["function"] if isinstance(tc.get("function"), dict) else {}
        if not isinstance(fn.get("name"), str):  # ToolBox.call tells the agent it has no name
            fn = {"name": "", "arguments": fn.get("arguments")}
        if not isinstance(tc.get("id"), str):
            tc = {**tc, "id": None}
        args = fn.get("arguments")
        if args is None:
            args = "{}"
        elif not isinstance(args, str):
            try:
                args = json.dumps(args, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):  # the tool reports it to the agent
                args = '"arguments that cannot be encoded as JSON"'
        calls.append(
            {
                "id": tc.get("id"),
                "type": "function",
                "function": {"name": fn["name"], "arguments": args},
            }
        )
    if calls:
        msg["tool_calls"] = calls
    return msg


def assistant_with_bad_calls(action: Any) -> bool:
    """An assistant message dict whose ``tool_calls`` list holds malformed calls (a name that
    is not a string, no ``function``...): the agent's mistake, told to it as a tool error."""
    return (
        isinstance(action, dict)
        and action.get("role", "assistant") == "assistant"
        and (action.get("content") is None or isinstance(action.get("content"), str))
        and isinstance(action.get("tool_calls"), list)
    )


def text_of(action: Any) -> str:
    """The text of an assistant action (a string, a dict or a ``Message``), never raising."""
    content = action if isinstance(action, str) else None
    if content is None:
        try:
            content = action.get("content") if isinstance(action, dict) else action.content
        except Exception:
            content = None
    return content if isinstance(content, str) else ""


def brief(error: BaseException) -> str:
    """``TypeName: message`` cut to 200 characters (for logs and the agent)."""
    try:
        text = str(error)
    except Exception:
        text = ""
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def nudge(errors: list[str]) -> str:
    """The user message for tool-call markup that could not be read (``errors``: why)."""
    return (
        "Your tool call could not be read: "
        + "; ".join(errors)
        + '. Write it as <tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>, '
        "or reply without a tool call to give your final answer."
    )
