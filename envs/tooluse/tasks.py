"""The 580 ToolUse tasks: deterministic generators per family and difficulty, solved by the real tools.

Part of ``rankgym.envs.tooluse``. Changing a generator changes the task set (a test pins its
hash), which means a new env version.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from rankgym.envs.base import Task
from rankgym.envs.tools import Tool
from rankgym.envs.tooluse.tools import SEED, TOOL_FAMILIES, _randint, _tables, _tool_objects

DIFFICULTIES = ("easy", "medium", "hard")


class ToolUseTask(Task):
    family: str
    answer_type: str  # "number" | "date" | "text"
    tools: list[str]
    solution: list[dict[str, Any]]
    """The oracle's tool calls: [{"name": ..., "arguments": {...}}, ...]."""


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


# (bigger unit, smaller unit, and their symbols for convert_units)
_EASY_UNITS = (
    ("meters", "centimeters", "m", "cm"), ("kilograms", "grams", "kg", "g"),
    ("hours", "minutes", "h", "min"), ("kilometers", "meters", "km", "m"),
    ("liters", "milliliters", "l", "ml"), ("weeks", "days", "wk", "d"),
)  # fmt: skip
_MEDIUM_UNITS = (
    ("miles", "kilometers", "mi", "km"), ("pounds", "kilograms", "lb", "kg"),
    ("inches", "centimeters", "in", "cm"), ("feet", "meters", "ft", "m"),
    ("gallons", "liters", "gal", "l"), ("ounces", "grams", "oz", "g"),
)  # fmt: skip


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
