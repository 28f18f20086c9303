"""The ToolUse tools: plain typed functions, grouped into five families.

Part of ``rankgym.envs.tooluse`` (see the package docstring). No sandbox is needed: every tool
is pure Python, O(input), and bounds its inputs.
"""

from __future__ import annotations

import ast
import datetime as dt
import math
import operator
import random
from collections.abc import Callable
from functools import cache
from typing import Any, cast

from rankgym.envs.tools import Tool

SEED = 20240601
LIMIT = 1e15
"""Largest magnitude ``calculate`` accepts, in its inputs and its results."""


def _randint(rng: random.Random, a: int, b: int) -> int:
    """Uniform integer in [a, b] from ``random()`` only (stable across Python versions)."""
    return a + int(rng.random() * (b - a + 1))


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
        value = cast(int | float, node.value)
        if not math.isfinite(value) or abs(value) > LIMIT:
            raise ValueError(f"number out of range (|x| <= {LIMIT:.0e})")
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
            raise ValueError("exponent or base too large")
        value = _BINOPS[type(node.op)](left, right)
        if isinstance(value, complex) or not math.isfinite(value) or abs(value) > LIMIT:
            raise ValueError(f"result out of range (|x| <= {LIMIT:.0e})")
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
