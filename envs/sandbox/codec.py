"""The typed value codec shared by the sandbox's supervisor (in the child) and its caller.

Only exact builtin types cross the process boundary, as JSON with their type names; the
decoder rebuilds plain builtins and nothing else, so no object the candidate made, and no
method it defined (``__eq__``, ``__bool__``, ``__hash__``...), ever reaches the grader. Stdlib
only: the supervisor imports this file by path. Also here: the length-prefixed JSON frames the
supervisor reads and writes on its stdin/stdout.
"""

from __future__ import annotations

import json
import os
import struct
import time
from typing import Any, cast

MAX_DEPTH = 40
MAX_ITEMS = 100_000
MAX_INT_DIGITS = 4000
DECODE_SECONDS = 2.0
"""Wall time one run's values may take to decode in the grader (see ``DecodeBudget``)."""
SAME_HASH = 8
"""Distinct hashable values one hash may stand for in one run's values."""


class CodecError(ValueError):
    """A value that cannot be encoded or a message that is not a valid encoding."""


def encode(value: object, depth: int = 0, budget: list[int] | None = None) -> dict[str, Any]:
    """A JSON-able, typed encoding of a value made of Python builtins.

    ``None``, ``bool``, ``int``, ``float`` (nan/inf included), ``complex``, ``str``, ``bytes``,
    ``list``, ``tuple``, ``dict``, ``set`` and ``frozenset`` keep their exact type; anything
    else (a subclass included) becomes ``{"t": "opaque", "type": name}``, which equals nothing.
    """
    budget = budget if budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise CodecError("value too large or too deeply nested")
    t = type(value)
    if value is None:
        return {"t": "none"}
    if t is bool:
        return {"t": "bool", "v": value}
    if t is int:
        s = int.__repr__(value)
        if len(s) > MAX_INT_DIGITS:
            raise CodecError("int too large")
        return {"t": "int", "v": s}
    if t is float:
        return {"t": "float", "v": float.__repr__(value)}
    if t is complex:
        z = cast(complex, value)
        return {"t": "complex", "v": [float.__repr__(z.real), float.__repr__(z.imag)]}
    if t is str:
        return {"t": "str", "v": str.__str__(value)}
    if t is bytes:
        return {"t": "bytes", "v": bytes.hex(cast(bytes, value))}
    if t in (list, tuple, set, frozenset):  # exact builtin types: iteration cannot be patched
        items = cast("list[object]", value)
        return {"t": t.__name__, "v": [encode(x, depth + 1, budget) for x in items]}
    if t is dict:
        pairs = dict.items(cast("dict[object, object]", value))
        return {
            "t": "dict",
            "v": [[encode(k, depth + 1, budget), encode(v, depth + 1, budget)] for k, v in pairs],
        }
    return {"t": "opaque", "type": str(getattr(t, "__name__", "?"))[:100]}


class Opaque:
    """A returned value of a non-builtin type: equal to nothing, not even itself."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __eq__(self, other: object) -> bool:
        return False

    def __ne__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __bool__(self) -> bool:  # an opaque value is never a truthy "pass"
        return False

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


class CodecOverload(CodecError):
    """Decoding a value would cost the grader more than its budget (time, or many distinct
    values sharing one hash: the input of a hash-flooding attack)."""


class DecodeBudget:
    """The work one run's values may cost the grading process when they are decoded.

    Shared by every value of a run: at most ``items`` encoded items, ``seconds`` of wall time,
    and at most ``same_hash`` distinct hashable values (numbers, tuples, frozensets; str and
    bytes hashes are salted per process) with one hash. That last bound makes every set or
    dict built from the values, here or later by a check (``set(answer)``), cost linear time:
    ints ``k * (2**61 - 1)`` all hash to 0, and 60,000 of them in one set took the grader
    100 s. Going over raises :class:`CodecOverload`.
    """

    __slots__ = ("by_hash", "deadline", "items", "same_hash")

    def __init__(
        self, items: int = MAX_ITEMS, seconds: float = DECODE_SECONDS, same_hash: int = SAME_HASH
    ) -> None:
        self.items, self.same_hash = items, same_hash
        self.deadline = time.monotonic() + seconds
        self.by_hash: dict[int, list[Any]] = {}

    def spend(self) -> None:
        self.items -= 1
        if self.items < 0:
            raise CodecError("encoded value too large or too deeply nested")
        if time.monotonic() > self.deadline:
            raise CodecOverload("decoding the values took longer than the grader allows")

    def admit(self, value: Any) -> Any:
        """``value``, once it is known not to be one too many distinct values of its hash."""
        if type(value) in (str, bytes, bool) or value is None:
            return value
        try:
            h = hash(value)
        except TypeError:  # a tuple holding a list: never a set member or a dict key
            return value
        seen = self.by_hash.setdefault(h, [])
        if any(v == value for v in seen):
            return value
        if len(seen) >= self.same_hash:
            raise CodecOverload(
                f"more than {self.same_hash} distinct values share one hash (hash flooding)"
            )
        seen.append(value)
        return value


def decode(obj: Any, depth: int = 0, budget: DecodeBudget | None = None) -> Any:
    """The value an ``encode`` result stands for; raises CodecError on anything else, and
    :class:`CodecOverload` when ``budget`` (default: a fresh :class:`DecodeBudget`) runs out."""
    budget = budget if budget is not None else DecodeBudget()
    budget.spend()
    if depth > MAX_DEPTH:
        raise CodecError("encoded value too large or too deeply nested")
    if type(obj) is not dict or type(obj.get("t")) is not str:
        raise CodecError("not a typed value")
    t, v = obj["t"], obj.get("v")
    try:
        if t == "none":
            return None
        if t == "bool" and type(v) is bool:
            return v
        if t == "int" and type(v) is str and len(v) <= MAX_INT_DIGITS + 1:
            return budget.admit(int(v))
        if t == "float" and type(v) is str and len(v) < 40:
            return budget.admit(float(v))
        if t == "complex" and type(v) is list and len(v) == 2:
            return budget.admit(complex(float(v[0]), float(v[1])))
        if t == "str" and type(v) is str:
            return v
        if t == "bytes" and type(v) is str:
            return bytes.fromhex(v)
        if t in ("list", "tuple", "set", "frozenset") and type(v) is list:
            items = [decode(x, depth + 1, budget) for x in v]
            kind = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[t]
            return budget.admit(kind(items)) if t in ("tuple", "frozenset") else kind(items)
        if t == "dict" and type(v) is list:
            pairs = []
            for pair in v:
                if type(pair) is not list or len(pair) != 2:
                    raise CodecError("bad dict pair")
                pairs.append(
                    (decode(pair[0], depth + 1, budget), decode(pair[1], depth + 1, budget))
                )
            return dict(pairs)
        if t == "opaque":
            return Opaque(str(obj.get("type", "?"))[:100])
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, CodecError):
            raise
        raise CodecError(f"bad {t} value: {e}") from None
    raise CodecError(f"bad typed value of kind {t!r}")


# ---- frames: 8-byte big-endian length, then JSON ----------------------------------------------


def read_frame(fd: int) -> Any:
    """One length-prefixed JSON message, or None at end of input."""
    head = _read_exact(fd, 8)
    if head is None:
        return None
    body = _read_exact(fd, struct.unpack(">Q", head)[0])
    return None if body is None else json.loads(body.decode("utf-8"))


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def write_frame(fd: int, obj: Any) -> None:
    """Write one length-prefixed JSON message (all of it)."""
    data = json.dumps(obj).encode("utf-8")
    data = struct.pack(">Q", len(data)) + data
    while data:
        data = data[os.write(fd, data) :]
