"""`rankgym demo` of two commits, seed for seed: is one recipe's held-out result at least the other's?

One run of the demo says little: its held-out CI is about +-10 points, and the same commit gave
36.7% at one torch thread and 50.0% at two (issue 23). This bench runs the demo of each
``--rev`` (a git commit of this repository) on the same seeds and thread count, each from a
``git archive`` snapshot of that commit on ``PYTHONPATH`` (the current ``.venv``, the package
laid out as ``pyproject.toml`` maps it), ``--jobs`` runs at a time at ``--threads`` torch
threads each (keep jobs x threads <= cores: two 2-thread runs on 2 cores are 30-60x slower),
then prints per seed SFT -> SFT+GRPO (gain over SFT) for each commit and, over the seeds, the
mean and the paired difference (second ``--rev`` minus first) with a t interval.

A run whose ``seed-S.json`` exists under ``--out`` is read, not rerun (resume after a stop;
``--report`` only reads); one run with other demo arguments (after ``--``) is refused, since
two arms of one commit share its folder: give each arm its own ``--out``. The numbers do not
depend on the box's load at a fixed thread count; the minutes do.

Run (CPU, 2 cores; ~13-25 min per run at 1 thread):
    .venv/bin/python bench/demo_seeds.py --rev d401117 --rev HEAD --seeds 0-4 --out /tmp/seeds
    .venv/bin/python bench/demo_seeds.py --rev d401117 --rev HEAD --seeds 0-4 --out /tmp/seeds --report
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("envs", "judges", "trainer", "dashboard", "integrations")
"""Top-level folders that ``pyproject.toml`` maps to ``rankgym.<name>``."""


def seeds_of(text: str) -> list[int]:
    """``"0-4"`` -> [0, 1, 2, 3, 4]; ``"0,3,5"`` -> [0, 3, 5]."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def snapshot(rev: str, root: Path) -> tuple[str, Path]:
    """The commit ``rev`` names and a ``git archive`` of it laid out as an importable package."""
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if sha.returncode != 0:
        sys.exit(f"error: --rev {rev!r} is not a commit of {REPO}: {sha.stderr.strip()}")
    commit = sha.stdout.strip()
    pkg = root / f"code-{commit[:12]}"
    if not (pkg / "rankgym" / "__init__.py").is_file():
        tar = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True)  # fmt: skip
        src = root / f"src-{commit[:12]}"
        shutil.rmtree(src, ignore_errors=True)
        with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
            t.extractall(src, filter="data")
        pkg.mkdir(parents=True, exist_ok=True)
        shutil.move(str(src / "rankgym"), pkg / "rankgym")
        for sub in SUBPACKAGES:
            if (src / sub).is_dir():
                shutil.move(str(src / sub), pkg / "rankgym" / sub)
        shutil.rmtree(src)
    return commit, pkg


def run_one(pkg: Path, out: Path, seed: int, threads: int, extra: list[str]) -> dict[str, Any]:
    """One ``rankgym demo --seed S --json`` of the snapshot at ``pkg``; its summary plus wall."""
    done = out / f"seed-{seed}.json"
    if done.is_file():
        kept = json.loads(done.read_text())
        ran = kept.get("demo_args")  # absent in runs written before it was recorded
        if ran is not None and ran != extra:
            raise RuntimeError(
                f"{done} ran `rankgym demo {' '.join(ran)}`, not `{' '.join(extra)}`: another "
                "arm of the same commit; give this one its own --out"
            )
        return kept
    env = {**os.environ, "PYTHONPATH": str(pkg), "RANKGYM_THREADS": str(threads),
           "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip
    # -P and cwd: `python -m` would put the working directory first on sys.path, ahead of
    # PYTHONPATH, and from a checkout that is today's tree, not the snapshot
    cmd = [sys.executable, "-P", "-m", "rankgym", "demo", "--seed", str(seed), "--json",
           "--out", str(out / f"seed-{seed}"), *extra]  # fmt: skip
    probe = [sys.executable, "-P", "-c", "import rankgym; print(rankgym.__file__)"]
    where = subprocess.run(probe, env=env, cwd=pkg, capture_output=True, text=True, check=False)
    if not where.stdout.strip().startswith(str(pkg)):
        raise RuntimeError(f"the snapshot {pkg} does not import as rankgym: {where.stdout or where.stderr}")  # fmt: skip
    t0 = time.monotonic()
    with open(out / f"seed-{seed}.log", "w") as log:
        proc = subprocess.run(cmd, env=env, cwd=pkg, stdout=subprocess.PIPE, stderr=log, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}; see {out}/seed-{seed}.log")
    summary = summary_of(proc.stdout)
    summary["code"] = str(pkg)
    summary["wall_s"] = round(time.monotonic() - t0, 1)
    summary["threads"] = threads
    summary["demo_args"] = extra
    done.write_text(json.dumps(summary, indent=2))
    return summary


def summary_of(stdout: str) -> dict[str, Any]:
    """The demo's ``--json`` object: the last stdout line that parses as one."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and "trained_success" in obj:
                return obj
    raise RuntimeError("the demo printed no --json summary")


def interval(diffs: list[float]) -> tuple[float, float] | None:
    """95% t interval of the mean of ``diffs`` (None for fewer than 2)."""
    if len(diffs) < 2:
        return None
    from scipy import stats

    m, se = statistics.mean(diffs), statistics.stdev(diffs) / len(diffs) ** 0.5
    h = float(stats.t.ppf(0.975, len(diffs) - 1)) * se
    return m - h, m + h


def report(revs: list[str], runs: dict[str, dict[int, dict[str, Any]]], seeds: list[int]) -> str:
    """Markdown: per seed SFT -> SFT+GRPO (gain) per commit; means; paired differences."""

    def pct(x: float) -> str:
        return f"{100 * x:.1f}"

    lines = ["| seed | " + " | ".join(f"{r[:7]}: SFT -> SFT+GRPO (gain)" for r in revs) + " |"]
    lines.append("| --- |" + " --- |" * len(revs))
    for s in seeds:
        cells = []
        for r in revs:
            x = runs[r].get(s)
            cells.append(
                "-" if x is None
                else f"{pct(x['sft_success'])} -> {pct(x['trained_success'])} ({100 * x['trained_vs_sft']:+.1f})"
            )  # fmt: skip
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    both = [s for s in seeds if all(s in runs[r] for r in revs)]
    out = "\n".join(lines) + "\n"
    if not both:
        return out
    for key, name in (("trained_success", "SFT+GRPO"), ("trained_vs_sft", "gain over SFT"),
                      ("sft_success", "SFT")):  # fmt: skip
        means = [statistics.mean(100 * runs[r][s][key] for s in both) for r in revs]
        out += f"\n{name}, mean over seeds {both}: " + ", ".join(f"{r[:7]} {m:.1f}" for r, m in zip(revs, means, strict=True))  # fmt: skip
        if len(revs) == 2:
            d = [100 * (runs[revs[1]][s][key] - runs[revs[0]][s][key]) for s in both]
            ci = interval(d)
            wins = sum(x > 0 for x in d), sum(x == 0 for x in d), sum(x < 0 for x in d)
            out += (f"; {revs[1][:7]} - {revs[0][:7]} {statistics.mean(d):+.1f}"
                    + (f" (95% t interval {ci[0]:+.1f} to {ci[1]:+.1f})" if ci else "")
                    + f", higher / equal / lower on {wins[0]} / {wins[1]} / {wins[2]} seeds")  # fmt: skip
    return out + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--rev", action="append", required=True, help="a commit (repeat: 1 or 2)")
    ap.add_argument("--seeds", default="0-4", help="e.g. 0-4 or 1,2,3 (default: 0-4)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per run (default: 1)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (default: 2)")
    ap.add_argument("--out", default="runs/bench-demo-seeds")
    ap.add_argument("--report", action="store_true", help="only read finished runs")
    ap.add_argument("demo_args", nargs="*", help="after --: more `rankgym demo` arguments")
    args = ap.parse_args()
    if not 1 <= len(args.rev) <= 2:
        sys.exit("error: give --rev once or twice (the second is compared with the first)")
    if args.threads < 1 or args.jobs < 1:
        sys.exit("error: --threads and --jobs must be at least 1")
    seeds = seeds_of(args.seeds)
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    snaps = [snapshot(r, root) for r in args.rev]
    revs = [c for c, _ in snaps]
    runs: dict[str, dict[int, dict[str, Any]]] = {c: {} for c in revs}
    for c, _ in snaps:
        (root / c[:12]).mkdir(exist_ok=True)
    if args.report:
        for c in revs:
            for s in seeds:
                f = root / c[:12] / f"seed-{s}.json"
                if f.is_file():
                    runs[c][s] = json.loads(f.read_text())
    else:
        jobs = [(c, pkg, s) for s in seeds for c, pkg in snaps]
        with ThreadPoolExecutor(args.jobs) as pool:
            futs = {(c, s): pool.submit(run_one, pkg, root / c[:12], s, args.threads, args.demo_args)
                    for c, pkg, s in jobs}  # fmt: skip
            for (c, s), f in futs.items():
                runs[c][s] = f.result()
                print(f"done: {c[:7]} seed {s} ({runs[c][s].get('wall_s', '?')} s)", flush=True)
    print(report(revs, runs, seeds))


if __name__ == "__main__":
    main()
