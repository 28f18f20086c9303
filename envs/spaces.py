"""Gymnasium spaces for chat envs: lists of messages in, assistant messages (or strings) out.

``MessagesSpace`` contains every list of OpenAI-format message dicts (what ``reset`` and ``step``
return); ``AssistantActionSpace`` contains every string and every assistant message dict (what
``step`` accepts, including ``rankgym.types.Message`` objects). Strings may hold any character:
Gymnasium's ``Text`` space is not used because its default charset rejects spaces.

``sample()`` produces adversarial-ish data for ``check_env`` and fuzz tests: random unicode
text, assistant messages with tool calls to real and unknown tools, arguments that are valid
JSON, wrong types or not JSON at all, and broken ``<tool_call>`` markup.

What these spaces do not do: they are not flattenable to numpy arrays and cannot be batched by
``gymnasium.vector``; and ``contains`` checks the message *shape*, not that tool-call ids match
earlier calls.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np
from gymnasium.spaces import Space

__all__ = ["MessagesSpace", "AssistantActionSpace", "is_message", "is_assistant_action"]

ROLES = ("system", "user", "assistant", "tool")
_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name"}
_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \t\n.,;:!?'\"()[]{}<>/\\|@#$%^&*-_+=~`"
    "éüßøΩλ中文字😀\u200b"
)


def _is_tool_call(tc: Any, strict: bool) -> bool:
    if not isinstance(tc, dict):
        return False
    fn = tc.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return False
    args = fn.get("arguments")
    if strict:
        return (
            isinstance(tc.get("id"), str)
            and tc.get("type", "function") == "function"
            and isinstance(args, str)
        )
    return tc.get("id") is None or isinstance(tc.get("id"), str)


def is_message(m: Any) -> bool:
    """True for an OpenAI chat message dict as an env emits it (known keys, right types)."""
    if not isinstance(m, dict) or m.get("role") not in ROLES or not set(m) <= _MESSAGE_KEYS:
        return False
    if not (m.get("content") is None or isinstance(m.get("content"), str)):
        return False
    for key in ("tool_call_id", "name"):
        if key in m and not (m[key] is None or isinstance(m[key], str)):
            return False
    tcs = m.get("tool_calls")
    return tcs is None or (
        isinstance(tcs, list) and all(_is_tool_call(tc, strict=True) for tc in tcs)
    )


def is_assistant_action(a: Any) -> bool:
    """True for what ``Env.step`` accepts: a string, or an assistant message dict/``Message``.

    Dicts may omit ``role`` and may carry extra keys (e.g. LiteLLM's ``refusal``), which are
    ignored; ``function.arguments`` may be a JSON string, a dict or missing.
    """
    if isinstance(a, str):
        return True
    if hasattr(a, "model_dump") and getattr(a, "role", None) == "assistant":
        return True
    if not isinstance(a, dict) or a.get("role", "assistant") != "assistant":
        return False
    if not (a.get("content") is None or isinstance(a.get("content"), str)):
        return False
    tcs = a.get("tool_calls")
    return tcs is None or (
        isinstance(tcs, list) and all(_is_tool_call(tc, strict=False) for tc in tcs)
    )


_T = TypeVar("_T")


class _ChatSpace(Space[_T], Generic[_T]):
    def __init__(self, max_chars: int = 200, seed: int | np.random.Generator | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_chars = max_chars

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def _text(self, rng: np.random.Generator, max_chars: int | None = None) -> str:
        n = int(rng.integers(0, (max_chars or self.max_chars) + 1))
        idx = rng.integers(0, len(_ALPHABET), size=n)
        return "".join(_ALPHABET[i] for i in idx)

    def to_jsonable(self, sample_n: Iterable[Any]) -> list[Any]:
        return [copy.deepcopy(_plain(x)) for x in sample_n]

    def from_jsonable(self, sample_n: list[Any]) -> list[Any]:
        return copy.deepcopy(sample_n)


class MessagesSpace(_ChatSpace[list[dict[str, Any]]]):
    """Lists of OpenAI chat message dicts (possibly empty)."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(is_message(m) for m in x)

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, Any]]:
        rng = self.np_random
        out: list[dict[str, Any]] = []
        for i in range(int(rng.integers(1, 4))):
            role = ROLES[int(rng.integers(0, len(ROLES)))]
            msg: dict[str, Any] = {"role": role, "content": self._text(rng)}
            if role == "tool":
                msg["tool_call_id"] = f"call_{i}"
                msg["name"] = "tool"
            out.append(msg)
        return out

    def __repr__(self) -> str:
        return "MessagesSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessagesSpace)

    __hash__ = Space.__hash__


class AssistantActionSpace(_ChatSpace[dict[str, Any] | str]):
    """Strings and assistant message dicts; samples call ``tool_names`` and unknown tools."""

    def __init__(
        self,
        tool_names: Sequence[str] = (),
        max_chars: int = 200,
        seed: int | np.random.Generator | None = None,
    ):
        super().__init__(max_chars=max_chars, seed=seed)
        self.tool_names = tuple(tool_names)

    def contains(self, x: Any) -> bool:
        return is_assistant_action(x)

    def sample(self, mask: Any = None, probability: Any = None) -> str | dict[str, Any]:
        rng = self.np_random
        kind = int(rng.integers(0, 5))
        if kind == 0:
            return self._text(rng)
        if kind == 1:
            return {"role": "assistant", "content": self._text(rng)}
        if kind == 2:
            calls = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": self._name(rng), "arguments": self._arguments(rng)},
                }
                for i in range(int(rng.integers(1, 4)))
            ]
            content = self._text(rng, 20) if rng.random() < 0.5 else None
            return {"role": "assistant", "content": content, "tool_calls": calls}
        if kind == 3:  # the text protocol, well-formed or not
            body = json.dumps({"name": self._name(rng), "arguments": self._args_obj(rng)})
            if rng.random() < 0.3:
                body = body[: int(rng.integers(0, len(body) + 1))]
            return f"{self._text(rng, 30)}<tool_call>{body}</tool_call>"
        return {"role": "assistant", "content": "", "tool_calls": []}

    def _name(self, rng: np.random.Generator) -> str:
        if self.tool_names and rng.random() < 0.7:
            return self.tool_names[int(rng.integers(0, len(self.tool_names)))]
        return self._text(rng, 12) or "x"

    def _args_obj(self, rng: np.random.Generator) -> dict[str, Any]:
        keys = ["a", "b", "text", "value", "expression", "date", "x"]
        vals: list[Any] = [
            int(rng.integers(-1000, 1000)),
            float(rng.normal() * 1e6),
            self._text(rng, 20),
            None,
            [1, 2],
            {"k": "v"},
            True,
        ]
        return {
            keys[int(rng.integers(0, len(keys)))]: vals[int(rng.integers(0, len(vals)))]
            for _ in range(int(rng.integers(0, 4)))
        }

    def _arguments(self, rng: np.random.Generator) -> str:
        r = rng.random()
        if r < 0.6:
            return json.dumps(self._args_obj(rng))
        if r < 0.8:
            return self._text(rng, 30)  # not JSON
        return json.dumps([1, "two", None])  # JSON but not an object

    def __repr__(self) -> str:
        return f"AssistantActionSpace(tool_names={list(self.tool_names)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AssistantActionSpace) and other.tool_names == self.tool_names

    __hash__ = Space.__hash__


def _plain(x: Any) -> Any:
    return x.model_dump(mode="json", exclude_none=True) if hasattr(x, "model_dump") else x
