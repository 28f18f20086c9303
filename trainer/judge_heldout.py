"""An existing judge checked on a judge-train job's labelled pairs, trained on nothing.

:func:`check_judge` builds the pairs ``run_judge_train`` would (same stores, sources, near-miss
order, length balance, caps and tie pairs) but holds *every* task out, and judges them with the
given judge exactly as judge-train's held-out comparison does (each pair in both orders; tie
pairs through ``tie_check``). Its summary has the keys ``judge_stage._check`` reads, so the
``[judge_train]`` stage with ``train = false`` checks ``init_judge`` on this policy's groups
the way it checks a judge it trained.

What it does not do: train, or touch the judge's adapter.
"""

from __future__ import annotations

import time
from typing import Any

from rankgym.errors import UserError
from rankgym.judges.judge_data import build_dataset, cap_ties, write_jsonl
from rankgym.store import Store
from rankgym.trainer.judge_pipeline import JudgeTrainJob, _compare, cap_pairs, check_job


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
    if not pairs:
        raise UserError(
            f"the stores hold no labelled pair to check {judge} on: roll out trajectories that "
            "differ in verifiable reward on the same tasks, or rank groups in the dashboard"
        )
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
        "comparison": _compare(job, pairs, judge, progress),
    }
    if ties:
        from rankgym.trainer.judge_tie_check import tie_check

        summary["ties"] = tie_check(job, ties, judge, progress)
    summary["seconds"] = {"total": time.perf_counter() - t0}
    from rankgym.trainer.checkpoint import write_json_atomic  # imports torch: not at module load

    write_json_atomic(job.out / "report.json", summary)
    return summary
