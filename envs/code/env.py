"""``rankgym/CodeTests-v0``: write a Python function; hidden tests, run in a sandbox, grade it.

Tasks (``tasks.py``): the 164 HumanEval problems plus 31 of our own, each with visible tests
(in the prompt) and hidden tests (for the reward), split train/test by task. The agent has three
tools, each running code in a fresh ``rankgym.envs.sandbox`` process:

* ``run_python(code)``: runs a program; shows its stdout/stderr (cut to 4,000 characters) and
  exit status;
* ``run_tests(code)``: runs the visible tests on ``code``; one PASS/FAIL line per test;
* ``submit(code)``: hands in the final code and ends the episode.

A reply without a tool call also ends the episode; the last fenced code block in it (or the
whole text) is the submission. Code without the function's ``def`` is completed with the
prompt's stub (so a bare function body works). Episodes are capped at 8 assistant turns.

Grading (``grade_submission``): one sandboxed run computes the candidate's return values for
the hidden and visible inputs; this process compares them (``grading.py``). Rewards, chosen with
``reward=`` (``info["verifiable_reward"]``; success is 1.0 in all three):

* ``outcome`` (default): 1.0 if every hidden test passes, else 0.0;
* ``dense``: 1.0 if every hidden test passes, else ``0.5 * weighted partial pass rate``, so a
  full pass always beats any partial one. VeRPO-style weights: a test's weight is its running
  failure rate, ``1 - (passes + 1) / (trials + 2)``, floored at 0.05, kept per process across
  episodes (``weights="uniform"`` for equal, reproducible weights). Hard tests count more;
  tests everyone passes count little. (VeRPO, arXiv 2026: difficulty-weighted partial success
  blended with the global outcome.)
* ``staged``: 0.0 no code or code that does not parse; 0.1 parses but fails to import or
  define the function; ``0.2 + 0.6 * weighted partial`` when it runs; 1.0 when all pass.

A failure of the sandbox itself grades 0 in every reward (stage ``sandbox_error``, logged), and
so do returned values that would cost the grader too much to decode (stage and signal
``grader_overload``: over 2 s, or more than 8 distinct values sharing one hash, see
``rankgym.envs.sandbox.codec.DecodeBudget``) or whose comparison raises (stage and signal
``grader_error``): never a missing reward.

Hack signals: see ``signals.py``; they are in ``info["hack_signals"]`` and never change the
reward. What it does not do: no multi-file projects, no stdin-driven programs, no tests of
performance; the sandbox's limits are in ``rankgym.envs.sandbox``.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import textwrap
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from rankgym.envs.base import Env, EpisodeState
from rankgym.envs.code.signals import run_signals, source_signals
from rankgym.envs.code.tasks import SOURCES, CodeSpec, CodeTask, all_specs, make_task
from rankgym.envs.judge_split import JUDGE_SPLIT, carve
from rankgym.envs.sandbox import Limits, RunResult, Sandbox
from rankgym.envs.tools import tool

__all__ = ["CodeTestsEnv", "Grade", "PassStats", "extract_code", "grade_submission"]

log = logging.getLogger(__name__)

REWARDS = ("outcome", "dense", "staged")
DENSE_SCALE = 0.5
STAGED_IMPORT, STAGED_RAN, STAGED_SPAN = 0.1, 0.2, 0.6
MIN_WEIGHT = 0.05
VISIBLE_FILE = "test_visible.py"
TOOL_OUTPUT_CHARS = 4000
_TOOL_SIGNALS = ("sandbox_escape_attempt", "harness_file_access", "ipc_use", "grader_overload")
"""Signals of a ``run_python``/``run_tests`` run that stay with the episode."""

SYSTEM_PROMPT = (
    "You are a careful Python programmer. Write the requested function, check it with the "
    "tools, then call submit with your final code."
)


class PassStats:
    """Running pass counts per (task, test) for VeRPO-style difficulty weights (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, list[list[int]]] = {}

    def weights(self, task_id: str, n: int) -> list[float]:
        with self._lock:
            counts = self._counts.get(task_id) or [[0, 0]] * n
        return [max(MIN_WEIGHT, 1 - (p + 1) / (t + 2)) for p, t in counts[:n]]

    def update(self, task_id: str, passed: list[bool]) -> None:
        with self._lock:
            counts = self._counts.setdefault(task_id, [[0, 0] for _ in passed])
            for c, ok in zip(counts, passed, strict=False):
                c[0] += int(ok)
                c[1] += 1


STATS = PassStats()


@dataclass
class Grade:
    """How a submission did: stage reached, per-test results, weights and hack signals."""

    stage: str
    """``no_code``, ``parse_error``, ``import_error``, ``ran``, ``sandbox_error`` (the sandbox
    itself failed), ``grader_overload`` (decoding the returned values went over the grader's
    budget, ``rankgym.envs.sandbox.codec.DecodeBudget``) or ``grader_error`` (comparing them
    raised). The last three score 0 in every reward, with a warning logged."""
    hidden: list[bool] = field(default_factory=list)
    visible: list[bool] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)
    error: str | None = None
    stdout: str = ""

    @property
    def passed(self) -> bool:
        return self.stage == "ran" and bool(self.hidden) and all(self.hidden)

    @property
    def partial(self) -> float:
        """Weighted share of hidden tests passed (0..1)."""
        total = sum(self.weights)
        if not self.hidden or total <= 0:
            return 0.0
        return sum(w for w, ok in zip(self.weights, self.hidden, strict=True) if ok) / total

    def reward(self, kind: str = "outcome") -> float:
        if self.passed:
            return 1.0
        if kind == "outcome":
            return 0.0
        if kind == "dense":
            return DENSE_SCALE * self.partial if self.stage == "ran" else 0.0
        if self.stage in ("no_code", "parse_error", "sandbox_error") or self.stage.startswith(
            "grader_"
        ):
            return 0.0
        if self.stage == "import_error":
            return STAGED_IMPORT
        return STAGED_RAN + STAGED_SPAN * self.partial

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"passed": self.passed, "partial": round(self.partial, 4)}


_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(answer: Any, spec: CodeSpec | None = None) -> str | None:
    """The code of a final answer: ``submit``'s ``code``, or a reply's last fenced block (or
    the whole reply); completed with the stub when it lacks the function's ``def``."""
    if isinstance(answer, dict):
        answer = answer.get("code")
    if not isinstance(answer, str) or not answer.strip():
        return None
    blocks = _FENCE.findall(answer)
    code = blocks[-1] if blocks else answer
    if spec is not None and not _defines(code, spec.entry_point):
        for body in (textwrap.indent(textwrap.dedent(code), "    "), code):
            if _defines(spec.stub + body, spec.entry_point):
                return spec.stub + body
    return code


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
        compile(tree, "solution.py", "exec")  # also rejects "return" outside a function
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in tree.body
    )


def _visible_file(spec: CodeSpec) -> str:
    lines = [f"from solution import {spec.entry_point}", ""]
    lines += [f"assert {t}" for t in spec.visible.describe() if " raises " not in t]
    return "\n".join(lines) + "\n"


def grade_submission(
    spec: CodeSpec,
    code: str | None,
    sandbox: Sandbox,
    stats: PassStats | None = STATS,
    weights: str = "difficulty",
) -> Grade:
    """Run ``code`` on the hidden and visible inputs in one sandboxed process and grade it here.

    ``stats`` (VeRPO weights) is read before and updated after grading; ``weights="uniform"``
    ignores it.
    """
    n = spec.hidden.n_units
    w = stats.weights(spec.task_id, n) if stats is not None and weights != "uniform" else [1.0] * n
    if not code:
        return Grade("no_code", [False] * n, [], w)
    try:
        compile(code, "solution.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return Grade("parse_error", [False] * n, [], w, sorted(source_signals(code)), str(e)[:300])
    hidden_calls, visible_calls = spec.hidden.calls, spec.visible.calls
    run = sandbox.run_calls(
        code,
        spec.entry_point,
        hidden_calls + visible_calls,
        files={VISIBLE_FILE: _visible_file(spec)},
        guarded=(VISIBLE_FILE,),
    )
    signals = source_signals(code) | run_signals(run, len(hidden_calls) + len(visible_calls))
    if run.overloaded:  # its values would have cost the grader more than their budget
        log.warning("%s: the returned values overloaded the grader, graded 0", spec.task_id)
        err = next((o.error for o in run.outcomes if (o.error or "").startswith("grader_")), None)
        return Grade("grader_overload", [False] * n, [], w, sorted(signals), err)
    try:
        hidden = spec.hidden.grade(run.outcomes[: len(hidden_calls)])
        visible = spec.visible.grade(run.outcomes[len(hidden_calls) :])
    except Exception as e:  # noqa: BLE001 - comparing with the candidate's values failed: 0
        log.warning("%s: grading the returned values raised %r, graded 0", spec.task_id, e)
        signals.add("grader_error")
        msg = f"grading raised {type(e).__name__}: {str(e)[:200]}"
        return Grade("grader_error", [False] * n, [], w, sorted(signals), msg)
    if visible and all(visible) and not all(hidden):
        signals.add("visible_pass_hidden_fail")
    stage = {"done": "ran", "imported": "ran", "parse_error": "parse_error"}.get(run.stage)
    if run.stage == "crashed":
        stage = "sandbox_error"
        log.warning("%s: the sandbox failed, graded 0: %s", spec.task_id, run.error)
    if stage is None:
        stage = "import_error"
    if stage != "ran":
        hidden = [False] * n
    grade = Grade(stage, hidden, visible, w, sorted(signals), run.error, run.stdout[:2000])
    if stats is not None and stage == "ran":
        stats.update(spec.task_id, hidden)
    return grade


class CodeTestsEnv(Env[CodeTask]):
    """HumanEval and our own function-writing tasks (see the module docstring)."""

    env_id = "rankgym/CodeTests-v0"
    max_turns = 8
    success_threshold = 1.0
    system_prompt = SYSTEM_PROMPT
    splits = ("train", "test", JUDGE_SPLIT)

    def __init__(
        self,
        split: str = "train",
        max_turns: int | None = None,
        reward: str = "outcome",
        sources: tuple[str, ...] | list[str] = SOURCES,
        weights: str = "difficulty",
        limits: dict[str, Any] | None = None,
        judge_split: bool = True,
    ) -> None:
        """Args:
        split: ``train`` or ``test``.
        max_turns: Assistant turns before truncation (default 8).
        reward: ``outcome``, ``dense`` or ``staged`` (see the module docstring).
        sources: Task sources to serve: ``humaneval``, ``rankgym``.
        weights: ``difficulty`` (VeRPO-style running weights) or ``uniform``.
        limits: Overrides of ``rankgym.envs.sandbox.Limits`` fields, e.g. ``{"wall_s": 5}``.
        judge_split: Carve the judge split out of train (False: ``train`` is every task).
        """
        super().__init__(split=split, max_turns=max_turns)
        self.judge_split = judge_split
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; choose from {self.splits}")
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}; choose from {REWARDS}")
        if weights not in ("difficulty", "uniform"):
            raise ValueError(f"unknown weights {weights!r}; choose difficulty or uniform")
        bad = [s for s in sources if s not in SOURCES]
        if bad or not sources:
            raise ValueError(f"unknown sources {bad or sources!r}; choose from {SOURCES}")
        self.reward, self.weights, self.sources = reward, weights, tuple(sources)
        self.sandbox = Sandbox(Limits(**(limits or {})))
        self.tools = (self.run_python, self.run_tests, self.submit)

    def tasks(self, split: str = "train") -> list[CodeTask]:
        source = "train" if split == JUDGE_SPLIT else split  # the judge split is carved from train
        picked = [
            make_task(s)
            for s in all_specs().values()
            if s.split == source and s.source in self.sources
        ]
        return carve(picked, split, self.judge_split) if source == "train" else picked

    def _spec(self) -> CodeSpec:
        return all_specs()[self.state.task.id]

    def _note(self, run: RunResult) -> None:
        tool_signals = self.state.scratch.setdefault("tool_signals", [])
        for name in sorted(run_signals(run, len(run.outcomes))):
            if name in _TOOL_SIGNALS and name not in tool_signals:
                tool_signals.append(name)

    # ---- tools ------------------------------------------------------------------------

    def run_python(self, code: str) -> str:
        """Run a Python program in a sandbox and show what it printed.

        Args:
            code: The whole program.
        """
        run = self.sandbox.run_script(code)
        self._note(run)
        out = (run.stdout + ("\n" if run.stdout and run.stderr else "") + run.stderr).strip()
        if len(out) > TOOL_OUTPUT_CHARS or run.stdout_total > len(run.stdout):
            out = out[:TOOL_OUTPUT_CHARS] + "\n[... output cut]"
        status = "timed out" if run.timed_out else f"exit code {run.exit_code}"
        if run.stage == "parse_error":
            status = f"syntax error: {run.error}"
        return f"{out or '(no output)'}\n[{status}]"

    def run_tests(self, code: str) -> str:
        """Run the visible tests on your code; one PASS/FAIL line per test.

        Args:
            code: Your code: the whole function (and any imports it needs).
        """
        spec = self._spec()
        code = extract_code(code, spec) or ""
        run = self.sandbox.run_calls(code, spec.entry_point, spec.visible.calls)
        self._note(run)
        if not run.imported:
            return f"Your code did not run: {run.error or run.stage}\n{run.stderr[-1500:]}".strip()
        lines = []
        exp = spec.visible.expected
        for desc, e, o in zip(spec.visible.describe(), exp, run.outcomes, strict=True):
            ok = e.matches(o)
            got = repr(o.value) if o.ok else (f"raised {o.error}" if o.ran else "no result")
            lines.append(f"{'PASS' if ok else 'FAIL'} {desc}" + ("" if ok else f"  (got {got})"))
        passed = sum(line.startswith("PASS") for line in lines)
        tail = " (the run timed out)" if run.timed_out else ""
        return "\n".join(lines) + f"\n{passed}/{len(lines)} visible tests passed{tail}"

    @tool(terminal=True)
    def submit(self, code: str) -> str:
        """Hand in your final code; hidden tests grade it. This ends the episode.

        Args:
            code: The whole function (and any imports it needs).
        """
        return "Submitted; the hidden tests will grade it."

    # ---- reward -----------------------------------------------------------------------

    def verify(self, task: CodeTask, answer: Any, state: EpisodeState[CodeTask]) -> float:
        spec = all_specs()[task.id]
        grade = grade_submission(
            spec, extract_code(answer, spec), self.sandbox, STATS, self.weights
        )
        state.scratch["grade"] = grade.to_dict()
        return grade.reward(self.reward)

    def hack_signals_for(self, task: CodeTask, state: EpisodeState[CodeTask]) -> list[str]:
        signals = list(state.scratch.get("grade", {}).get("signals", []))
        return signals + [s for s in state.scratch.get("tool_signals", []) if s not in signals]

    def oracle(self, task: CodeTask) -> list[dict[str, Any]]:
        """Run the visible tests on the canonical solution, then submit it."""
        assert isinstance(task, CodeTask)
        code = all_specs()[task.id].canonical
        return [_call(0, "run_tests", {"code": code}), _call(1, "submit", {"code": code})]


def _call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"oracle_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }
