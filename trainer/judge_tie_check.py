"""How a judge treats tie pairs (two equally good trajectories): judge-train's held-out tie check.

:func:`tie_check` judges the held-out tie pairs of a ``rankgym judge-train --tie-ratio`` run
(``data/heldout_ties.jsonl``) with the compared judges and the trained one, each pair alone in
both orders, and :func:`tie_stats` reads the verdicts: the lean to the shorter trajectory and
to the one with fewer tool calls, and how far the scores are from even. The result is
``report.json`` ``ties`` and ``ties.json``. An indifferent judge scores 0.5, 0.5 and 0.

What it does not do: say which of two tied trajectories is better (nothing labels that), or
train anything.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rankgym.judge_adapter import reads_group
from rankgym.judges.judge_compare import judge_pairs, litellm_respond
from rankgym.judges.judge_data import PairItem, tool_call_count
from rankgym.judges.prompt import default_rubric

if TYPE_CHECKING:
    from rankgym.trainer.judge_job import JudgeTrainJob


def tie_stats(rows: list[dict[str, Any]], pairs: list[PairItem]) -> dict[str, Any]:
    """How a judge treats tie pairs, from :func:`judge_pairs` rows (winner slot = the longer).

    ``p_longer``: mean P(the longer is better) over presentations; ``prefers_shorter``: share
    of pairs (both orders averaged) where the shorter scored higher, counting an even split as
    half; ``prefers_fewer_calls`` the same for tool calls (pairs whose counts differ);
    ``mean_abs_dev``: mean |P - 0.5| per presentation. An indifferent judge: 0.5, 0.5, 0.5, 0.
    """
    by_pair: dict[str, list[float]] = {}
    for r in rows:
        if r.get("winner") is None:
            continue
        total = float(r["winner"]) + float(r["loser"])
        by_pair.setdefault(r["pair"], []).append(float(r["winner"]) / total if total > 0 else 0.5)  # fmt: skip
    items = {p.id: p for p in pairs}
    ps = [x for v in by_pair.values() for x in v]

    def lean(ids: list[str], shorter_is_loser: dict[str, bool]) -> float | None:
        if not ids:
            return None
        vals = []
        for i in ids:
            m = sum(by_pair[i]) / len(by_pair[i])
            s = 1.0 - m if shorter_is_loser[i] else m
            vals.append(1.0 if s > 0.5 else 0.5 if s == 0.5 else 0.0)
        return sum(vals) / len(vals)

    ids = [i for i in by_pair if i in items]
    calls = {i: tool_call_count(items[i].winner) - tool_call_count(items[i].loser) for i in ids}
    return {
        "pairs": len(ids),
        "p_longer": sum(ps) / len(ps) if ps else None,
        "prefers_shorter": lean(ids, dict.fromkeys(ids, True)),
        "prefers_fewer_calls": lean([i for i in ids if calls[i]], {i: calls[i] > 0 for i in ids}),
        "calls_differ": sum(1 for i in ids if calls[i]),
        "mean_abs_dev": sum(abs(x - 0.5) for x in ps) / len(ps) if ps else None,
        "failed_calls": sum(1 for r in rows if r.get("winner") is None),
    }


def tie_check(
    job: JudgeTrainJob, ties: list[PairItem], trained: str | None, progress: bool
) -> dict[str, dict[str, Any]]:
    """:func:`tie_stats` of ``job.compare_with`` and ``trained`` on held-out tie pairs (rows
    cached in ``work/judged/`` like the comparison's); also written to ``ties.json``."""
    from rankgym.trainer.checkpoint import write_json_atomic  # imports torch: not at module load
    from rankgym.trainer.judge_heldout import judged_rows_key, task_peers

    rubric = default_rubric()
    cache = job.out / "work" / "judged"
    cache.mkdir(parents=True, exist_ok=True)
    ids = [p.id for p in ties]
    report = {}
    for m in [*job.compare_with, *([trained] if trained else [])]:
        group = reads_group(m)
        path = cache / f"ties-{judged_rows_key(m, ids, 'ties|peers|' if group else 'ties|')}.json"
        if path.is_file():
            rows = json.loads(path.read_text())
        else:
            peers = task_peers(job, ties) if group else None
            rows = judge_pairs(litellm_respond(m), ties, rubric, progress, desc=m[-40:], peers=peers)  # fmt: skip
            write_json_atomic(path, rows)
        report[m] = tie_stats(rows, ties)
    write_json_atomic(job.out / "ties.json", report)
    return report
