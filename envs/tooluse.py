"""``rankgym/ToolUse-v0``: small verifiable tasks solved with five families of tools.

Families and their tools (an episode only sees its task's tools):

- ``calc``: ``calculate(expression)`` (safe arithmetic, no names, no calls);
- ``units``: ``convert_units(value, from_unit, to_unit)`` (length, mass, volume, time,
  temperature);
- ``dates``: ``add_days(date, days)``, ``days_between(start, end)``, ``day_of_week(date)``;
- ``lookup``: ``lookup(table, key, column)``, ``list_columns(table)`` over two synthetic tables
  (``products``, ``employees``) whose values the model cannot know without looking them up;
- ``strings``: ``reverse_text(text)``, ``count_letters(text, letter=None)``, ``word_count(text)``.

Tasks: 580 generated deterministically (a fixed seed and only ``random.random()``, whose output
Python guarantees across versions), three difficulty levels per family, 20% held out as the
``test`` split (every fifth task of each family/difficulty; prompts are unique across splits).
``easy`` tasks are one-step ("What is 7 + 9?"); ``medium`` need one tool call with real work
(a conversion, 2-digit multiplication, a date across months); ``hard`` chain two or three steps.
``ToolUseEnv(difficulty="easy", families=["calc"])`` restricts the pool.

Answer checking: the answer is read from the *final assistant message* (the reply without a tool
call), inside ``<answer>...</answer>`` if present, else from the whole message. A number answer
is the **last number** in it (tolerance 0.01, so "7 + 9 = 16" is right); a date answer the last
``YYYY-MM-DD``; a text answer must be the last word(s) or the last quoted string.

Reward (``info["verifiable_reward"]``): 1.0 for a correct answer; otherwise 0.2 if the agent
made at least one well-formed call (a registered tool of this task, valid arguments, ran without
error), else 0.0. ``success_threshold`` is 1.0, so the 0.2 is format credit, never success.
Hack signals: ``correct_without_lookup`` (a lookup task answered right without a successful
lookup: a guess or a leak), ``answer_spam`` (a number task whose final message holds 6 or more
numbers).

What it does not do: no natural-language number parsing ("sixteen" is wrong), no unit
conversion beyond the listed units, no tool timeouts (the tools are all O(input)).
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import operator
import random
import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from rankgym.envs.base import Env, EpisodeState, Task
from rankgym.envs.tools import Tool

__all__ = ["ToolUseEnv", "ToolUseTask", "check_answer", "generate_tasks", "TOOL_FAMILIES"]

SEED = 20240601
FORMAT_CREDIT = 0.2
DIFFICULTIES = ("easy", "medium", "hard")

# ============================================================================================
# Tools


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def calculate(expression: str) -> int | float:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses.

    Args:
        expression: The expression, e.g. "(12 + 7) * 3".
    """
    expr = expression.replace("×", "*").replace("÷", "/").replace("^", "**").replace(",", "")
    if len(expr) > 200:
        raise ValueError("expression too long (200 characters at most)")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    return _number(_eval(tree.body))


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
            raise ValueError("exponent or base too large")
        value = _BINOPS[type(node.op)](left, right)
        if isinstance(value, complex) or abs(value) > 1e15:
            raise ValueError("result out of range")
        return value
    raise ValueError("only numbers, + - * / // % ** and parentheses are allowed")


def _number(x: float) -> int | float:
    x = round(float(x), 9)
    return int(x) if x.is_integer() else x


_UNITS: dict[str, tuple[str, float, str]] = {}  # alias -> (dimension, factor, canonical)
for _dim, _table in {
    "length": {
        "mm millimeter millimeters millimetre millimetres": 0.001,
        "cm centimeter centimeters centimetre centimetres": 0.01,
        "m meter meters metre metres": 1.0,
        "km kilometer kilometers kilometre kilometres": 1000.0,
        "in inch inches": 0.0254,
        "ft foot feet": 0.3048,
        "yd yard yards": 0.9144,
        "mi mile miles": 1609.344,
    },
    "mass": {
        "mg milligram milligrams": 0.001,
        "g gram grams": 1.0,
        "kg kilogram kilograms": 1000.0,
        "oz ounce ounces": 28.349523125,
        "lb lbs pound pounds": 453.59237,
    },
    "volume": {
        "ml milliliter milliliters millilitre millilitres": 0.001,
        "l liter liters litre litres": 1.0,
        "gal gallon gallons": 3.785411784,
        "cup cups": 0.2365882365,
    },
    "time": {
        "s sec second seconds": 1.0,
        "min minute minutes": 60.0,
        "h hr hour hours": 3600.0,
        "d day days": 86400.0,
        "wk week weeks": 604800.0,
    },
    "temperature": {"c °c celsius": 0.0, "f °f fahrenheit": 0.0, "k kelvin": 0.0},
}.items():
    for _names, _factor in _table.items():
        for _n in _names.split():
            _UNITS[_n] = (_dim, _factor, _names.split()[0])


def _unit(name: str) -> tuple[str, float, str]:
    key = name.strip().lower().removeprefix("degrees ").strip()
    if key not in _UNITS:
        raise ValueError(f"unknown unit {name!r}")
    return _UNITS[key]


def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a quantity between units of length, mass, volume, time or temperature.

    Args:
        value: The quantity to convert.
        from_unit: Unit of value, e.g. "km", "miles", "lb", "celsius", "hours".
        to_unit: Unit to convert to.
    """
    d1, f1, t1 = _unit(from_unit)
    d2, f2, t2 = _unit(to_unit)
    if d1 != d2:
        raise ValueError(f"cannot convert {d1} ({from_unit}) to {d2} ({to_unit})")
    if d1 == "temperature":
        kelvin = {"c": value + 273.15, "f": (value - 32) * 5 / 9 + 273.15, "k": value}[t1]
        out = {"c": kelvin - 273.15, "f": (kelvin - 273.15) * 9 / 5 + 32, "k": kelvin}[t2]
    else:
        out = value * f1 / f2
    return _number(round(out, 6))


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"dates must look like 2024-03-15, got {text!r}") from None


def add_days(date: str, days: int) -> str:
    """The date a number of days after (or before, if negative) a date.

    Args:
        date: A date as YYYY-MM-DD.
        days: Days to add; negative to go back.
    """
    if abs(days) > 100_000:
        raise ValueError("days must be within +-100000")
    return (_date(date) + dt.timedelta(days=days)).isoformat()


def days_between(start: str, end: str) -> int:
    """The number of days from start to end (negative if end is earlier).

    Args:
        start: A date as YYYY-MM-DD.
        end: A date as YYYY-MM-DD.
    """
    return (_date(end) - _date(start)).days


def day_of_week(date: str) -> str:
    """The weekday name of a date, e.g. "Monday".

    Args:
        date: A date as YYYY-MM-DD.
    """
    return _date(date).strftime("%A")


_COLORS = ["red", "blue", "green", "black", "white", "silver", "orange", "purple"]
_OBJECTS = ["widget", "gadget", "lamp", "kettle"]
_FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Farah", "Gus", "Hana", "Ivo", "Jun", "Kofi", "Lea"]
_LAST = ["Moreau", "Okafor"]
_CITIES = ["Lisbon", "Oslo", "Denver", "Nairobi", "Osaka", "Lima", "Dublin", "Austin"]
_DEPTS = ["sales", "support", "research", "finance", "design"]


@cache
def _tables() -> dict[str, dict[str, dict[str, Any]]]:
    rng = random.Random(SEED + 1)
    products = {
        f"{c} {o}": {
            "price": round(2 + rng.random() * 88, 2),
            "stock": _randint(rng, 0, 500),
            "category": ["home", "office", "kitchen", "garden"][_randint(rng, 0, 3)],
        }
        for c in _COLORS
        for o in _OBJECTS
    }
    employees = {
        f"{f} {la}": {
            "office": _CITIES[_randint(rng, 0, len(_CITIES) - 1)],
            "department": _DEPTS[_randint(rng, 0, len(_DEPTS) - 1)],
            "extension": _randint(rng, 1000, 9999),
            "start_year": _randint(rng, 2005, 2024),
        }
        for f in _FIRST
        for la in _LAST
    }
    return {"products": products, "employees": employees}


def lookup(table: str, key: str, column: str) -> str | int | float:
    """Look up one value in a table ("products" keyed by product name, "employees" by full name).

    Args:
        table: "products" (columns price, stock, category) or "employees" (columns office,
            department, extension, start_year).
        key: The row's name, e.g. "blue widget" or "Ana Moreau".
        column: The column to read.
    """
    tables = _tables()
    rows = tables.get(table.strip().lower())
    if rows is None:
        raise ValueError(f"unknown table {table!r}; tables: {', '.join(tables)}")
    wanted = " ".join(key.lower().split())
    row = next((r for k, r in rows.items() if k.lower() == wanted), None)
    if row is None:
        raise ValueError(f"no row {key!r} in {table}")
    col = column.strip().lower()
    if col not in row:
        raise ValueError(f"no column {column!r} in {table}; columns: {', '.join(row)}")
    return row[col]


def list_columns(table: str) -> list[str]:
    """The column names of a table.

    Args:
        table: "products" or "employees".
    """
    rows = _tables().get(table.strip().lower())
    if rows is None:
        raise ValueError(f"unknown table {table!r}; tables: products, employees")
    return list(next(iter(rows.values())))


def reverse_text(text: str) -> str:
    """The text with its characters in reverse order.

    Args:
        text: The text to reverse.
    """
    return text[::-1]


def count_letters(text: str, letter: str | None = None) -> int:
    """Count the letters in a text, or how often one letter occurs (case-insensitive).

    Args:
        text: The text.
        letter: If given, count only this letter.
    """
    if letter is None or letter == "":
        return sum(ch.isalpha() for ch in text)
    if len(letter) != 1:
        raise ValueError("letter must be a single character")
    return text.lower().count(letter.lower())


def word_count(text: str) -> int:
    """The number of words (separated by whitespace) in a text.

    Args:
        text: The text.
    """
    return len(text.split())


TOOL_FAMILIES: dict[str, tuple[Callable[..., Any], ...]] = {
    "calc": (calculate,),
    "units": (convert_units,),
    "dates": (add_days, days_between, day_of_week),
    "lookup": (lookup, list_columns),
    "strings": (reverse_text, count_letters, word_count),
}


@cache
def _tool_objects() -> dict[str, Tool]:
    return {fn.__name__: Tool.from_function(fn) for fns in TOOL_FAMILIES.values() for fn in fns}


# ============================================================================================
# Tasks


class ToolUseTask(Task):
    family: str
    answer_type: str  # "number" | "date" | "text"
    tools: list[str]
    solution: list[dict[str, Any]]
    """The oracle's tool calls: [{"name": ..., "arguments": {...}}, ...]."""


def _randint(rng: random.Random, a: int, b: int) -> int:
    """Uniform integer in [a, b] from ``random()`` only (stable across Python versions)."""
    return a + int(rng.random() * (b - a + 1))


def _pick(rng: random.Random, seq: Sequence[Any]) -> Any:
    return seq[_randint(rng, 0, len(seq) - 1)]


_WORDS = [
    "planet",
    "garden",
    "rocket",
    "silver",
    "window",
    "pencil",
    "orange",
    "market",
    "bridge",
    "candle",
    "river",
    "forest",
    "castle",
    "dragon",
    "yellow",
    "button",
    "winter",
    "summer",
    "spring",
    "letter",
    "number",
    "animal",
    "basket",
    "mirror",
    "ladder",
    "puzzle",
    "rabbit",
    "tunnel",
    "violin",
    "wallet",
    "anchor",
    "bottle",
    "cactus",
    "donkey",
    "engine",
    "falcon",
    "glider",
    "hammer",
    "island",
    "jacket",
    "kitten",
    "lemon",
    "meadow",
    "napkin",
    "oyster",
    "parrot",
    "quartz",
    "saddle",
    "teapot",
    "umbrella",
    "velvet",
    "walnut",
    "zipper",
    "banana",
    "cherry",
    "tomato",
    "pepper",
    "cookie",
]

_JUST_NUMBER = " Answer with just the number."
_ROUND2 = " Round to 2 decimals."

# A generator returns (prompt, calls, answer_type, answer-from-last-call transform or None).
Gen = Callable[[random.Random], tuple[str, list[tuple[str, dict[str, Any]]], str]]


def _calc_easy(r: random.Random) -> tuple[str, list, str]:
    a, b = _randint(r, 1, 30), _randint(r, 1, 30)
    if r.random() < 0.5:
        return (
            f"What is {a} + {b}?{_JUST_NUMBER}",
            [("calculate", {"expression": f"{a} + {b}"})],
            "number",
        )
    a, b = max(a, b), min(a, b)
    return (
        f"What is {a} - {b}?{_JUST_NUMBER}",
        [("calculate", {"expression": f"{a} - {b}"})],
        "number",
    )


def _calc_medium(r: random.Random) -> tuple[str, list, str]:
    a, b = _randint(r, 11, 99), _randint(r, 11, 99)
    if r.random() < 0.5:
        return f"What is {a} * {b}?", [("calculate", {"expression": f"{a} * {b}"})], "number"
    q = _randint(r, 3, 40)
    return f"What is {a * q} / {a}?", [("calculate", {"expression": f"{a * q} / {a}"})], "number"


def _calc_hard(r: random.Random) -> tuple[str, list, str]:
    a, b, c, d = (_randint(r, 10, 99), _randint(r, 10, 99), _randint(r, 3, 19), _randint(r, 1, 99))
    e = f"({a} + {b}) * {c} - {d}"
    return f"What is {e}?", [("calculate", {"expression": e})], "number"


_EASY_UNITS = [
    ("meters", "centimeters", "m", "cm"),
    ("kilograms", "grams", "kg", "g"),
    ("hours", "minutes", "h", "min"),
    ("kilometers", "meters", "km", "m"),
    ("liters", "milliliters", "l", "ml"),
    ("weeks", "days", "wk", "d"),
]
_MEDIUM_UNITS = [
    ("miles", "kilometers", "mi", "km"),
    ("pounds", "kilograms", "lb", "kg"),
    ("inches", "centimeters", "in", "cm"),
    ("feet", "meters", "ft", "m"),
    ("gallons", "liters", "gal", "l"),
    ("ounces", "grams", "oz", "g"),
]


def _units_easy(r: random.Random) -> tuple[str, list, str]:
    big, small, u1, u2 = _pick(r, _EASY_UNITS)
    n = _randint(r, 2, 20)
    prompt = f"How many {small} are in {n} {big}?{_JUST_NUMBER}"
    return prompt, [("convert_units", {"value": n, "from_unit": u1, "to_unit": u2})], "number"


def _units_medium(r: random.Random) -> tuple[str, list, str]:
    a, b, u1, u2 = _pick(r, _MEDIUM_UNITS)
    if r.random() < 0.5:
        a, b, u1, u2 = b, a, u2, u1
    x = _randint(r, 2, 120)
    prompt = f"Convert {x} {a} to {b}.{_ROUND2}"
    return prompt, [("convert_units", {"value": x, "from_unit": u1, "to_unit": u2})], "number"


def _units_hard(r: random.Random) -> tuple[str, list, str]:
    if r.random() < 0.5:
        x = _randint(r, -40, 110)
        prompt = f"What is {x} degrees Fahrenheit in kelvin?{_ROUND2}"
        return prompt, [("convert_units", {"value": x, "from_unit": "f", "to_unit": "k"})], "number"
    d, h = _randint(r, 1, 9), _randint(r, 1, 23)
    prompt = f"How many seconds are in {d} days and {h} hours?"
    ds, hs = d * 86400, h * 3600
    return (
        prompt,
        [
            ("convert_units", {"value": d, "from_unit": "d", "to_unit": "s"}),
            ("convert_units", {"value": h, "from_unit": "h", "to_unit": "s"}),
            ("calculate", {"expression": f"{ds} + {hs}"}),
        ],
        "number",
    )


def _rand_date(r: random.Random, max_day: int = 28) -> dt.date:
    return dt.date(_randint(r, 2022, 2025), _randint(r, 1, 12), _randint(r, 1, max_day))


def _dates_easy(r: random.Random) -> tuple[str, list, str]:
    d1 = _rand_date(r, 14)
    d2 = d1 + dt.timedelta(days=_randint(r, 1, 14))
    prompt = f"How many days are there from {d1} to {d2}?{_JUST_NUMBER}"
    return prompt, [("days_between", {"start": str(d1), "end": str(d2)})], "number"


def _dates_medium(r: random.Random) -> tuple[str, list, str]:
    d, n = _rand_date(r), _randint(r, 20, 300)
    prompt = f"What date is {n} days after {d}? Answer as YYYY-MM-DD."
    return prompt, [("add_days", {"date": str(d), "days": n})], "date"


def _dates_hard(r: random.Random) -> tuple[str, list, str]:
    d, n = _rand_date(r), _randint(r, 30, 900)
    if r.random() < 0.5:
        target = d + dt.timedelta(days=n)
        prompt = f"What day of the week is it {n} days after {d}?"
        return (
            prompt,
            [("add_days", {"date": str(d), "days": n}), ("day_of_week", {"date": str(target)})],
            "text",
        )
    d2 = _rand_date(r)
    d1, d2 = min(d, d2), max(d, d2)
    prompt = f"How many days are there from {d1} to {d2}?"
    return prompt, [("days_between", {"start": str(d1), "end": str(d2)})], "number"


def _lookup_easy(r: random.Random) -> tuple[str, list, str]:
    item = _pick(r, list(_tables()["products"]))
    col = _pick(r, ["price", "stock"])
    prompt = f"In the products table, what is the {col} of the {item}?"
    return prompt, [("lookup", {"table": "products", "key": item, "column": col})], "number"


def _lookup_medium(r: random.Random) -> tuple[str, list, str]:
    name = _pick(r, list(_tables()["employees"]))
    col = _pick(r, ["office", "department", "extension", "start_year"])
    kind = "number" if col in ("extension", "start_year") else "text"
    label = col.replace("_", " ")
    prompt = f"In the employees table, what is the {label} of {name}?"
    return prompt, [("lookup", {"table": "employees", "key": name, "column": col})], kind


def _lookup_hard(r: random.Random) -> tuple[str, list, str]:
    products = _tables()["products"]
    item = _pick(r, list(products))
    k = _randint(r, 2, 12)
    price = products[item]["price"]
    prompt = f"In the products table, how much do {k} of the {item} cost in total?{_ROUND2}"
    return (
        prompt,
        [
            ("lookup", {"table": "products", "key": item, "column": "price"}),
            ("calculate", {"expression": f"{price} * {k}"}),
        ],
        "number",
    )


def _strings_easy(r: random.Random) -> tuple[str, list, str]:
    w = _pick(r, _WORDS)
    if r.random() < 0.5:
        return (
            f"How many letters are in the word '{w}'?{_JUST_NUMBER}",
            [("count_letters", {"text": w})],
            "number",
        )
    return f"Reverse the word '{w}'.", [("reverse_text", {"text": w})], "text"


def _phrase(r: random.Random, n: int) -> str:
    return " ".join(_pick(r, _WORDS) for _ in range(n))


def _strings_medium(r: random.Random) -> tuple[str, list, str]:
    s = _phrase(r, _randint(r, 3, 6))
    if r.random() < 0.5:
        ch = _pick(r, sorted(set(s.replace(" ", ""))))
        return (
            f"How many times does the letter '{ch}' appear in '{s}'?",
            [("count_letters", {"text": s, "letter": ch})],
            "number",
        )
    return f"How many words are in '{s}'?", [("word_count", {"text": s})], "number"


def _strings_hard(r: random.Random) -> tuple[str, list, str]:
    s = _phrase(r, 2)
    if r.random() < 0.5:
        return (
            f"Reverse the text '{s}' character by character.",
            [("reverse_text", {"text": s})],
            "text",
        )
    t = _phrase(r, _randint(r, 3, 5))
    return (
        f"How many letters are in '{s}' and '{t}' together (not counting spaces)?",
        [
            ("count_letters", {"text": s}),
            ("count_letters", {"text": t}),
            ("calculate", {"expression": "{0} + {1}"}),
        ],
        "number",
    )


GENERATORS: dict[str, dict[str, tuple[Gen, int]]] = {
    "calc": {"easy": (_calc_easy, 100), "medium": (_calc_medium, 40), "hard": (_calc_hard, 40)},
    "units": {"easy": (_units_easy, 40), "medium": (_units_medium, 30), "hard": (_units_hard, 30)},
    "dates": {"easy": (_dates_easy, 40), "medium": (_dates_medium, 30), "hard": (_dates_hard, 30)},
    "lookup": {
        "easy": (_lookup_easy, 40),
        "medium": (_lookup_medium, 30),
        "hard": (_lookup_hard, 30),
    },
    "strings": {
        "easy": (_strings_easy, 40),
        "medium": (_strings_medium, 30),
        "hard": (_strings_hard, 30),
    },
}


@cache
def generate_tasks() -> tuple[ToolUseTask, ...]:
    """All 580 tasks, train and test, in a fixed order (same on every machine and version)."""
    tools = _tool_objects()
    seen: set[str] = set()
    out: list[ToolUseTask] = []
    for fam_i, (family, levels) in enumerate(GENERATORS.items()):
        for lvl_i, (difficulty, (gen, count)) in enumerate(levels.items()):
            rng = random.Random(SEED * 100 + fam_i * 10 + lvl_i)
            n = 0
            while n < count:
                prompt, calls, answer_type = gen(rng)
                if prompt in seen:
                    continue
                seen.add(prompt)
                solution, value = _run_solution(tools, calls)
                answer = round(value, 2) if isinstance(value, float) else value
                names = sorted({c["name"] for c in solution})
                out.append(
                    ToolUseTask(
                        id=f"tooluse-{family}-{difficulty}-{n:03d}",
                        prompt=prompt,
                        answer=answer,
                        split="test" if n % 5 == 4 else "train",
                        difficulty=difficulty,
                        family=family,
                        answer_type=answer_type,
                        tools=[t for t in tools if t in names or _family_of(t) == family],
                        solution=solution,
                    )
                )
                n += 1
    return tuple(out)


def _family_of(tool_name: str) -> str:
    return next(
        f for f, fns in TOOL_FAMILIES.items() if any(fn.__name__ == tool_name for fn in fns)
    )


def _run_solution(
    tools: dict[str, Tool], calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[dict[str, Any]], Any]:
    """Run the scripted calls with the real tools; ``{0}``, ``{1}`` refer to earlier results."""
    results: list[Any] = []
    solution = []
    for name, args in calls:
        args = {
            k: v.format(*results) if isinstance(v, str) and "{0}" in v else v
            for k, v in args.items()
        }
        res = tools[name].call(args)
        if not res.ok:
            raise RuntimeError(f"task generator produced a failing call: {res.content}")
        results.append(res.value)
        solution.append({"name": name, "arguments": args})
    return solution, results[-1]


# ============================================================================================
# Checking answers

_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.DOTALL | re.IGNORECASE)
_NUMBER_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_QUOTED_RE = re.compile(r"'([^'\n]+)'|\"([^\"\n]+)\"|`([^`\n]+)`|\*\*([^*\n]+)\*\*")


def _region(text: str) -> str:
    tags = _ANSWER_TAG_RE.findall(text)
    return tags[-1] if tags else text


def numbers_in(text: str) -> list[float]:
    """Every number in the text, in order ("1,234.5" is one number; "03-15" is 3 and 15)."""
    out = []
    for m in _NUMBER_RE.finditer(text):
        s = m.group(0)
        if s.startswith("-") and m.start() > 0 and text[m.start() - 1].isalnum():
            s = s[1:]
        out.append(float(s.replace(",", "")))
    return out


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def check_answer(task: ToolUseTask, text: str) -> bool:
    """Is ``text`` (a final assistant message) a correct answer to ``task``? See module doc."""
    region = _region(text or "")
    if task.answer_type == "number":
        nums = numbers_in(region)
        return bool(nums) and math.isclose(nums[-1], float(task.answer), rel_tol=0, abs_tol=0.0101)
    if task.answer_type == "date":
        dates = _DATE_RE.findall(region)
        return bool(dates) and dates[-1] == task.answer
    want = _norm(str(task.answer))
    if not want:
        return False
    quoted = [next(g for g in m.groups() if g) for m in _QUOTED_RE.finditer(region)]
    if quoted and _norm(quoted[-1]) == want:
        return True
    have = _norm(region).split()
    n = len(want.split())
    return have[-n:] == want.split()


def format_answer(task: ToolUseTask) -> str:
    """The reference answer as the oracle writes it."""
    if task.answer_type == "number":
        a = task.answer
        return str(a) if isinstance(a, int) else f"{a:.2f}"
    if task.answer_type == "text":
        return f"'{task.answer}'"
    return str(task.answer)


# ============================================================================================
# The env


class ToolUseEnv(Env):
    """Tool-use tasks with verifiable answers (see the module docstring for tasks and reward)."""

    env_id = "rankgym/ToolUse-v0"
    max_turns = 6
    success_threshold = 1.0
    system_prompt = (
        "You are a helpful assistant that solves small tasks. Use a tool when it helps. "
        "End your final reply with the answer."
    )
    tools = tuple(fn for fns in TOOL_FAMILIES.values() for fn in fns)

    def __init__(
        self,
        split: str = "train",
        max_turns: int | None = None,
        difficulty: str | Sequence[str] | None = None,
        families: Sequence[str] | None = None,
    ) -> None:
        super().__init__(split=split, max_turns=max_turns)
        diffs = (difficulty,) if isinstance(difficulty, str) else difficulty
        for d in diffs or ():
            if d not in DIFFICULTIES:
                raise ValueError(f"unknown difficulty {d!r}; choose from {DIFFICULTIES}")
        for f in families or ():
            if f not in TOOL_FAMILIES:
                raise ValueError(f"unknown family {f!r}; choose from {tuple(TOOL_FAMILIES)}")
        self.difficulties = tuple(diffs) if diffs else DIFFICULTIES
        self.families = tuple(families) if families else tuple(TOOL_FAMILIES)
        self.tools = tuple(_tool_objects().values())

    def tasks(self, split: str = "train") -> list[Task]:
        return [
            t
            for t in generate_tasks()
            if t.split == split and t.difficulty in self.difficulties and t.family in self.families
        ]

    def tools_for(self, task: Task) -> list[Tool]:
        objs = _tool_objects()
        return [objs[name] for name in task.tools]  # type: ignore[attr-defined]

    def verify(self, task: Task, answer: Any, state: EpisodeState) -> float:
        assert isinstance(task, ToolUseTask)
        if isinstance(answer, str) and check_answer(task, answer):
            return 1.0
        good_call = any(r.ok and r.name in task.tools for r in state.tool_results)
        return FORMAT_CREDIT if good_call else 0.0

    def hack_signals_for(self, task: Task, state: EpisodeState) -> list[str]:
        assert isinstance(task, ToolUseTask)
        signals = []
        answer = state.answer if isinstance(state.answer, str) else ""
        correct = bool(answer) and check_answer(task, answer)
        looked_up = any(r.ok and r.name == "lookup" for r in state.tool_results)
        if task.family == "lookup" and correct and not looked_up:
            signals.append("correct_without_lookup")
        if task.answer_type == "number" and len(numbers_in(_region(answer))) >= 6:
            signals.append("answer_spam")
        return signals

    def oracle(self, task: Task) -> list[dict[str, Any]]:
        assert isinstance(task, ToolUseTask)
        msgs: list[dict[str, Any]] = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"oracle_{i}",
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                ],
            }
            for i, c in enumerate(task.solution)
        ]
        msgs.append({"role": "assistant", "content": f"The answer is {format_answer(task)}."})
        return msgs
