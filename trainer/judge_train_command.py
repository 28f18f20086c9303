"""`rankgym judge-train`: train a pairwise judge LoRA on a store's labels, then compare it.

Steps (each one's output lands under ``--out``, so an interrupted run can be rerun and skips
what is done): build the labelled pairs (``rankgym.judges.judge_data``: verifier and human
labels, split by task, order- and length-balanced) into ``data/``; rejection-sample K verdicts
per training presentation (``work/samples.jsonl``, appended batch by batch); train the LoRA
(``work/checkpoint`` every few steps); write the adapter to ``adapter/`` (temp dir, then
``os.replace``); judge the held-out pairs with the base judge(s) and the trained one through
LiteLLM and write ``report.json`` (paired CIs, ``rankgym.judges.judge_compare``).

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
import hashlib
import json
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

from rankgym.cli import Command
from rankgym.errors import UserError
from rankgym.judges.judge_compare import (
    compare,
    format_comparison,
    judge_pairs,
    litellm_respond,
    pair_group,
)
from rankgym.judges.judge_data import (
    baselines,
    build_dataset,
    presentations,
    read_jsonl,
    write_jsonl,
)
from rankgym.judges.pair_judge import PAIR_FORMAT, choice_ids, decision_context, pair_messages
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.store import Store

BASE_DEFAULT = "local/smollm2"


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
    p.add_argument("--save-dtype", choices=("float32", "bfloat16"), default="float32", help="dtype of the saved adapter weights (bfloat16 halves the file; default: %(default)s)")  # fmt: skip


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
    sources = _sources(args)
    if args.human_weight == 0 and sources == ("human",):
        raise UserError("--human-weight 0 with --sources human leaves nothing to train on")
    if args.rollout_env and not args.rollout_adapter:
        raise UserError("--rollout-env needs --rollout-adapter DIR (the policy to roll out)")
    for s in args.store:
        if not Path(s).is_file():
            raise UserError(f"store {s!r} does not exist; create one with `rankgym rollout --store {s} ...`")  # fmt: skip
    if args.base != BASE_DEFAULT and not Path(args.base).is_dir():
        raise UserError(f"--base {args.base!r}: use local/smollm2 or a local transformers model directory")  # fmt: skip


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


def _rollout(args: argparse.Namespace, out: Path, progress: bool) -> dict[str, Any] | None:
    """``--rollout-adapter``: the policy's groups on each env's judge split, into a store."""
    if not args.rollout_adapter:
        return None
    from .judge_rollout import adapter_policy, rollout_judge_split

    store = out / "data" / "rollout.db"
    store.parent.mkdir(parents=True, exist_ok=True)
    policy = adapter_policy(args.rollout_adapter, "judge-data-policy", seed=args.seed)
    envs = args.rollout_env or ["rankgym/ToolUse-v0"]
    rows = [
        rollout_judge_split(policy, env, store, tasks=args.rollout_tasks,
                            group_size=args.rollout_group_size, seed=args.seed,
                            max_turns=args.rollout_max_turns, progress=progress)
        for env in envs
    ]  # fmt: skip
    del policy
    args.store = [*args.store, str(store)]
    return {"store": str(store), "adapter": args.rollout_adapter, "envs": rows}


def _cap(pairs: list[Any], n: int, seed: int, prefer: set[str] | None = None) -> list[Any]:
    """At most ``n`` pairs, an equal share per env (seeded). Within an env, pairs from the
    ``prefer`` stores (the policy's own groups) come first, and the share is filled taking
    longer-wins and shorter-wins pairs in turn (near misses first on each side), so the cap
    keeps the length balance that the pairs allow."""
    from rankgym.judges.judge_data import visible_length

    prefer = prefer or set()
    by_env: dict[str, list[Any]] = {}
    for p in pairs:
        by_env.setdefault(p.env_id, []).append(p)
    rng = random.Random(seed)
    out: list[Any] = []
    envs = sorted(by_env)
    for k, env in enumerate(envs):
        items = list(by_env[env])
        rng.shuffle(items)
        items.sort(key=lambda p: (p.store not in prefer, not p.near_miss))  # stable
        sides: dict[int, list[Any]] = {1: [], -1: [], 0: []}
        for p in items:
            lw, ll = visible_length(p.winner), visible_length(p.loser)
            sides[(lw > ll) - (lw < ll)].append(p)
        merged: list[Any] = []
        while any(sides.values()):
            for side in (0, 1, -1):
                if sides[side]:
                    merged.append(sides[side].pop(0))
        merged.sort(key=lambda p: p.store not in prefer)  # stable: the policy's pairs first
        share = (n - len(out)) // (len(envs) - k)
        out.extend(merged[:share])
    keep = {id(p) for p in out}
    return [p for p in pairs if id(p) in keep]


def _progress(args: argparse.Namespace) -> bool:
    return not (args.quiet or args.json or os.environ.get("RANKGYM_QUIET"))


def _dataset(args: argparse.Namespace, out: Path) -> tuple[list[Any], list[Any], dict[str, Any]]:
    stores = {s: Store(s, readonly=True) for s in args.store}
    try:
        ds = build_dataset(stores, args.heldout_fraction, args.min_gap, args.max_per_task,
                           not args.no_length_balance, args.seed, sources=_sources(args),
                           runs=args.run)  # fmt: skip
    finally:
        for s in stores.values():
            s.close()
    prefer = set(args.prefer_store or [])
    if args.rollout_adapter:  # the policy's judge-split rollout (see _rollout)
        prefer.add(str(out / "data" / "rollout.db"))
    train = _cap(ds.train, args.max_train_pairs, args.seed, prefer)
    heldout = _cap(ds.heldout, args.max_heldout_pairs, args.seed + 1, prefer)
    if not train or not heldout:
        raise UserError(
            f"the stores hold {len(ds.train)} training and {len(ds.heldout)} held-out labelled "
            "pairs; judge-train needs both: roll out trajectories that differ in verifiable "
            "reward on the same tasks (e.g. --policy oracle and --policy random runs), or rank "
            "groups in the dashboard"
        )
    stats = {**ds.stats, "used": {"train": len(train), "heldout": len(heldout),
             "train_baselines": baselines(train), "heldout_baselines": baselines(heldout)}}  # fmt: skip
    (out / "data").mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "data" / "train.jsonl", train)
    write_jsonl(out / "data" / "heldout.jsonl", heldout)
    (out / "data" / "dataset.json").write_text(json.dumps(stats, indent=2))
    return train, heldout, stats


def _examples(
    tok: Any, pairs: list[Any], cfg: Any, human_weight: float = 1.0
) -> tuple[list[Any], int]:
    from .judge_train import Example

    def cfg_weight(source: str) -> float:
        return human_weight if source == "human" else 1.0

    a, b = choice_ids(tok)
    rubric = default_rubric()
    out, skipped = [], 0
    for p, winner_first in presentations(pairs):
        g = pair_group(p)
        order = [p.winner.id, p.loser.id] if winner_first else [p.loser.id, p.winner.id]
        msgs = pair_messages(
            build_prompt(g, rubric, order).messages, "T1", "T2", cfg.max_line_chars
        )
        ctx = decision_context(tok, msgs)
        if len(ctx) > cfg.max_context_tokens:
            skipped += 1
            continue
        correct, wrong = (a, b) if winner_first else (b, a)
        weight = cfg_weight(p.source)
        out.append(Example(f"{p.id}:{int(winner_first)}", ctx, correct, wrong, weight=weight))
    return out, skipped


def _sample(model: Any, tok: Any, examples: list[Any], cfg: Any, path: Path, fresh: bool) -> None:
    """Rejection sampling with resume: finished keys are read back from ``path``."""
    from .judge_train import rejection_sample

    done: dict[str, dict[str, Any]] = {}
    if path.is_file() and not fresh:
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
                done[row["key"]] = row
            except (json.JSONDecodeError, KeyError):
                continue  # a line cut by a crash
    elif path.exists():
        path.unlink()
    todo = [ex for ex in examples if ex.key not in done]
    for ex in examples:
        if ex.key in done:
            ex.hits, ex.answer = done[ex.key]["hits"], done[ex.key]["answer"]
    bar = None
    if cfg.progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="rejection sampling", unit="pres", leave=False)
    with path.open("a", encoding="utf-8") as fh:

        def save(batch: list[Any]) -> None:
            for ex in batch:
                fh.write(json.dumps({"key": ex.key, "hits": ex.hits, "answer": ex.answer}) + "\n")
            fh.flush()
            if bar is not None:
                bar.update(len(batch))

        rejection_sample(model, tok, todo, cfg.train, on_batch=save)
    if bar is not None:
        bar.close()


def _run(args: argparse.Namespace) -> dict[str, Any]:
    if args.compare_only:
        return _compare_only(args)
    if not args.store and not args.rollout_adapter:
        raise UserError(
            "pass at least one --store S (a store with verifiable rewards or rankings) or "
            "--rollout-adapter DIR"
        )
    _check(args)
    from rankgym.model import load_causal_lm, load_embedded, set_torch_threads

    from .judge_train import (
        META_FILE,
        JudgeTrainConfig,
        add_lora,
        config_dict,
        save_adapter,
        train_judge,
    )

    t0 = time.perf_counter()
    threads = set_torch_threads()
    out = Path(args.out)
    (out / "work").mkdir(parents=True, exist_ok=True)
    progress = _progress(args)
    rollout = _rollout(args, out, progress)
    train_pairs, heldout, stats = _dataset(args, out)
    if rollout is not None:
        stats["rollout"] = rollout
        (out / "data" / "dataset.json").write_text(json.dumps(stats, indent=2))
    cfg = JudgeTrainConfig(
        samples=args.samples, reason_tokens=args.reason_tokens, epochs=args.epochs, lr=args.lr,
        batch_size=args.batch_size, lora_r=args.lora_r, lora_alpha=2 * args.lora_r,
        lora_layers=args.lora_layers or None,
        gamma=args.gamma, lambda_sft=args.lambda_sft, lambda_margin=args.lambda_margin,
        max_line_chars=args.max_line_chars, max_context_tokens=args.max_context_tokens,
        seed=args.seed, max_train_seconds=args.max_train_seconds,
    )  # fmt: skip
    model, tok = (
        load_embedded(dtype="float32") if args.base == BASE_DEFAULT else load_causal_lm(args.base)
    )
    examples, skipped = _examples(tok, train_pairs, cfg, args.human_weight)
    if not examples:
        raise UserError(f"every training presentation is longer than --max-context-tokens {cfg.max_context_tokens}; raise it or lower --max-line-chars")  # fmt: skip
    t_sample = time.perf_counter()
    _sample(model, tok, examples, argparse.Namespace(train=cfg, progress=progress),
            out / "work" / "samples.jsonl", args.fresh)  # fmt: skip
    t_train = time.perf_counter()
    fingerprint = hashlib.sha256(
        json.dumps([config_dict(cfg), [(e.key, e.answer) for e in examples]]).encode()
    ).hexdigest()[:16]
    if args.fresh and (out / "work" / "checkpoint").exists():
        shutil.rmtree(out / "work" / "checkpoint")
    model = add_lora(model, cfg)
    log = train_judge(model, tok, examples, cfg, out / "work", fingerprint, progress)
    meta = {"format": 1, "pair_format": PAIR_FORMAT, "base": args.base, "config": config_dict(cfg),
            "dataset": stats, "stores": args.store, "fingerprint": fingerprint,
            "sources": list(_sources(args)), "human_weight": args.human_weight}  # fmt: skip
    adapter = save_adapter(model, out, meta, dtype=args.save_dtype)
    t_done = time.perf_counter()
    summary: dict[str, Any] = {
        "adapter": str(adapter),
        "judge": f"local/smollm2@{adapter}",
        "train_pairs": len(train_pairs),
        "heldout_pairs": len(heldout),
        "train_presentations": len(examples),
        "skipped_too_long": skipped,
        "sampled_hit_rate": sum(e.hits for e in examples) / (cfg.samples * len(examples)),
        "sft_targets": sum(1 for e in examples if e.answer),
        "train_steps": len(log),
        "planned_steps": cfg.epochs * -(-len(examples) // cfg.batch_size),
        "max_train_seconds": cfg.max_train_seconds,
        "final_train": log[-1] if log else None,
        "last10_train_accuracy": sum(r["accuracy"] for r in log[-10:]) / max(1, len(log[-10:])),
        "seconds": {
            "data": t_sample - t0,
            "sampling": t_train - t_sample,
            "training": t_done - t_train,
        },  # fmt: skip
        "threads": threads,
        "load_avg": os.getloadavg()[0],
        "meta_file": str(adapter / META_FILE),
    }
    summary["stopped_on_time_cap"] = (
        bool(cfg.max_train_seconds) and len(log) < summary["planned_steps"]
    )
    del model
    if not args.no_compare:
        summary["comparison"] = _compare(args, heldout, summary["judge"], out, progress)
        summary["seconds"]["compare"] = time.perf_counter() - t_done
    summary["seconds"]["total"] = time.perf_counter() - t0
    tmp = out / "report.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    os.replace(tmp, out / "report.json")
    if not args.json:
        _print(summary)
    return summary


def _compare(args: argparse.Namespace, heldout: list[Any], trained: str | None, out: Path,
             progress: bool, name: str = "comparison") -> dict[str, Any]:  # fmt: skip
    """Judge ``heldout`` with ``--compare-with`` and ``trained``; each judge's rows are cached
    in ``work/judged/`` by model string and adapter hash, so adding a judge later re-judges
    nothing else."""
    from rankgym.judges.local_provider import adapter_fingerprint

    judges = [m.strip() for m in args.compare_with.split(",") if m.strip()]
    judges += [trained] if trained else []
    if not judges:
        raise UserError("nothing to compare: pass --compare-with MODELS or train an adapter first")
    rubric = default_rubric()
    cache = out / "work" / "judged"
    cache.mkdir(parents=True, exist_ok=True)
    ids = [p.id for p in heldout]
    results = {}
    for m in judges:
        key = hashlib.sha256(f"{m}|{adapter_fingerprint(m)}|{ids}".encode()).hexdigest()[:16]
        path = cache / f"{key}.json"
        if path.is_file():
            results[m] = json.loads(path.read_text())
            continue
        results[m] = judge_pairs(litellm_respond(m), heldout, rubric, progress, desc=m[-40:])
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(results[m]))
        os.replace(tmp, path)
    report = compare(results, heldout, seed=args.seed)
    (out / f"{name}.txt").write_text(format_comparison(report) + "\n")
    return report


def _compare_only(args: argparse.Namespace) -> dict[str, Any]:
    """``--compare-only``: the held-out pairs and adapter already in ``--out``, judged again."""
    out = Path(args.out)
    held = out / "data" / "heldout.jsonl"
    if not held.is_file():
        raise UserError(f"{held} does not exist; run `rankgym judge-train --out {args.out}` first")
    adapter = out / "adapter"
    trained = f"local/smollm2@{adapter}" if (adapter / "adapter_config.json").is_file() else None
    report = _compare(args, read_jsonl(held), trained, out, _progress(args), "comparison-only")
    tmp = out / "comparison-only.json.tmp"
    tmp.write_text(json.dumps(report, indent=2))
    os.replace(tmp, out / "comparison-only.json")
    if not args.json:
        print(format_comparison(report))
    return report


def _print(summary: dict[str, Any]) -> None:
    s = summary["seconds"]
    print(f"adapter: {summary['adapter']}  (serve it as --judge {summary['judge']})")
    print(f"pairs: {summary['train_pairs']} train, {summary['heldout_pairs']} held-out; "
          f"sampled verdict hit rate {summary['sampled_hit_rate']:.2f}; "
          f"time: data {s['data']:.0f}s, sampling {s['sampling']:.0f}s, training {s['training']:.0f}s"
          + (f", compare {s['compare']:.0f}s" if "compare" in s else ""))  # fmt: skip
    if summary.get("stopped_on_time_cap"):
        print(time_cap_line(summary))
    if "comparison" in summary:
        print(format_comparison(summary["comparison"]))


def time_cap_line(summary: dict[str, Any]) -> str:
    """What a judge-train run that stopped on its time cap says (command and train stage)."""
    return (
        f"judge-train: stopped on its time cap (max_train_seconds = "
        f"{summary['max_train_seconds']:g}) after {summary['train_steps']} of "
        f"{summary['planned_steps']} steps"
    )


JUDGE_TRAIN = Command(
    name="judge-train",
    help="train a pairwise judge LoRA from verifier/human labels and compare it",
    add_arguments=_args,
    run=_run,
)
