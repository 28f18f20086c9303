"""Does a judge trained with answer swaps or chain edits read the content rather than the
length? One arm.

Trains one judge the way the ``[judge_train]`` stage does (``trainer/judge_stage._job``, the
demo's settings plus ``--set`` overrides, e.g. ``answer_swaps``, ``chain_edits``), on the
policy's groups of ``--train`` (a store: e.g. a judge-split rollout), and checks it on each
``--check`` store's real pairs (every decided pair, no length balance, with tie pairs) and on
two content-only sets made from the first check store's successes, each alone with its
success: their answer swaps (what a judge that reads only length cannot order) and their
chain edits (a chain one call short, or one call too long, answering with what it returned). Prints one line per set: pairwise with its CI, the
better length rule on the same pairs, the share of tied pairs where it preferred the shorter,
and whether the stage's check passes (``judge_stage_check.stage_check`` with the stage's
thresholds, the tie lean included).

    .venv/bin/python bench/answer_swaps.py --train pool-train.db --check hard7.db \
        --check runs/demo/store.db --out /tmp/swaps4 \
        --set '{"answer_swaps": 4, "tie_ratio": 1.0, "tie_loss": "served-logit", "lambda_tie": 10,
                "max_train_pairs": 200, "max_pairs_per_task": 16, "heldout_fraction": 0.1}'

What it does not do: roll anything out (bring the stores), or run GRPO with the judge.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rankgym.store import Store  # noqa: E402
from rankgym.trainer.config import TrainConfig  # noqa: E402
from rankgym.trainer.demo import demo_config  # noqa: E402
from rankgym.trainer.judge_chain_edits import chain_edits  # noqa: E402
from rankgym.trainer.judge_counterfactuals import answer_swaps  # noqa: E402
from rankgym.trainer.judge_heldout import check_judge  # noqa: E402
from rankgym.trainer.judge_job import JudgeTrainJob  # noqa: E402
from rankgym.trainer.judge_pipeline import run_judge_train  # noqa: E402
from rankgym.trainer.judge_stage import _job  # noqa: E402
from rankgym.trainer.judge_stage_check import stage_check  # noqa: E402
from rankgym.types import Group  # noqa: E402

KEYS = ("heldout_pairs", "heldout_tasks", "pairwise_accuracy", "pairwise_accuracy_ci",
        "length_rule", "length_rule_picks", "tied_pairs", "tied_shorter", "passed")  # fmt: skip


def content_check_store(src: str, dst: Path, make: Callable[..., tuple[list[Any], Any]] = answer_swaps, per_success: int = 2) -> str:  # fmt: skip
    """A store of groups [success, one of its answer swaps (or ``make``'s pairs)] from
    ``src``'s successes."""
    with Store(src, readonly=True) as s:
        pairs, _ = make({src: s}, [], per_success, max_per_task=64)
    for suffix in ("", "-wal", "-shm"):  # a rerun (--checks-only) builds the set afresh
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    with Store(dst) as out:
        # a success can win several pairs: each group holds its own copy (ids are unique)
        out.put_groups([Group(run_id="content-check", env_id=p.env_id, task_id=p.task_id,
                              trajectories=[p.winner.model_copy(update={"id": f"{p.winner.id}-{i}"}), p.loser])
                        for i, p in enumerate(pairs)])  # fmt: skip
    return str(dst)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", required=True, help="store of the policy's groups to train on")
    ap.add_argument("--check", action="append", required=True, help="store to check on (repeatable)")  # fmt: skip
    ap.add_argument("--out", required=True)
    ap.add_argument("--set", default="{}", help="JSON of [judge_train] overrides")
    ap.add_argument("--checks-only", action="store_true", help="check the judge OUT/jt/report.json names (trained before) again, without training")  # fmt: skip
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    raw = demo_config(str(out / "run"), 6, "judge+verifiable", 0, judge_train=True)
    raw["judge_train"].update(json.loads(args.set))
    cfg = TrainConfig.model_validate(raw)
    assert cfg.judge_train is not None
    # every task of the store is replayed with the env's defaults, not the demo env's subset
    job = replace(_job(cfg, cfg.judge_train, out / "jt", [args.train]), env_kwargs={})
    t0 = time.time()
    report = out / "jt" / "report.json"
    summary = json.loads(report.read_text()) if args.checks_only else run_judge_train(job)
    data = json.loads((out / "jt" / "data" / "dataset.json").read_text())
    print(json.dumps({"train_seconds": round(time.time() - t0), "train_pairs": summary["train_pairs"],
                      "answer_swaps": data.get("answer_swaps"),
                      "chain_edits": data.get("chain_edits"), "used": data.get("used")}), flush=True)  # fmt: skip
    sets = {"answer swaps (content only)": [content_check_store(args.check[0], out / "swap-check.db")],
            "chain edits (content only)": [content_check_store(args.check[0], out / "edit-check.db", chain_edits)]}  # fmt: skip
    sets.update({Path(c).name if Path(c).name != "store.db" else str(Path(c).parent.name): [c] for c in args.check})  # fmt: skip
    for i, (name, stores) in enumerate(sets.items()):
        cj = JudgeTrainJob(out / f"check-{i}", stores=stores,
                           max_per_task=12, max_heldout_pairs=400, compare_with=(), tie_ratio=1.0,
                           length_balance=False)  # fmt: skip
        c = stage_check(
            check_judge(cj, summary["judge"]),
            cfg.judge_train.min_pairwise,
            cfg.judge_train.max_tied_shorter,
        )
        print(f"{name}: " + json.dumps({k: c[k] for k in KEYS}), flush=True)


if __name__ == "__main__":
    main()
