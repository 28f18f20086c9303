"""`rankgym judge-train`: train a pairwise judge LoRA on a store's labels, then compare it.

This module is the command's argparse and printing only; the work is
:func:`rankgym.trainer.judge_pipeline.run_judge_train` (what GRPO's ``[judge_train]`` stage
calls too), whose docstring lists the steps and what lands under ``--out``.

Judge data from the policy itself: ``--store`` a training run's store (``--run`` picks its
groups), and ``--rollout-adapter DIR --rollout-env ENV`` rolls the policy adapter (e.g. the SFT
warm start) out on the env's ``judge`` split (train tasks GRPO never draws) into
``data/rollout.db`` first. ``--sources`` selects the label sources and ``--human-weight``
weights people's pairs in the loss; every pair records its source.

Serve the result as ``--judge local/smollm2@OUT/adapter`` in ``rankgym judge`` or a trainer
config. What it does not do: train on groups larger than two, or use an API model as base.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from rankgym.cli import Command
from rankgym.errors import UserError
from rankgym.judges.judge_compare import format_comparison
from rankgym.trainer.judge_job import OBJECTIVES
from rankgym.trainer.judge_pipeline import (
    BASE_DEFAULT,
    JudgeRollout,
    JudgeTrainJob,
    compare_again,
    run_judge_train,
    time_cap_line,
)


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", action="append", default=[], metavar="S", help="store to take labelled trajectories from (repeatable; required unless --compare-only)")  # fmt: skip
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (adapter/, data/, work/, report.json)")  # fmt: skip
    p.add_argument("--base", default=BASE_DEFAULT, help="base model: local/smollm2 or a local transformers model directory (default: %(default)s)")  # fmt: skip
    p.add_argument("--heldout-fraction", type=float, default=0.3, help="share of each env's tasks held out (default: 0.3)")  # fmt: skip
    p.add_argument("--min-gap", type=float, default=0.5, help="smallest verifiable-reward difference that makes a pair (default: 0.5)")  # fmt: skip
    p.add_argument("--max-per-task", type=int, default=4, help="pairs per task and label source (default: 4)")  # fmt: skip
    p.add_argument("--max-train-pairs", type=int, default=150, help="cap on training pairs, spread over envs (default: 150)")  # fmt: skip
    p.add_argument("--max-heldout-pairs", type=int, default=100, help="cap on held-out pairs (default: 100)")  # fmt: skip
    p.add_argument("--no-length-balance", action="store_true", help="keep pairs where the longer trajectory always wins")  # fmt: skip
    p.add_argument("--samples", type=int, default=4, metavar="K", help="verdicts sampled per presentation (default: 4)")  # fmt: skip
    p.add_argument("--reason-tokens", type=int, default=16, help="tokens of sampled rationale after a correct verdict; 0 = none (default: 16)")  # fmt: skip
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--max-train-seconds", type=float, help="stop training after this many seconds and keep the adapter (default: run every epoch)")  # fmt: skip
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--gamma", type=float, default=2.0, help="margin of the margin loss, in nats (default: 2.0)")  # fmt: skip
    p.add_argument("--lambda-sft", type=float, default=0.5)
    p.add_argument("--lambda-margin", type=float, default=1.0)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-layers", type=int, default=10, help="LoRA on the last N decoder layers only; 0 = all (default: 10)")  # fmt: skip
    p.add_argument("--max-line-chars", type=int, default=200, help="each prompt line is cut to this many characters (default: 200)")  # fmt: skip
    p.add_argument("--max-context-tokens", type=int, default=1024, help="training presentations longer than this are skipped (default: 1024)")  # fmt: skip
    p.add_argument("--compare-with", default="local/smollm2", metavar="MODELS", help="comma list of judges compared with the trained one on held-out pairs; '' = none (default: %(default)s)")  # fmt: skip
    p.add_argument("--no-compare", action="store_true", help="skip the held-out comparison")
    p.add_argument("--compare-only", action="store_true", help="train nothing: judge the held-out pairs already in --out with --compare-with and the adapter there (writes comparison-only.json)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fresh", action="store_true", help="ignore samples and checkpoints already in --out")  # fmt: skip
    p.add_argument("--run", action="append", default=None, metavar="R", help="only groups of this run id (repeatable; default: every run), e.g. a training run's id")  # fmt: skip
    p.add_argument("--prefer-store", action="append", default=None, metavar="S", help="a --store whose pairs are taken first under --max-train-pairs/--max-heldout-pairs, e.g. a training run's store (repeatable; the --rollout-adapter rollout always is)")  # fmt: skip
    p.add_argument("--sources", default="verifier,human", metavar="LIST", help="label sources to train on: verifier, human or both (default: %(default)s)")  # fmt: skip
    p.add_argument("--human-weight", type=float, default=1.0, metavar="W", help="loss weight of pairs labelled by people (default: 1.0)")  # fmt: skip
    p.add_argument("--rollout-adapter", metavar="DIR", help="first roll this policy adapter (e.g. OUT/sft of `rankgym train`) out on --rollout-env's judge split into OUT/data/rollout.db and train on it too")  # fmt: skip
    p.add_argument("--rollout-env", action="append", default=[], metavar="ENV", help="env for --rollout-adapter (repeatable; default rankgym/ToolUse-v0)")  # fmt: skip
    p.add_argument("--rollout-tasks", type=int, metavar="N", help="judge-split tasks per env (default: all)")  # fmt: skip
    p.add_argument("--rollout-group-size", type=int, default=4, metavar="G", help="episodes per task (default: 4)")  # fmt: skip
    p.add_argument("--rollout-max-turns", type=int, metavar="T", help="assistant turns per episode (default: the env's)")  # fmt: skip
    p.add_argument("--tie-ratio", type=float, default=0.0, metavar="R", help="also train on tie pairs (two different trajectories of a task with equal verifier rewards or equal human ranks; target 0.5 in both orders), at most R per decided pair; 0 = none (default: 0)")  # fmt: skip
    p.add_argument("--lambda-tie", type=float, default=1.0, help="weight of the tie loss (default: 1.0)")  # fmt: skip
    p.add_argument("--tie-loss", choices=TIE_LOSS_CHOICES, default="presentation", help="what the tie loss pulls to 0.5: each presentation's P(first better), the pair's order-averaged P that serving reads (served), or its order-averaged logit (served-logit: same zero, a gradient a position bias does not flatten); the served forms keep both orders in one batch (default: %(default)s)")  # fmt: skip
    p.add_argument("--answer-swaps", type=int, default=0, metavar="N", help="also train on up to N answer swaps per success of the training side: the success with a final reply the policy wrote elsewhere (the same task's failures first) in place of its own, labelled by replaying the env; teaches what the answer says rather than how long the episode is; 0 = none (default: 0)")  # fmt: skip
    p.add_argument("--objective", choices=OBJECTIVES, default="pairwise", help="pairwise: a judge that compares two attempts, trained on labelled pairs; pointwise: a judge that reads one attempt and answers yes/no, trained on every training-side trajectory with a verifier outcome (full marks = yes), which also counts the tasks whose attempts all succeed or all fail; the held-out check is on pairs either way (default: pairwise)")  # fmt: skip
    p.add_argument("--agreement", action="store_true", help="with --objective pointwise: the judge's prompt also says how many of the other attempts at the task gave the same final answer (self-consistency, a vote the judge learns how far to trust from the verifier's labels); served, the count is over the group it judges")  # fmt: skip
    p.add_argument("--chain-edits", type=int, default=0, metavar="N", help="also train on up to N chain edits per success of the training side: the success with its last call left out, or with one more call the policy made in a failed episode of the task, answering with what that chain returned, labelled by replaying the env; teaches whether the calls lead to the answer; 0 = none (default: 0)")  # fmt: skip
    p.add_argument("--init-adapter", metavar="DIR", help="continue training this judge adapter (OUT/adapter of an earlier judge-train; its LoRA shape, --lora-* ignored) instead of a fresh LoRA")  # fmt: skip
    p.add_argument("--save-dtype", choices=("float32", "bfloat16"), default="float32", help="dtype of the saved adapter weights (bfloat16 halves the file; default: %(default)s)")  # fmt: skip


TIE_LOSS_CHOICES = ("presentation", "served", "served-logit")
"""``--tie-loss`` values: ``rankgym.trainer.judge_loss.TIE_LOSSES`` (not imported here: torch)."""


# Every numeric flag: (lowest, highest, lowest is allowed). NaN and inf fail every range.
FLAG_RANGES: dict[str, tuple[float, float, bool]] = {
    "heldout_fraction": (0.0, 0.99, False),
    "min_gap": (0.0, 1.0, False),
    "max_per_task": (1, 100_000, True),
    "max_train_pairs": (1, 1_000_000, True),
    "max_heldout_pairs": (1, 1_000_000, True),
    "samples": (1, 64, True),
    "reason_tokens": (0, 1024, True),
    "epochs": (1, 1000, True),
    "lr": (0.0, 1.0, False),
    "max_train_seconds": (0.0, 1e7, False),
    "batch_size": (1, 1024, True),
    "gamma": (0.0, 100.0, True),
    "lambda_sft": (0.0, 100.0, True),
    "lambda_margin": (0.0, 100.0, True),
    "lora_r": (1, 1024, True),
    "lora_layers": (0, 10_000, True),
    "max_line_chars": (1, 100_000, True),
    "max_context_tokens": (1, 1_000_000, True),
    "seed": (0, 2**63 - 1, True),
    "human_weight": (0.0, 1000.0, True),
    "tie_ratio": (0.0, 100.0, True),
    "answer_swaps": (0, 64, True),
    "chain_edits": (0, 64, True),
    "lambda_tie": (0.0, 100.0, True),
    "rollout_tasks": (1, 1_000_000, True),
    "rollout_group_size": (2, 1024, True),
    "rollout_max_turns": (1, 1000, True),
}


DEFAULT_RANGE = (0, 1_000_000_000, True)
"""The range of a numeric flag missing from FLAG_RANGES (finite, never negative)."""


def _check(args: argparse.Namespace) -> None:
    numeric = {k for k, v in vars(args).items() if type(v) in (int, float)}
    for name in sorted(set(FLAG_RANGES) | numeric):
        low, high, closed = FLAG_RANGES.get(name, DEFAULT_RANGE)
        value = getattr(args, name, None)
        if value is None:
            continue
        inside = (low <= value if closed else low < value) and value <= high  # False for nan
        if not (math.isfinite(value) and inside):
            bracket = "[" if closed else "("
            raise UserError(
                f"--{name.replace('_', '-')} must be a finite number in {bracket}{low:g}, "
                f"{high:g}] (got {value})"
            )
    _sources(args)
    if args.rollout_env and not args.rollout_adapter:
        raise UserError("--rollout-env needs --rollout-adapter DIR (the policy to roll out)")


def _sources(args: argparse.Namespace) -> tuple[str, ...]:
    from rankgym.judges.judge_data import SOURCES

    picked = tuple(s.strip() for s in args.sources.split(",") if s.strip())
    bad = [s for s in picked if s not in SOURCES]
    if bad or not picked:
        raise UserError(
            f"--sources {args.sources!r}: choose from {', '.join(SOURCES)} (comma list), "
            "e.g. --sources verifier,human"
        )
    return picked


def _progress(args: argparse.Namespace) -> bool:
    return not (args.quiet or args.json or os.environ.get("RANKGYM_QUIET"))


def _job(args: argparse.Namespace) -> JudgeTrainJob:
    """The library job of the parsed flags."""
    from rankgym.trainer.judge_train import JudgeTrainConfig

    train = JudgeTrainConfig(
        samples=args.samples, reason_tokens=args.reason_tokens, epochs=args.epochs, lr=args.lr,
        batch_size=args.batch_size, lora_r=args.lora_r, lora_alpha=2 * args.lora_r,
        lora_layers=args.lora_layers or None,
        gamma=args.gamma, lambda_sft=args.lambda_sft, lambda_margin=args.lambda_margin,
        lambda_tie=args.lambda_tie, tie_loss=args.tie_loss,
        max_line_chars=args.max_line_chars, max_context_tokens=args.max_context_tokens,
        seed=args.seed, max_train_seconds=args.max_train_seconds,
    )  # fmt: skip
    rollout = None
    if args.rollout_adapter:
        rollout = JudgeRollout(
            args.rollout_adapter, tuple(args.rollout_env or ["rankgym/ToolUse-v0"]),
            tasks=args.rollout_tasks, group_size=args.rollout_group_size,
            max_turns=args.rollout_max_turns,
        )  # fmt: skip
    return JudgeTrainJob(
        Path(args.out), stores=list(args.store), base=args.base,
        heldout_fraction=args.heldout_fraction, min_gap=args.min_gap,
        max_per_task=args.max_per_task, max_train_pairs=args.max_train_pairs,
        max_heldout_pairs=args.max_heldout_pairs, length_balance=not args.no_length_balance,
        train=train,
        compare_with=tuple(m.strip() for m in args.compare_with.split(",") if m.strip()),
        compare=not args.no_compare, fresh=args.fresh, runs=args.run,
        prefer_stores=list(args.prefer_store or []), sources=_sources(args),
        human_weight=args.human_weight, rollout=rollout, save_dtype=args.save_dtype,
        tie_ratio=args.tie_ratio, init_adapter=args.init_adapter, answer_swaps=args.answer_swaps,
        chain_edits=args.chain_edits, objective=args.objective, agreement=args.agreement,
    )  # fmt: skip


def _run(args: argparse.Namespace) -> dict[str, Any]:
    if args.compare_only:
        report = compare_again(_job(args), _progress(args))
        if not args.json:
            print(format_comparison(report))
        return report
    _check(args)
    summary = run_judge_train(_job(args), _progress(args))
    if not args.json:
        _print(summary)
    return summary


def _print(summary: dict[str, Any]) -> None:
    s = summary["seconds"]
    print(f"adapter: {summary['adapter']}  (serve it as --judge {summary['judge']})")
    times = (f"time: data {s['data']:.0f}s, sampling {s['sampling']:.0f}s, training {s['training']:.0f}s"
             + (f", compare {s['compare']:.0f}s" if "compare" in s else ""))  # fmt: skip
    points = summary.get("pointwise")
    if points:  # a pointwise judge: trained on trajectories, checked on pairs
        print(f"pointwise{' with answer agreement' if summary.get('agreement') else ''}: {points['trajectories']} trajectories of {points['tasks']} training-side tasks "
              f"({points['success']} with full marks = yes, {points['failure']} = no; {points['too_long']} too long), "
              f"{points['ties']} tie pairs; "
              f"{summary['heldout_pairs']} held-out pairs; {times}")  # fmt: skip
    else:
        print(f"pairs: {summary['train_pairs']} train, {summary['heldout_pairs']} held-out; "
              f"sampled verdict hit rate {summary['sampled_hit_rate']:.2f}; {times}")  # fmt: skip
    if summary.get("stopped_on_time_cap"):
        print(time_cap_line(summary))
    for line in counterfactual_lines(summary.get("counterfactuals") or {}):
        print(line)
    if "comparison" in summary:
        print(format_comparison(summary["comparison"]))
    for judge, t in (summary.get("ties") or {}).items():
        print(f"held-out tie pairs ({t['pairs']}), {judge}: prefers the shorter {_f(t['prefers_shorter'])}, "
              f"fewer calls {_f(t['prefers_fewer_calls'])}, mean |P - 0.5| {_f(t['mean_abs_dev'])} "
              "(indifferent: 0.50, 0.50, 0.00)")  # fmt: skip


def counterfactual_lines(made: dict[str, dict[str, Any]]) -> list[str]:
    """One line per kind of counterfactual pair asked for (``--answer-swaps``,
    ``--chain-edits``): how many were made from how many successes, and why no more."""
    out = []
    for key, name in (("answer_swaps", "answer swaps"), ("chain_edits", "chain edits")):
        st = made.get(key)
        if st is None:
            continue
        n = st.get("swaps", sum(st.get(k, 0) for k in ("dropped", "reversed", "extended")))
        kinds = "" if key == "answer_swaps" else f" ({st['dropped']} drop, {st['reversed']} reverse, {st['extended']} extend)"  # fmt: skip
        why = [f"{st[k]} {k.replace('_', ' ')}" for k in ("not_worse", "no_answer", "not_reproduced", "no_task") if st.get(k)]  # fmt: skip
        if st.get("no_env"):
            why.append(f"envs not built here for the replay: {', '.join(st['no_env'])}")
        line = f"{name}: {n} made from {st['successes']} training-side successes{kinds}"
        if why:
            line += "; not made: " + ", ".join(why)
        if not st["successes"]:
            line += " (no success on the training side to make them from)"
        out.append(line + " (data/dataset.json)")
    return out


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


JUDGE_TRAIN = Command(
    name="judge-train",
    add_arguments=_args,
    run=_run,
)
