"""Blind-ranking logic: which group a labeler sees next, in which order, and what they submit.

The queue samples across runs and envs: it picks a (run, env) stratum uniformly at random
among those with groups left for this labeler, then a uniformly random group inside it, so a
large run does not crowd a small one out. Groups the labeler already ranked or skipped are
never offered again; by default groups that anyone has ranked are left out too. With "include
labeled" (second opinions for human-vs-human agreement) the groups someone else ranked come
first, and unlabeled groups only once none of those is left.

:func:`rationale_letters` rewrites the judge's ``T1``, ``T2``... in a rationale to the letters
the labeler saw, so the reveal speaks the labeler's language.

What it does not do: it does not lock a group while someone ranks it. Two labelers can get the
same group at once; both rankings are kept (``Store.add_human_ranking`` appends).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from rankgym.store import Store
    from rankgym.types import Group, Judgement


@dataclass(frozen=True)
class LabelQueue:
    """Which groups ``labeler`` is offered: of one run / env (None: all), already labeled by
    someone else or not, judged or not; never a group this labeler ranked or skipped, never a
    group of fewer than two trajectories."""

    labeler: str
    run_id: str | None = None
    env_id: str | None = None
    include_labeled: bool = False
    judged_only: bool = True

    def filters(self) -> dict[str, Any]:
        """The ``Store`` group filters (``rankgym.store.filters.group_filters``) of this queue."""
        return {
            "not_labeled_by": self.labeler,
            "run_id": self.run_id,
            "env_id": self.env_id,
            "labeled": None if self.include_labeled else False,
            "judged": True if self.judged_only else None,
            "min_trajectories": 2,
        }


def queue_strata(store: Store, queue: LabelQueue) -> list[dict[str, Any]]:
    """(run_id, env_id, n) for every stratum with groups left in ``queue``."""
    return store.label_strata(**queue.filters())


def next_group(
    store: Store,
    queue: LabelQueue,
    *,
    exclude: set[str] | frozenset[str] = frozenset(),
    rng: random.Random | None = None,
) -> str | None:
    """A group id for the queue's labeler to rank next, or ``None`` when the queue is empty.

    With ``include_labeled`` a group someone else ranked is returned while one is left; only
    then an unlabeled one. ``exclude`` holds ids not to return (none by default: the store
    already leaves out what this labeler ranked or skipped).
    """
    rng = rng or random.Random()
    tiers = [True, False] if queue.include_labeled else [False]
    for labeled in tiers:
        gid = _pick(store, {**queue.filters(), "labeled": labeled}, exclude, rng)
        if gid is not None:
            return gid
    return None


def _pick(
    store: Store, filters: dict[str, Any], exclude: set[str] | frozenset[str], rng: random.Random
) -> str | None:
    """A random stratum, then a random group inside it, among groups matching ``filters``."""
    strata = store.label_strata(**filters)
    rng.shuffle(strata)
    for stratum in strata:
        one = {**filters, "run_id": stratum["run_id"], "env_id": stratum["env_id"]}
        start = rng.randrange(stratum["n"])
        ids = store.group_ids_page(32, start, **one)
        if len(ids) < 32 and start:
            ids += store.group_ids_page(32, 0, **one)
        for gid in ids:
            if gid not in exclude:
                return gid
    return None


def presentation_order(group_id: str, labeler: str, n: int) -> list[int]:
    """A shuffled order of ``n`` trajectories, fixed per (group, labeler) so reruns agree."""
    seed = int(hashlib.sha256(f"{group_id}\0{labeler}".encode()).hexdigest()[:12], 16)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def ranking_from_choices(choices: dict[str, int | None]) -> dict[str, float]:
    """Validate a labeler's rank per trajectory id (1 = best, equal = tie).

    Raises ``ValueError`` naming how many trajectories still lack a rank.
    """
    missing = [k for k, v in choices.items() if v is None]
    if missing:
        raise ValueError(
            f"{len(missing)} of {len(choices)} trajectories have no rank yet; give each one a "
            "rank (equal ranks are ties) or skip the group."
        )
    return {k: float(v) for k, v in choices.items() if v is not None}


def competition_ranks(scores: dict[str, float]) -> dict[str, float]:
    """Scores to ranks (1 = highest; ties share the best rank: 0.9, 0.9, 0.5 -> 1, 1, 3)."""
    values = sorted(scores.values(), reverse=True)
    return {k: float(values.index(v) + 1) for k, v in scores.items()}


_JUDGE_LABEL = re.compile(r"\bT(\d+)\b")


def judge_labels(judgement: Judgement | None, trajectory_id: str) -> dict[str, str]:
    """The judge's labels (``T1``...) -> trajectory ids of the prompt that wrote the rationale
    of ``trajectory_id``: the first presentation, or its first part holding that trajectory
    when the group was judged in overlapping parts. Empty when the record does not say."""
    if judgement is None or not judgement.presentations:
        return {}
    first = judgement.presentations[0]
    order = first.get("order") or []
    for part in first.get("subsets") or []:
        if trajectory_id in (part.get("order") or []):
            order = part["order"]
            break
    return {f"T{k + 1}": str(tid) for k, tid in enumerate(order)}


def rationale_letters(rationale: str, labels: dict[str, str], letters: dict[str, str]) -> str:
    """``rationale`` with each judge label (``T4``) replaced by the labeler's letter for the same
    trajectory (``C``); ``labels``: judge label -> trajectory id (:func:`judge_labels`),
    ``letters``: trajectory id -> the labeler's letter. Unknown labels stay as they are."""

    def swap(m: re.Match[str]) -> str:
        tid = labels.get(m.group(0))
        return letters.get(tid, m.group(0)) if tid is not None else m.group(0)

    return _JUDGE_LABEL.sub(swap, rationale)


def group_with_letters(group: Group, letters: dict[str, str]) -> Group:
    """A copy of ``group`` whose judge rationales name trajectories by ``letters`` (trajectory
    id -> the letter shown on the page) instead of the judge's ``T1``, ``T2``...; the store's
    record is unchanged."""
    j = group.judgement
    if j is None:
        return group
    scores = [
        s.model_copy(
            update={
                "rationale": rationale_letters(
                    s.rationale, judge_labels(j, s.trajectory_id), letters
                )
            }
        )
        for s in j.scores
    ]
    return group.model_copy(update={"judgement": j.model_copy(update={"scores": scores})})


def human_rankings_table(labels: list[dict[str, Any]], names: dict[str, str]) -> pd.DataFrame:
    """One row per human ranking, one column per trajectory in the page's letter order (A, B,
    ...), whatever order the ranking was stored in; ids no longer in the group come last."""
    columns = list(names.values())
    rows = []
    for r in labels:
        row = {"labeler": r["labeler"], "blind": r["blind"]}
        row |= dict.fromkeys(columns)
        for k, v in r["ranking"].items():
            row[names.get(k, k)] = v
        rows.append(row)
    extra = sorted({k for row in rows for k in row} - {"labeler", "blind", *columns})
    return pd.DataFrame(rows, columns=["labeler", "blind", *columns, *extra])
