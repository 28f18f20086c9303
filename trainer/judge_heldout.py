"""Judging held-out pairs: how a judge-train run, and a check of an existing judge, measure
a judge on labelled pairs it never trained on.

- :func:`compare_heldout`: judge decided pairs with ``job.compare_with`` and a judge (each pair
  in both orders, rows cached in ``work/judged/``), compared in ``comparison.txt``; a judge
  whose score reads the group sees each pair among other attempts of its task (:func:`task_peers`).
- :func:`heldout_check`: that comparison and, given tie pairs, ``tie_check``'s lean on them:
  the ``comparison`` and ``ties`` of ``report.json`` (``judge_stage_check.stage_check`` reads them).
- :func:`compare_again`: a finished run's held-out pairs judged again (``--compare-only``).
- :func:`check_judge`: the pairs ``run_judge_train`` would build, *every* task held out, judged
  by an existing judge (the ``[judge_train]`` stage with ``train = false``).

What it does not do: train, or touch a judge's adapter.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from rankgym.errors import UserError
from rankgym.judge_adapter import reads_group
from rankgym.judges.judge_compare import (
    Peers,
    compare,
    format_comparison,
    judge_pairs,
    litellm_respond,
)
from rankgym.judges.judge_data import PairItem, build_dataset, cap_ties, task_pools
from rankgym.judges.pair_files import read_jsonl, write_jsonl
from rankgym.judges.prompt import default_rubric
from rankgym.store import Store
from rankgym.trainer.judge_job import JudgeTrainJob, TooFewPairs, check_job, require_checkable
from rankgym.trainer.judge_pairs import cap_pairs
from rankgym.types import Trajectory

__all__ = ["check_judge", "compare_again", "compare_heldout", "heldout_check", "judged_rows_key",
           "task_peers"]  # fmt: skip

PEERS = 6
"""Other attempts of its task a pair is shown with, for a judge that reads the group (a group
of 8, as a pointwise judge's training prompts: ``judge_points.TASK_GROUP``)."""


def judged_rows_key(model: str, ids: list[str], kind: str = "") -> str:
    """The ``work/judged/`` key of ``model``'s verdicts on the pairs ``ids``: the model string,
    its adapter's content hash and, for an in-process ``local/`` judge, its weights dtype (bf16
    and fp32 verdicts differ: ``RANKGYM_JUDGE_DTYPE``); ``kind`` tells caches apart."""
    from rankgym.judges.group_judge import in_process_dtype
    from rankgym.judges.local_provider import adapter_fingerprint

    dtype = in_process_dtype(model)
    suffix = f"|{dtype}" if dtype else ""
    return hashlib.sha256(f"{kind}{model}|{adapter_fingerprint(model)}|{ids}{suffix}".encode()).hexdigest()[:16]  # fmt: skip


def task_peers(job: JudgeTrainJob, pairs: list[PairItem], n: int = PEERS) -> Peers:
    """For each pair, up to ``n`` other attempts at its task from ``job.stores`` (every
    episode with a verifier outcome, repeats included, as a pointwise judge trains on them;
    a fixed choice: the first by trajectory id), for a judge whose score reads the group
    (``rankgym.judge_adapter.reads_group``)."""
    stores = {s: Store(s, readonly=True) for s in job.stores}
    try:
        pools = task_pools(stores, job.runs, dedupe=False)
    finally:
        for st in stores.values():
            st.close()
    wanted = {(p.env_id, p.task_id) for p in pairs}
    by_task = {k: sorted((t for _, t in pool.values()), key=lambda t: t.id)
               for k, pool in pools.items() if k in wanted}  # fmt: skip

    def peers(p: PairItem) -> list[Trajectory]:
        seen = {p.winner.id, p.loser.id}
        out: list[Trajectory] = []
        for t in by_task.get((p.env_id, p.task_id), []):
            if t.id not in seen and len(out) < n:
                seen.add(t.id)
                out.append(t)
        return out

    return peers


def compare_heldout(
    job: JudgeTrainJob,
    heldout: list[PairItem],
    trained: str | None,
    progress: bool,
    name: str = "comparison",
) -> dict[str, Any]:
    """Judge ``heldout`` with ``job.compare_with`` and ``trained``; each judge's rows are cached
    in ``work/judged/`` by model string and adapter hash, so adding a judge later re-judges
    nothing else."""
    judges = [*job.compare_with, *([trained] if trained else [])]
    if not judges:
        raise UserError("nothing to compare: pass --compare-with MODELS or train an adapter first")
    rubric = default_rubric()
    cache = job.out / "work" / "judged"
    cache.mkdir(parents=True, exist_ok=True)
    ids = [p.id for p in heldout]
    results = {}
    for m in judges:
        group = reads_group(m)
        path = cache / f"{judged_rows_key(m, ids, 'peers|' if group else '')}.json"
        if path.is_file():
            results[m] = json.loads(path.read_text())
            continue
        peers = task_peers(job, heldout) if group else None
        results[m] = judge_pairs(litellm_respond(m), heldout, rubric, progress, desc=m[-40:], peers=peers)  # fmt: skip
        _write_json(path, results[m])
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
    report = compare_heldout(job, read_jsonl(held), trained, progress, "comparison-only")
    _write_json(out / "comparison-only.json", report)
    return report


def heldout_check(
    job: JudgeTrainJob,
    pairs: list[PairItem],
    ties: list[PairItem],
    judge: str | None,
    progress: bool = False,
) -> dict[str, Any]:
    """``{"comparison": ...}`` of :func:`compare_heldout` on ``pairs``, plus ``"ties"``
    (``tie_check``) when there are tie pairs: the held-out half of a judge-train report."""
    out: dict[str, Any] = {"comparison": compare_heldout(job, pairs, judge, progress)}
    if ties and judge:
        from rankgym.trainer.judge_tie_check import tie_check

        out["ties"] = tie_check(job, ties, judge, progress)
    return out


def _write_json(path: Path, data: dict[str, Any]) -> None:
    from rankgym.trainer.checkpoint import write_json_atomic  # imports torch: not at module load

    write_json_atomic(path, data)


def check_judge(job: JudgeTrainJob, judge: str, progress: bool = False) -> dict[str, Any]:
    """Judge every labelled pair of ``job.stores`` (``job.max_heldout_pairs`` at most, and
    ``job.tie_ratio`` tie pairs per pair) with ``judge``; returns judge-train's summary shape
    (``judge``, ``heldout_pairs``, ``comparison``, ``ties``), also in ``out/report.json``.

    Raises :class:`UserError` when the stores hold no labelled pair."""
    check_job(job)
    t0 = time.perf_counter()
    stores = {s: Store(s, readonly=True) for s in job.stores}
    seed = job.train.seed
    try:
        ds = build_dataset(stores, 0.0, job.min_gap, job.max_per_task, job.length_balance, seed,
                           sources=job.sources, runs=job.runs, tie_ratio=job.tie_ratio,
                           prefer_stores=set(job.prefer_stores))  # fmt: skip
    finally:
        for s in stores.values():
            s.close()
    pairs = cap_pairs(ds.train, job.max_heldout_pairs, seed + 1, set(job.prefer_stores))
    ties = cap_ties(ds.train_ties, round(job.tie_ratio * len(pairs)), seed + 1, set(job.prefer_stores))  # fmt: skip
    tasks = len({(p.env_id, p.task_id) for p in pairs})
    if not pairs:
        raise TooFewPairs(
            f"the stores hold no labelled pair to check {judge} on: roll out trajectories that "
            "differ in verifiable reward on the same tasks, or rank groups in the dashboard",
            0,
            0,
            0,
        )
    held = f"the stores hold {len(pairs)} labelled pairs in {tasks} tasks to check {judge} on"
    require_checkable(job, held, 0, len(pairs), tasks)
    data = job.out / "data"
    data.mkdir(parents=True, exist_ok=True)
    write_jsonl(data / "heldout.jsonl", pairs)
    if ties:
        write_jsonl(data / "heldout_ties.jsonl", ties)
    summary: dict[str, Any] = {
        "judge": judge,
        "trained": False,
        "train_pairs": 0,
        "heldout_pairs": len(pairs),
        "dataset": {**ds.stats, "used": {"heldout": len(pairs), "heldout_ties": len(ties)}},
        **heldout_check(job, pairs, ties, judge, progress),
    }
    summary["seconds"] = {"total": time.perf_counter() - t0}
    _write_json(job.out / "report.json", summary)
    return summary
