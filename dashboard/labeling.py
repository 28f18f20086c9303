"""Blind-ranking logic: which group a labeler sees next, in which order, and what they submit.

The queue samples across runs and envs: it picks a (run, env) stratum uniformly at random
among those with groups left for this labeler, then a uniformly random group inside it, so a
large run does not crowd a small one out. Groups the labeler already ranked or skipped are
never offered again; by default groups that anyone has ranked are left out too (tick "include
labeled" to collect second opinions for human-vs-human agreement).

What it does not do: it does not lock a group while someone ranks it. Two labelers can get the
same group at once; both rankings are kept (``Store.add_human_ranking`` appends).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rankgym.store import Store


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

    ``exclude`` holds ids already shown in this session (e.g. skipped without writing).
    """
    rng = rng or random.Random()
    strata = queue_strata(store, queue)
    rng.shuffle(strata)
    filters = queue.filters()
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
