"""A judge-train job's labelled pairs: built from its stores, capped, written to ``data/``.

:func:`job_dataset` is judge-train's data step (``rankgym.judges.judge_data.build_dataset``:
verifier and human labels, split by task, order- and length-balanced), then :func:`cap_pairs`
keeps at most so many per env, the policy's own pairs and near misses first.

What it does not do: sample, train or judge anything.
"""

from __future__ import annotations

import json
import random
from typing import Any

from rankgym.judges.judge_data import PairItem, baselines, build_dataset, cap_ties
from rankgym.judges.pair_files import write_jsonl
from rankgym.store import Store
from rankgym.trainer.judge_chain_edits import EDIT_STORE, chain_edits
from rankgym.trainer.judge_counterfactuals import SWAP_STORE, answer_swaps
from rankgym.trainer.judge_job import ROLLOUT_STORE, JudgeTrainJob, TooFewPairs, require_checkable

__all__ = ["cap_pairs", "job_dataset"]


def cap_pairs(
    pairs: list[PairItem],
    n: int,
    seed: int,
    prefer: set[str] | None = None,
    last: set[str] | None = None,
) -> list[PairItem]:
    """At most ``n`` pairs, an equal share per env (seeded). Within an env, pairs from the
    ``prefer`` stores (the policy's own groups) come first and those of the ``last`` stores
    (counterfactuals made from the others) last, and the share is filled taking longer-wins
    and shorter-wins pairs in turn (near misses first on each side), so the cap keeps the
    length balance that the pairs allow."""
    from rankgym.judges.judge_data import visible_length

    prefer, last = prefer or set(), last or set()
    by_env: dict[str, list[PairItem]] = {}
    for p in pairs:
        by_env.setdefault(p.env_id, []).append(p)
    rng = random.Random(seed)
    out: list[PairItem] = []
    envs = sorted(by_env)
    for k, env in enumerate(envs):
        items = list(by_env[env])
        rng.shuffle(items)
        items.sort(key=lambda p: (p.store in last, p.store not in prefer, not p.near_miss))
        sides: dict[int, list[PairItem]] = {1: [], -1: [], 0: []}
        for p in items:
            lw, ll = visible_length(p.winner), visible_length(p.loser)
            sides[(lw > ll) - (lw < ll)].append(p)
        merged: list[PairItem] = []
        while any(sides.values()):
            for side in (0, 1, -1):
                if sides[side]:
                    merged.append(sides[side].pop(0))
        merged.sort(key=lambda p: (p.store in last, p.store not in prefer))  # stable
        share = (n - len(out)) // (len(envs) - k)
        out.extend(merged[:share])
    keep = {id(p) for p in out}
    return [p for p in pairs if id(p) in keep]


def job_dataset(
    job: JudgeTrainJob,
) -> tuple[list[PairItem], list[PairItem], dict[str, Any]]:
    """Decided train pairs plus tie pairs, held-out decided pairs (``heldout.jsonl``) and the
    stats; held-out tie pairs go to ``heldout_ties.jsonl`` (see :func:`tie_check`)."""
    stores = {s: Store(s, readonly=True) for s in job.stores}
    seed = job.train.seed
    prefer = set(job.prefer_stores)
    if job.rollout is not None:  # the policy's judge-split rollout (see _rollout)
        prefer.add(str(job.out / ROLLOUT_STORE))
    swaps: dict[str, Any] = {}
    try:
        ds = build_dataset(stores, job.heldout_fraction, job.min_gap, job.max_per_task,
                           job.length_balance, seed, sources=job.sources,
                           runs=job.runs, tie_ratio=job.tie_ratio,
                           prefer_stores=prefer,
                           min_heldout_tasks=job.min_heldout_tasks)  # fmt: skip
        # the training side only: the held-out check stays on real pairs
        held_out = {(p.env_id, p.task_id) for p in ds.heldout + ds.heldout_ties}
        for n, make, name in ((job.answer_swaps, answer_swaps, "answer_swaps"),
                              (job.chain_edits, chain_edits, "chain_edits")):  # fmt: skip
            if n:
                made, made_stats = make(stores, held_out, n, max_per_task=job.max_per_task,
                                        min_gap=job.min_gap, seed=seed, runs=job.runs,
                                        env_kwargs=job.env_kwargs)  # fmt: skip
                ds.train.extend(made)  # last under the cap: never before a real pair
                swaps[name] = made_stats.to_dict()
    finally:
        for s in stores.values():
            s.close()
    train = cap_pairs(ds.train, job.max_train_pairs, seed, prefer, {SWAP_STORE, EDIT_STORE})
    heldout = cap_pairs(ds.heldout, job.max_heldout_pairs, seed + 1, prefer)
    train_ties = cap_ties(ds.train_ties, round(job.tie_ratio * len(train)), seed, prefer)
    heldout_ties = cap_ties(ds.heldout_ties, round(job.tie_ratio * len(heldout)), seed + 1, prefer)  # fmt: skip
    tasks = len({(p.env_id, p.task_id) for p in heldout})
    if not train or not heldout:
        raise TooFewPairs(
            f"the stores hold {len(ds.train)} training and {len(ds.heldout)} held-out labelled "
            "pairs; judge-train needs both: roll out trajectories that differ in verifiable "
            "reward on the same tasks (e.g. --policy oracle and --policy random runs), or rank "
            "groups in the dashboard",
            len(train),
            len(heldout),
            tasks,
        )
    held = f"the labelled pairs hold out {len(heldout)} pairs in {tasks} tasks and leave {len(train)} to train on"  # fmt: skip
    require_checkable(job, held, len(train), len(heldout), tasks)
    stats = {**ds.stats, **swaps, "used": {"train": len(train), "heldout": len(heldout),
             "train_baselines": baselines(train), "heldout_baselines": baselines(heldout),
             "train_ties": len(train_ties), "heldout_ties": len(heldout_ties),
             "train_answer_swaps": sum(p.store == SWAP_STORE for p in train),
             "train_chain_edits": sum(p.store == EDIT_STORE for p in train)}}  # fmt: skip
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
