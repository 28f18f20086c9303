"""Judge training end to end, as a library call: labelled pairs -> samples -> LoRA -> comparison.

Import path: ``rankgym.trainer.judge_pipeline``. :func:`run_judge_train` is what both
``rankgym judge-train`` (``judge_train_command``: argparse and printing only) and GRPO's
``[judge_train]`` stage (``judge_stage``) call. Each step's output lands under ``job.out``, so an
interrupted run can be rerun and skips what is done: build the labelled pairs into ``data/``
(``judge_pairs``); rejection-sample K verdicts per training presentation
(``work/samples.jsonl``, appended batch by batch); train the LoRA (``trainer/judge_train.py``,
``work/checkpoint`` every few steps); write the adapter to ``adapter/``; judge the held-out pairs
with the base judge(s) and the trained one through LiteLLM (``judge_heldout``) and write
``report.json``. The job itself is ``judge_job.JudgeTrainJob`` (re-exported here).

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
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.errors import UserError
from rankgym.judges.judge_compare import pair_group
from rankgym.judges.judge_data import PairItem
from rankgym.judges.pair_files import presentations, read_jsonl
from rankgym.judges.pair_judge import PAIR_FORMAT, choice_ids, decision_context, pair_messages
from rankgym.judges.point_judge import POINT_FORMAT
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.trainer.judge_heldout import compare_again, heldout_check
from rankgym.trainer.judge_job import (
    BASE_DEFAULT,
    ROLLOUT_STORE,
    JudgeRollout,
    JudgeTrainJob,
    check_job,
)
from rankgym.trainer.judge_pairs import cap_pairs, job_dataset
from rankgym.trainer.judge_points import point_examples

if TYPE_CHECKING:
    from rankgym.trainer.judge_train import Example, JudgeTrainConfig

__all__ = [  # the job, its checks and the held-out comparison are re-exported: one import path
    "BASE_DEFAULT",
    "JudgeRollout",
    "JudgeTrainJob",
    "cap_pairs",
    "check_job",
    "compare_again",
    "examples_of",
    "planned_steps",
    "run_judge_train",
    "time_cap_line",
]


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
    from rankgym.model import load_causal_lm, load_embedded
    from rankgym.threads import set_torch_threads
    from rankgym.trainer.checkpoint import write_json_atomic
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
    train_pairs, heldout, stats = job_dataset(job)
    if rollout is not None:
        stats["rollout"] = rollout
        (out / "data" / "dataset.json").write_text(json.dumps(stats, indent=2))
    model, tok = (
        load_embedded(dtype="float32") if job.base == BASE_DEFAULT else load_causal_lm(job.base)
    )
    pointwise = job.objective == "pointwise"
    if pointwise:
        # a pointwise tie pulls two scores together (a served tie loss); "presentation" would
        # pull each to 0.5, so then the tie pairs only serve the held-out check
        from rankgym.trainer.judge_loss import SERVED

        ties = [p for p in train_pairs if p.tie] if cfg.tie_loss in SERVED else []
        examples, points = point_examples(tok, job.stores, _heldout_tasks(out, heldout), cfg, job.runs, ties, job.agreement)  # fmt: skip
        stats["pointwise"] = points
        (out / "data" / "dataset.json").write_text(json.dumps(stats, indent=2))
        skipped = points["too_long"]
    else:
        examples, skipped = examples_of(tok, train_pairs, cfg, job.human_weight)
    if not examples:
        raise UserError(f"every training presentation is longer than --max-context-tokens {cfg.max_context_tokens}; raise it or lower --max-line-chars")  # fmt: skip
    t_sample = time.perf_counter()
    if not pointwise:  # a pointwise verdict is its label: no sampled rationale to imitate
        _sample(model, tok, examples, cfg, out / "work" / "samples.jsonl", job.fresh, progress)
    t_train = time.perf_counter()
    fingerprint = hashlib.sha256(
        json.dumps(
            [config_dict(cfg), [(e.key, e.answer, e.correct) for e in examples], job.init_adapter]
        ).encode()  # fmt: skip
    ).hexdigest()[:16]
    if job.fresh and (out / "work" / "checkpoint").exists():
        shutil.rmtree(out / "work" / "checkpoint")
    model = _with_lora(model, job)
    log = train_judge(model, tok, examples, cfg, out / "work", fingerprint, progress)
    meta = {"format": 1, "pair_format": PAIR_FORMAT, "objective": job.objective,
            "point_format": POINT_FORMAT if pointwise else None, "agreement": job.agreement,
            "base": job.base, "config": config_dict(cfg),
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
        "counterfactuals": {k: stats[k] for k in ("answer_swaps", "chain_edits") if k in stats},
        "objective": job.objective,
        "agreement": job.agreement,
        "pointwise": stats.get("pointwise"),
        "threads": threads,
        "load_avg": os.getloadavg()[0],
        "meta_file": str(adapter / META_FILE),
    }
    summary["stopped_on_time_cap"] = (
        bool(cfg.max_train_seconds) and len(log) < summary["planned_steps"]
    )
    del model
    if job.compare:
        ties_file = out / "data" / "heldout_ties.jsonl"
        ties = read_jsonl(ties_file) if ties_file.is_file() else []
        summary.update(heldout_check(job, heldout, ties, summary["judge"], progress))
        summary["seconds"]["compare"] = time.perf_counter() - t_done
    summary["seconds"]["total"] = time.perf_counter() - t0
    write_json_atomic(out / "report.json", summary)
    return summary


def _heldout_tasks(out: Path, heldout: list[PairItem]) -> set[tuple[str, str]]:
    """(env id, task id) of the held-out pairs and tie pairs: no pointwise example comes from
    them, so the check stays on tasks the judge never read."""
    ties = out / "data" / "heldout_ties.jsonl"
    extra = read_jsonl(ties) if ties.is_file() else []
    return {(p.env_id, p.task_id) for p in [*heldout, *extra]}


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


def time_cap_line(summary: dict[str, Any]) -> str:
    """What a judge-train run that stopped on its time cap says (command and train stage)."""
    return (
        f"judge-train: stopped on its time cap (max_train_seconds = "
        f"{summary['max_train_seconds']:g}) after {summary['train_steps']} of "
        f"{summary['planned_steps']} steps"
    )
