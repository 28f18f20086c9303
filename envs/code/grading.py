"""Grading code submissions from the values they return, in the grading process.

The sandboxed candidate only ever computes ``entry_point(*args)`` for a list of argument tuples
and sends back typed values (``rankgym.envs.sandbox``). Everything that decides pass or fail
happens here, in the trusted process, on plain builtins:

- ``CaseSuite`` (our tasks, and visible tests): expected outcomes are the canonical solution's
  return values (or the exception type it raises), compared with ``same`` (exact types, floats
  within 1e-9, ``bool`` is not ``int``).
- ``CheckSuite`` (HumanEval hidden tests): the problem's ``check(candidate)`` is recorded once
  against the canonical solution (which calls, with which arguments), then *replayed* with a
  ``candidate`` that returns the candidate's recorded values. Each ``assert`` is rewritten to
  record pass/fail and go on, so partial credit is per assert; an assert whose test is a
  constant (``assert True``) is dropped. ``random`` is seeded around each run, because some
  checks draw unseeded inputs. A call whose arguments differ from the recording (a check whose
  flow depends on the candidate's answers) fails.

Neither the expected values nor the check code reach the sandbox; printed text, exit codes and
patched ``assert``/unittest in the candidate's process cannot change a value computed here, and
an object with an always-true ``__eq__`` arrives as an ``Opaque`` that equals nothing.

What it does not do: no per-call timeout (one slow call can use up the run's wall clock, and the
calls after it fail); checks are trusted code from the wheel and run in this process.
"""

from __future__ import annotations

import ast
import copy
import math
import random
import threading
from collections.abc import Sequence
from functools import cached_property
from typing import Any, Protocol

from rankgym.envs.sandbox import CallOutcome, Opaque, encode

__all__ = ["CaseSuite", "CheckSuite", "Expected", "Suite", "same"]

_RANDOM_LOCK = threading.Lock()
_SEED = 1234


class Suite(Protocol):
    """A set of tests: the calls to make in the sandbox, and how to grade their outcomes."""

    @property
    def calls(self) -> list[tuple]: ...
    @property
    def n_units(self) -> int: ...
    def grade(self, outcomes: Sequence[CallOutcome]) -> list[bool]: ...
    def describe(self) -> list[str]: ...


class Expected:
    """What a call should do: return ``value``, or raise an exception named ``raises``."""

    __slots__ = ("raises", "value")

    def __init__(self, value: Any = None, raises: str | None = None) -> None:
        self.value, self.raises = value, raises

    def matches(self, o: CallOutcome) -> bool:
        if self.raises is not None:
            return o.ran and not o.ok and (o.error or "").startswith(self.raises + ":")
        return o.ran and o.ok and same(o.value, self.value)

    def __repr__(self) -> str:
        return f"raises {self.raises}" if self.raises else repr(self.value)


def same(got: Any, want: Any) -> bool:
    """Typed equality of builtins: same types all the way down (int and float may meet, within
    1e-9; ``bool`` never equals ``int``); an ``Opaque`` equals nothing."""
    if isinstance(got, Opaque) or isinstance(want, Opaque):
        return False
    num = (int, float)
    if type(got) in num and type(want) in num and (float in (type(got), type(want))):
        try:
            if math.isnan(got) and math.isnan(want):
                return True
            return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
        except OverflowError:  # an int beyond any float: never within 1e-9 of a float
            return False
    if type(got) is not type(want):
        return False
    if type(want) in (list, tuple):
        return len(got) == len(want) and all(same(a, b) for a, b in zip(got, want, strict=True))
    if type(want) is dict:
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    return bool(got == want)


def _run_trusted(source: str, name: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": f"rankgym_canonical_{name}"}
    exec(compile(source, f"<canonical {name}>", "exec"), ns)  # noqa: S102 - trusted task data
    return ns


class CaseSuite:
    """Calls with expected outcomes taken from the canonical solution (computed on first use)."""

    def __init__(self, canonical: str, entry_point: str, calls: Sequence[tuple]) -> None:
        self.canonical, self.entry_point = canonical, entry_point
        self._calls = [tuple(c) for c in calls]

    @property
    def calls(self) -> list[tuple]:
        return [copy.deepcopy(c) for c in self._calls]

    @property
    def n_units(self) -> int:
        return len(self._calls)

    @cached_property
    def expected(self) -> list[Expected]:
        fn = _run_trusted(self.canonical, self.entry_point)[self.entry_point]
        out = []
        for args in self._calls:
            try:
                value = fn(*copy.deepcopy(args))
                encode(value)  # the candidate's answer must be comparable with it
                out.append(Expected(value))
            except Exception as e:  # noqa: BLE001 - the canonical raising is the expected outcome
                out.append(Expected(raises=type(e).__name__))
        return out

    def grade(self, outcomes: Sequence[CallOutcome]) -> list[bool]:
        return [e.matches(o) for e, o in zip(self.expected, outcomes, strict=True)]

    def describe(self) -> list[str]:
        out = []
        for args, exp in zip(self._calls, self.expected, strict=True):
            call = f"{self.entry_point}({', '.join(repr(a) for a in args)})"
            out.append(f"{call} raises {exp.raises}" if exp.raises else f"{call} == {exp!r}")
        return out


class _Unit(ast.NodeTransformer):
    """``assert X`` -> ``try: ok = bool(X) except Exception: ok = False; __rg_unit(ok)``."""

    def visit_Assert(self, node: ast.Assert) -> Any:
        if isinstance(node.test, ast.Constant):
            return ast.Pass()
        body = ast.parse(
            "try:\n    __rg_ok = bool(__rg_x)\nexcept Exception:\n    __rg_ok = False\n"
            "__rg_unit(__rg_ok)\n"
        ).body
        body[0].body[0].value.args[0] = node.test  # type: ignore[attr-defined]
        return [ast.copy_location(n, node) for n in body]


class _Diverged(Exception):
    pass


class CandidateError(Exception):
    """The candidate's call raised (in the sandbox) or never returned."""


class CheckSuite:
    """HumanEval's ``check(candidate)``, replayed against recorded candidate values."""

    def __init__(self, canonical: str, test: str, entry_point: str) -> None:
        self.canonical, self.test, self.entry_point = canonical, test, entry_point

    @cached_property
    def _code(self) -> tuple[Any, Any]:
        tree = ast.fix_missing_locations(_Unit().visit(ast.parse(self.test)))
        return (
            compile(self.canonical, f"<canonical {self.entry_point}>", "exec"),
            compile(tree, f"<check {self.entry_point}>", "exec"),
        )

    def _run_check(self, candidate: Any) -> list[bool]:
        units: list[bool] = []
        ns: dict[str, Any] = {"__name__": f"rankgym_check_{self.entry_point}"}
        exec(self._code[0], ns)  # noqa: S102 - trusted: the canonical solution and its helpers
        exec(self._code[1], ns)  # noqa: S102 - trusted: HumanEval's own check
        ns["__rg_unit"] = units.append
        with _RANDOM_LOCK:
            state = random.getstate()
            random.seed(_SEED)
            try:
                ns["check"](candidate)
            except Exception:  # noqa: BLE001, S110 - the asserts after this one count as failed
                pass
            finally:
                random.setstate(state)
        return units

    @cached_property
    def _recording(self) -> tuple[list[tuple], list[Any], int]:
        calls: list[tuple] = []
        keys: list[Any] = []
        fn = _run_trusted(self.canonical, self.entry_point)[self.entry_point]

        def record(*args: Any) -> Any:
            calls.append(copy.deepcopy(args))
            keys.append(encode(list(args)))
            return fn(*args)

        units = self._run_check(record)
        if not all(units):
            raise RuntimeError(f"the canonical solution of {self.entry_point} fails its check")
        return calls, keys, len(units)

    @property
    def calls(self) -> list[tuple]:
        return [copy.deepcopy(c) for c in self._recording[0]]

    @property
    def n_units(self) -> int:
        return self._recording[2]

    def grade(self, outcomes: Sequence[CallOutcome]) -> list[bool]:
        _, keys, n = self._recording
        i = [0]

        def replay(*args: Any) -> Any:
            k = i[0]
            i[0] += 1
            if k >= len(keys) or encode(list(args)) != keys[k]:
                raise _Diverged(f"call {k} differs from the recording")
            o = outcomes[k]
            if not (o.ran and o.ok):
                raise CandidateError(o.error or "no result")
            return copy.deepcopy(o.value)

        units = self._run_check(replay)[:n]
        return units + [False] * (n - len(units))

    def describe(self) -> list[str]:
        return [f"{n} assertions of HumanEval's check()" for n in [self.n_units]]
