"""``rankgym judge-check``: does a judge tell good from bad? (``rankgym.trainer.judge_check``)

Rolls out calibration groups of known order from the env's oracle at graded noise, judges
each in its rollout order, reversed and shuffled, and prints pairwise accuracy, Kendall tau-b,
top-1 and position consistency with 95% cluster-bootstrap CIs. Groups and judgements go into
``--store`` (the dashboard's Agreement page shows them); a rerun reuses both.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.cli import Command
from rankgym.envs.registry import make
from rankgym.errors import UserError
from rankgym.judge_backend import parse_model
from rankgym.judges.commands import DEFAULT_JUDGE, _spec_from_args
from rankgym.judges.spec import check_credentials
from rankgym.model import cache_dir
from rankgym.store import Store
from rankgym.threads import set_torch_threads
from rankgym.trainer.judge_check import CheckConfig, run_check

if TYPE_CHECKING:
    from rankgym.trainer.judge_check import CheckReport, Estimate

MAX_GROUPS = 500
MAX_GROUP_SIZE = 16


def default_store() -> Path:
    """``judge-check.db`` in rankgym's cache dir (``$RANKGYM_CACHE`` or ~/.cache/rankgym)."""
    return cache_dir() / "judge-check.db"


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", required=True, metavar="ID", help="env id, e.g. rankgym/ToolUse-v0")
    p.add_argument("--judge", default=DEFAULT_JUDGE, metavar="MODEL", help="LiteLLM model string (default: %(default)s)")  # fmt: skip
    p.add_argument("--groups", type=int, default=8, metavar="N", help="calibration groups (tasks), default 8")  # fmt: skip
    p.add_argument("--group-size", type=int, default=4, metavar="G", help="noise levels per group, 0 to 1 (default 4)")  # fmt: skip
    p.add_argument("--permutations", type=int, default=3, metavar="K", help="orders per group: rollout, reversed, then shuffles (default 3, at least 2)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed for tasks, noise and shuffles (default 0)")  # fmt: skip
    p.add_argument("--split", default="train", help="task split (default: train)")
    p.add_argument("--store", help=f"SQLite store for groups and judgements (default: {default_store()})")  # fmt: skip
    p.add_argument("--rubric", metavar="FILE", help="comparison rubric (default: packaged)")
    p.add_argument("--api-base", help="server URL for self-hosted judges")
    p.add_argument("--context-window", type=int, help="judge's context in tokens")
    p.add_argument("--max-tokens", type=int, help="answer budget of the judge")
    p.add_argument("--concurrency", type=int, default=2, help="judge calls in flight (default 2)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")  # fmt: skip


def _bounded(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise UserError(f"{name} must be from {low} to {high} (got {value})")


def _run(args: argparse.Namespace) -> dict[str, Any]:
    _bounded("--groups", args.groups, 2, MAX_GROUPS)
    _bounded("--group-size", args.group_size, 2, MAX_GROUP_SIZE)
    _bounded("--permutations", args.permutations, 2, 24)
    _bounded("--concurrency", args.concurrency, 1, 64)
    _bounded("--resamples", args.resamples, 0, 100_000)
    spec = _spec_from_args(args)
    env = make(args.env)  # an UnknownEnvError is the CLI's one-line error
    tasks = env.tasks(args.split) if args.split in ("train", "test") else None
    if tasks is not None and not any(env.oracle(t) for t in tasks[:20]):
        raise UserError(
            f"--env {args.env} has no oracle (env.oracle(task) returns nothing), so it cannot "
            "make calibration groups of known order; pick an env with an oracle"
        )
    try:
        check_credentials(spec)
    except ValueError as e:
        raise UserError(str(e)) from None
    if parse_model(spec.model).in_process:
        set_torch_threads()
    path = Path(args.store) if args.store else default_store()
    cfg = CheckConfig(
        env_id=args.env, groups=args.groups, group_size=args.group_size,
        permutations=args.permutations, seed=args.seed, split=args.split,
        resamples=args.resamples, concurrency=args.concurrency,
    )  # fmt: skip
    with Store(path) as store:
        report = run_check(cfg, spec, store)
    if not args.json:
        print(format_check(report, path))
    return {**report.to_dict(), "store": str(path)}


def _estimate(v: Estimate) -> str:
    if v.value is None:
        return "   -   (undefined: no variation)"
    ci = "" if v.ci_low is None else f"  [{v.ci_low:+.2f}, {v.ci_high:+.2f}]"
    return f"{v.value:+.3f}{ci}"


def format_check(r: CheckReport, store: str | Path) -> str:
    """The report as text (what ``rankgym judge-check`` prints); ``store`` holds its groups."""
    lines = [
        f"judge-check {r.judge} on {r.env}: {r.judged} of {r.groups} groups judged "
        f"({r.group_size} noise levels, {r.permutations} orders each), "
        f"{r.seconds:.0f} s, spec {r.spec_hash}",
        "",
        "against the known order (verifier, then less noise), one unit per presentation:",
    ]
    for name, v in (("pairwise_accuracy", r.pairwise_accuracy), ("kendall_tau", r.kendall_tau),
                    ("top1", r.top1), ("position_consistency", r.position_consistency)):  # fmt: skip
        lines.append(f"  {name:<22} {_estimate(v)}")
    lines.append("kendall_tau by order: " + ", ".join(
        f"{k} {_estimate(v.kendall_tau).split('  ')[0]}" for k, v in r.by_order.items()
    ))  # fmt: skip
    lines.append("mean score by noise:  " + ", ".join(
        f"{k}: {v:.2f}" for k, v in r.mean_score_by_noise.items()
    ))  # fmt: skip
    lines.append("verifier by noise:    " + ", ".join(
        f"{k}: {v:.2f}" for k, v in r.mean_verifiable_by_noise.items()
    ))  # fmt: skip
    verdict = (
        "the judge tells better from worse here (tau CI above 0)"
        if r.can_judge
        else "NOT shown to tell better from worse (the tau CI includes 0): do not train on it "
        "alone; try a stronger --judge, more --groups, or a blended reward"
    )
    lines += ["", verdict, f"groups and judgements: rankgym dashboard --store {store}"]
    for e in r.errors:
        lines.append(f"  unjudged: {e}")
    return "\n".join(lines)


JUDGE_CHECK = Command("judge-check", _args, _run)
