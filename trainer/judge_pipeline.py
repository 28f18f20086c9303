"""Judge training end to end, as a library call: labelled pairs -> samples -> LoRA -> comparison.

Import path: ``rankgym.trainer.judge_pipeline``. :func:`run_judge_train` is what both
``rankgym judge-train`` (``judge_train_command``: argparse and printing only) and GRPO's
``[judge_train]`` stage (``judge_stage``) call. Each step's output lands under ``job.out``, so an
interrupted run can be rerun and skips what is done: build the labelled pairs
(``rankgym.judges.judge_data``: verifier and human labels, split by task, order- and
length-balanced) into ``data/``; rejection-sample K verdicts per training presentation
(``work/samples.jsonl``, appended batch by batch); train the LoRA (``trainer/judge_train.py``,
``work/checkpoint`` every few steps); write the adapter to ``adapter/``; judge the held-out pairs
with the base judge(s) and the trained one through LiteLLM and write ``report.json``.

```python
from pathlib import Path
from rankgym.trainer.judge_pipeline import JudgeTrainJob, run_judge_train
from rankgym.trainer.judge_train import JudgeTrainConfig

summary = run_judge_train(JudgeTrainJob(Path("runs/judge"), stores=["runs/data.db"],
                                        train=JudgeTrainConfig(epochs=1)))
print(summary["judge"])  # local/smollm2@runs/judge/adapter
```

What it does not do: check flag ranges (the command does, naming the flag; the stage's config
is validated by pydantic), print anything, train on groups larger than two, or use an API
model as base.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.errors import UserError
from rankgym.judges.judge_compare import (
    compare,
    format_comparison,
    judge_pairs,
    litellm_respond,
    pair_group,
)
from rankgym.judges.judge_data import (
    PairItem,
    baselines,
    build_dataset,
    cap_ties,
    presentations,
    read_jsonl,
    write_jsonl,
)
from rankgym.judges.pair_judge import PAIR_FORMAT, choice_ids, decision_context, pair_messages
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.store import Store

if TYPE_CHECKING:
    from rankgym.trainer.judge_train import Example, JudgeTrainConfig

BASE_DEFAULT = "local/smollm2"
ROLLOUT_STORE = Path("data") / "rollout.db"
"""Where, under ``out``, the policy's judge-split rollout goes (``JudgeRollout``)."""


def _train_defaults() -> JudgeTrainConfig:
    from rankgym.trainer.judge_train import JudgeTrainConfig

    return JudgeTrainConfig()


@dataclass(frozen=True)
class JudgeRollout:
    """Roll a policy adapter out on each env's ``judge`` split into ``out/data/rollout.db``
    first, and train on those groups too (they are preferred under the pair caps)."""

    adapter: str
    envs: tuple[str, ...] = ("rankgym/ToolUse-v0",)
    tasks: int | None = None
    """Judge-split tasks per env (None: all)."""
    group_size: int = 4
    max_turns: int | None = None
    """Assistant turns per episode (None: the env's)."""


@dataclass
class JudgeTrainJob:
    """One judge-train run: where the labels come from, how pairs are built, how it trains."""

    out: Path
    stores: list[str] = field(default_factory=list)
    """Stores to take labelled trajectories from."""
    base: str = BASE_DEFAULT
    """``local/smollm2`` or a local transformers model directory."""
    heldout_fraction: float = 0.3
    min_gap: float = 0.5
    """Smallest verifiable-reward difference that makes a pair."""
    max_per_task: int = 4
    max_train_pairs: int = 150
    max_heldout_pairs: int = 100
    length_balance: bool = True
    train: JudgeTrainConfig = field(default_factory=_train_defaults)
    """The training knobs; ``train.seed`` also seeds the split, the caps and the comparison."""
    compare_with: tuple[str, ...] = (BASE_DEFAULT,)
    """Judges compared with the trained one on the held-out pairs."""
    compare: bool = True
    fresh: bool = False
    """Ignore samples and checkpoints already in ``out``."""
    runs: list[str] | None = None
    """Only groups of these run ids (None: every run)."""
    prefer_stores: list[str] = field(default_factory=list)
    """Stores whose pairs are taken first under the caps (the rollout's always is)."""
    sources: tuple[str, ...] = ("verifier", "human")
    human_weight: float = 1.0
    rollout: JudgeRollout | None = None
    save_dtype: str = "float32"
    tie_ratio: float = 0.0
    """Tie pairs (equal verifier rewards or equal human ranks; target 0.5, see
    ``judge_data.tie_pairs``) per decided pair on each side, at most; 0 = none."""
    init_adapter: str | None = None
    """Continue training this judge adapter (its LoRA shape; ``lora_*`` knobs ignored)
    instead of a fresh LoRA."""


def check_job(job: JudgeTrainJob) -> None:
    """The :class:`UserError` a job with missing inputs raises before any work."""
    if not job.stores and job.rollout is None:
        raise UserError(
            "pass at least one --store S (a store with verifiable rewards or rankings) or "
            "--rollout-adapter DIR"
        )
    for s in job.stores:
        if not Path(s).is_file():
            raise UserError(f"store {s!r} does not exist; create one with `rankgym rollout --store {s} ...`")  # fmt: skip
    if job.human_weight == 0 and tuple(job.sources) == ("human",):
        raise UserError("--human-weight 0 with --sources human leaves nothing to train on")
    if not (0.0 <= job.tie_ratio <= 100.0):  # False for nan
        raise UserError(f"--tie-ratio must be a number in [0, 100] (got {job.tie_ratio}); 0.5 = one tie pair per two decided pairs")  # fmt: skip
    from rankgym.trainer.judge_loss import TIE_LOSSES

    if job.train.tie_loss not in TIE_LOSSES:
        raise UserError(f"tie_loss must be {', '.join(TIE_LOSSES[:-1])} or {TIE_LOSSES[-1]} (got {job.train.tie_loss!r}); the served forms train ties on the order-averaged score")  # fmt: skip
    if job.init_adapter and not (Path(job.init_adapter) / "adapter_config.json").is_file():
        raise UserError(f"--init-adapter {job.init_adapter!r} is not a peft adapter directory (no adapter_config.json); pass OUT/adapter of an earlier judge-train")  # fmt: skip
    if job.base != BASE_DEFAULT and not Path(job.base).is_dir():
        raise UserError(f"--base {job.base!r}: use local/smollm2 or a local transformers model directory")  # fmt: skip


def _rollout(job: JudgeTrainJob, progress: bool) -> dict[str, Any] | None:
    """``job.rollout``: the policy's groups on each env's judge split, into a store."""
    if job.rollout is None:
        return None
    from rankgym.trainer.judge_rollout import adapter_policy, rollout_judge_split

    r = job.rollout
    store = job.out / ROLLOUT_STORE
    store.parent.mkdir(parents=True, exist_ok=True)
    policy = adapter_policy(r.adapter, "judge-data-policy", seed=job.train.seed)
    rows = [
        rollout_judge_split(policy, env, store, tasks=r.tasks, group_size=r.group_size,
                            seed=job.train.seed, max_turns=r.max_turns, progress=progress)
        for env in r.envs
    ]  # fmt: skip
    del policy
    return {"store": str(store), "adapter": r.adapter, "envs": rows}


def cap_pairs(
    pairs: list[PairItem], n: int, seed: int, prefer: set[str] | None = None
) -> list[PairItem]:
    """At most ``n`` pairs, an equal share per env (seeded). Within an env, pairs from the
    ``prefer`` stores (the policy's own groups) come first, and the share is filled taking
    longer-wins and shorter-wins pairs in turn (near misses first on each side), so the cap
    keeps the length balance that the pairs allow."""
    from rankgym.judges.judge_data import visible_length

    prefer = prefer or set()
    by_env: dict[str, list[PairItem]] = {}
    for p in pairs:
        by_env.setdefault(p.env_id, []).append(p)
    rng = random.Random(seed)
    out: list[PairItem] = []
    envs = sorted(by_env)
    for k, env in enumerate(envs):
        items = list(by_env[env])
        rng.shuffle(items)
        items.sort(key=lambda p: (p.store not in prefer, not p.near_miss))  # stable
        sides: dict[int, list[PairItem]] = {1: [], -1: [], 0: []}
        for p in items:
            lw, ll = visible_length(p.winner), visible_length(p.loser)
            sides[(lw > ll) - (lw < ll)].append(p)
        merged: list[PairItem] = []
        while any(sides.values()):
            for side in (0, 1, -1):
                if sides[side]:
                    merged.append(sides[side].pop(0))
        merged.sort(key=lambda p: p.store not in prefer)  # stable: the policy's pairs first
        share = (n - len(out)) // (len(envs) - k)
        out.extend(merged[:share])
    keep = {id(p) for p in out}
    return [p for p in pairs if id(p) in keep]


def _dataset(
    job: JudgeTrainJob,
) -> tuple[list[PairItem], list[PairItem], dict[str, Any]]:
    """Decided train pairs plus tie pairs, held-out decided pairs (``heldout.jsonl``) and the
    stats; held-out tie pairs go to ``heldout_ties.jsonl`` (see :func:`tie_check`)."""
    stores = {s: Store(s, readonly=True) for s in job.stores}
    seed = job.train.seed
    prefer = set(job.prefer_stores)
    if job.rollout is not None:  # the policy's judge-split rollout (see _rollout)
        prefer.add(str(job.out / ROLLOUT_STORE))
    try:
        ds = build_dataset(stores, job.heldout_fraction, job.min_gap, job.max_per_task,
                           job.length_balance, seed, sources=job.sources,
                           runs=job.runs, tie_ratio=job.tie_ratio,
                           prefer_stores=prefer)  # fmt: skip
    finally:
        for s in stores.values():
            s.close()
    train = cap_pairs(ds.train, job.max_train_pairs, seed, prefer)
    heldout = cap_pairs(ds.heldout, job.max_heldout_pairs, seed + 1, prefer)
    train_ties = cap_ties(ds.train_ties, round(job.tie_ratio * len(train)), seed, prefer)
    heldout_ties = cap_ties(ds.heldout_ties, round(job.tie_ratio * len(heldout)), seed + 1, prefer)  # fmt: skip
    if not train or not heldout:
        raise UserError(
            f"the stores hold {len(ds.train)} training and {len(ds.heldout)} held-out labelled "
            "pairs; judge-train needs both: roll out trajectories that differ in verifiable "
            "reward on the same tasks (e.g. --policy oracle and --policy random runs), or rank "
            "groups in the dashboard"
        )
    stats = {**ds.stats, "used": {"train": len(train), "heldout": len(heldout),
             "train_baselines": baselines(train), "heldout_baselines": baselines(heldout),
             "train_ties": len(train_ties), "heldout_ties": len(heldout_ties)}}  # fmt: skip
    data = job.out / "data"
    data.mkdir(parents=True, exist_ok=True)
    write_jsonl(data / "train.jsonl", train + train_ties)
    write_jsonl(data / "heldout.jsonl", heldout)
    ties_file = data / "heldout_ties.jsonl"
    if heldout_ties:
        write_jsonl(ties_file, heldout_ties)
    elif ties_file.exists():
        ties_file.unlink()
    (data / "dataset.json").write_text(json.dumps(stats, indent=2))
    return train + train_ties, heldout, stats


def examples_of(
    tok: Any, pairs: list[PairItem], cfg: JudgeTrainConfig, human_weight: float = 1.0
) -> tuple[list[Example], int]:
    """Each pair presented in both orders, tokenised; and how many were left out as longer
    than ``cfg.max_context_tokens``. People's pairs weigh ``human_weight`` in the loss; a tie
    pair's presentations are tie examples (target 0.5, ``correct`` = the first shown)."""
    from rankgym.trainer.judge_train import Example

    a, b = choice_ids(tok)
    rubric = default_rubric()
    out: list[Example] = []
    skipped = 0
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
        correct, wrong = (a, b) if winner_first or p.tie else (b, a)
        weight = human_weight if p.source == "human" else 1.0
        out.append(Example(f"{p.id}:{int(winner_first)}", ctx, correct, wrong, weight=weight, tie=p.tie))  # fmt: skip
    return out, skipped


def _sample(
    model: Any,
    tok: Any,
    examples: list[Example],
    cfg: JudgeTrainConfig,
    path: Path,
    fresh: bool,
    progress: bool,
) -> None:
    """Rejection sampling with resume: finished keys are read back from ``path``."""
    from rankgym.trainer.judge_train import rejection_sample

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
    todo = [ex for ex in examples if ex.key not in done and not ex.tie]
    for ex in examples:
        if ex.key in done:
            ex.hits, ex.answer = done[ex.key]["hits"], done[ex.key]["answer"]
    bar = None
    if progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="rejection sampling", unit="pres", leave=False)
    with path.open("a", encoding="utf-8") as fh:

        def save(batch: list[Example]) -> None:
            for ex in batch:
                fh.write(json.dumps({"key": ex.key, "hits": ex.hits, "answer": ex.answer}) + "\n")
            fh.flush()
            if bar is not None:
                bar.update(len(batch))

        rejection_sample(model, tok, todo, cfg, on_batch=save)
    if bar is not None:
        bar.close()


def run_judge_train(job: JudgeTrainJob, progress: bool = False) -> dict[str, Any]:
    """Train and save the judge adapter of ``job``, compare it, and return the summary (also
    written to ``out/report.json``; ``summary["judge"]`` is the model string to serve).

    Raises :class:`UserError` on missing stores or too few labelled pairs. With
    ``job.rollout`` the rollout's store is read after ``job.stores`` (and listed in the
    adapter's metadata); ``job`` itself is not changed.
    """
    check_job(job)
    from rankgym.model import load_causal_lm, load_embedded, set_torch_threads
    from rankgym.trainer.judge_train import (
        META_FILE,
        config_dict,
        save_adapter,
        train_judge,
    )

    cfg = job.train
    t0 = time.perf_counter()
    threads = set_torch_threads()
    out = job.out
    (out / "work").mkdir(parents=True, exist_ok=True)
    rollout = _rollout(job, progress)
    if rollout is not None:
        job = replace(job, stores=[*job.stores, rollout["store"]])
    train_pairs, heldout, stats = _dataset(job)
    if rollout is not None:
        stats["rollout"] = rollout
        (out / "data" / "dataset.json").write_text(json.dumps(stats, indent=2))
    model, tok = (
        load_embedded(dtype="float32") if job.base == BASE_DEFAULT else load_causal_lm(job.base)
    )
    examples, skipped = examples_of(tok, train_pairs, cfg, job.human_weight)
    if not examples:
        raise UserError(f"every training presentation is longer than --max-context-tokens {cfg.max_context_tokens}; raise it or lower --max-line-chars")  # fmt: skip
    t_sample = time.perf_counter()
    _sample(model, tok, examples, cfg, out / "work" / "samples.jsonl", job.fresh, progress)
    t_train = time.perf_counter()
    fingerprint = hashlib.sha256(
        json.dumps(
            [config_dict(cfg), [(e.key, e.answer) for e in examples], job.init_adapter]
        ).encode()  # fmt: skip
    ).hexdigest()[:16]
    if job.fresh and (out / "work" / "checkpoint").exists():
        shutil.rmtree(out / "work" / "checkpoint")
    model = _with_lora(model, job)
    log = train_judge(model, tok, examples, cfg, out / "work", fingerprint, progress)
    meta = {"format": 1, "pair_format": PAIR_FORMAT, "base": job.base, "config": config_dict(cfg),
            "dataset": stats, "stores": job.stores, "fingerprint": fingerprint,
            "sources": list(job.sources), "human_weight": job.human_weight,
            "tie_ratio": job.tie_ratio, "init_adapter": job.init_adapter}  # fmt: skip
    adapter = save_adapter(model, out, meta, dtype=job.save_dtype)
    t_done = time.perf_counter()
    summary: dict[str, Any] = {
        "adapter": str(adapter),
        "judge": f"local/smollm2@{adapter}",
        "train_pairs": len(train_pairs),
        "heldout_pairs": len(heldout),
        "train_presentations": len(examples),
        "skipped_too_long": skipped,
        "sampled_hit_rate": sum(e.hits for e in examples)
        / max(1, cfg.samples * sum(not e.tie for e in examples)),
        "train_ties": sum(e.tie for e in examples) // 2,
        "sft_targets": sum(1 for e in examples if e.answer),
        "train_steps": len(log),
        "planned_steps": planned_steps(examples, cfg),
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
    if job.compare:
        summary["comparison"] = _compare(job, heldout, summary["judge"], progress)
        ties_file = out / "data" / "heldout_ties.jsonl"
        if ties_file.is_file():
            from rankgym.trainer.judge_tie_check import tie_check

            summary["ties"] = tie_check(job, read_jsonl(ties_file), summary["judge"], progress)
        summary["seconds"]["compare"] = time.perf_counter() - t_done
    summary["seconds"]["total"] = time.perf_counter() - t0
    tmp = out / "report.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    os.replace(tmp, out / "report.json")
    return summary


def planned_steps(examples: list[Any], cfg: JudgeTrainConfig) -> int:
    """Optimizer steps of every epoch of ``cfg`` on ``examples`` (``train_judge``'s plan)."""
    from rankgym.trainer.judge_loss import SERVED
    from rankgym.trainer.judge_train import length_batches

    keep = cfg.tie_loss in SERVED
    return sum(len(length_batches(examples, cfg.batch_size, cfg.seed * 1000 + e, keep)) for e in range(cfg.epochs))  # fmt: skip


def _with_lora(model: Any, job: JudgeTrainJob) -> Any:
    """A fresh LoRA (``add_lora``) or, with ``job.init_adapter``, that adapter, trainable."""
    from rankgym.trainer.judge_train import add_lora

    if not job.init_adapter:
        return add_lora(model, job.train)
    from peft import PeftModel

    return PeftModel.from_pretrained(model, job.init_adapter, is_trainable=True)


def _compare(
    job: JudgeTrainJob,
    heldout: list[PairItem],
    trained: str | None,
    progress: bool,
    name: str = "comparison",
) -> dict[str, Any]:
    """Judge ``heldout`` with ``job.compare_with`` and ``trained``; each judge's rows are cached
    in ``work/judged/`` by model string and adapter hash, so adding a judge later re-judges
    nothing else."""
    from rankgym.judges.local_provider import adapter_fingerprint

    judges = [*job.compare_with, *([trained] if trained else [])]
    if not judges:
        raise UserError("nothing to compare: pass --compare-with MODELS or train an adapter first")
    rubric = default_rubric()
    cache = job.out / "work" / "judged"
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
    report = compare(results, heldout, seed=job.train.seed)
    (job.out / f"{name}.txt").write_text(format_comparison(report) + "\n")
    return report


def compare_again(job: JudgeTrainJob, progress: bool = False) -> dict[str, Any]:
    """The held-out pairs and adapter already in ``job.out``, judged again by
    ``job.compare_with`` and the adapter (``comparison-only.json``); trains nothing."""
    out = job.out
    held = out / "data" / "heldout.jsonl"
    if not held.is_file():
        raise UserError(f"{held} does not exist; run `rankgym judge-train --out {out}` first")
    adapter = out / "adapter"
    trained = f"local/smollm2@{adapter}" if (adapter / "adapter_config.json").is_file() else None
    report = _compare(job, read_jsonl(held), trained, progress, "comparison-only")
    tmp = out / "comparison-only.json.tmp"
    tmp.write_text(json.dumps(report, indent=2))
    os.replace(tmp, out / "comparison-only.json")
    return report


def time_cap_line(summary: dict[str, Any]) -> str:
    """What a judge-train run that stopped on its time cap says (command and train stage)."""
    return (
        f"judge-train: stopped on its time cap (max_train_seconds = "
        f"{summary['max_train_seconds']:g}) after {summary['train_steps']} of "
        f"{summary['planned_steps']} steps"
    )
