"""Labelled pairs for training and checking a judge, built from one or more stores.

A :class:`PairItem` is two trajectories of the same task (env id + task id) and which one is
better, with the label's source:

- ``verifier``: both trajectories have a ``verifiable_reward`` and they differ by at least
  ``min_gap``; the higher reward wins. Trajectories are pooled per task across groups, runs
  and stores, so a store that holds an oracle run and a random run of the same tasks gives
  pairs even though every group inside it is uniform.
- ``human``: two trajectories of one group that people ranked differently (mean rank over
  labelers, each labeler's latest ranking); the lower mean rank wins.

A verifier pair whose two trajectories differ by exactly one tool call is a **near miss**
(``near_miss``; e.g. a chain that stopped one call early against one that finished): these
are what a judge of a trained policy has to get right, so they are taken first under the
per-task cap and never dropped by the length balance.

:func:`build_dataset` deduplicates trajectories by content, caps the pairs per task, splits
the pairs into train and held-out **by task** (every pair of a task lands on the same side, so
the held-out score is on tasks the judge never saw), and balances each side:

- *order*: every pair is presented in both orders (:func:`presentations`), so "the first
  trajectory wins" scores exactly 0.5;
- *length*: per env and label source, pairs where the winner is the longer trajectory (by
  judge-visible characters) and pairs where it is the shorter one are subsampled to equal
  numbers, so "the longer one wins" scores 0.5 too (:func:`baselines` reports both). Near
  misses are never dropped but count: the other pairs on their side go first.

**Tie pairs** (``tie_ratio`` > 0; :func:`tie_pairs`): two different trajectories of one task
whose verifiable rewards are *equal* (both fail, both succeed), or that people ranked equal,
become pairs with ``tie=True`` and a soft target of 0.5 in both orders. Without them a judge only
ever sees decided pairs and is free to order two equal trajectories by a surface feature (the
shorter, the one with fewer calls), which GRPO then follows. A tie pair's ``winner`` slot holds
the longer trajectory (a convention, not a preference; ``gap`` is 0), pairs whose tool-call
counts differ come first under the per-task cap, and their number is capped at ``tie_ratio``
times the decided pairs on the same side of the split. Tie tasks that also have decided pairs
land on the side those pairs are on; the decided split is the same with or without ties.

What it does not do: label anything itself (no verifier is re-run, no model is asked), judge
pairs of different tasks, or balance other surface features (tool-call count, turn count,
gibberish); a judge can still learn shortcuts that happen to hold in your data. Length
balancing drops pairs: with only oracle-vs-random data the winner is nearly always longer and
little is left (add failing long trajectories, e.g. a trained policy's chains that never
answer). A store whose near misses all lean one way keeps that length bias ("longer wins" in
``baselines`` says how much).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rankgym.types import SCORE_TIE, Group, Trajectory

if TYPE_CHECKING:
    from rankgym.store import Store

Source = Literal["verifier", "human"]
SOURCES: tuple[Source, ...] = ("verifier", "human")


@dataclass
class PairItem:
    """Two trajectories of one task; ``winner`` is the better one according to ``source``."""

    env_id: str
    task_id: str
    winner: Trajectory
    loser: Trajectory
    source: Source
    store: str
    gap: float
    """Reward difference (verifier) or mean-rank difference (human); > 0, and 0 for a tie."""
    split: str = "train"
    near_miss: bool = False
    """A verifier pair whose trajectories differ by exactly one tool call."""
    tie: bool = False
    """Equally good by ``source`` (target 0.5); ``winner`` is then the longer of the two."""

    @property
    def id(self) -> str:
        kind = f"{self.source}:tie" if self.tie else self.source
        key = f"{kind}|{self.winner.content_hash()}|{self.loser.content_hash()}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        """``tie`` or ``win`` (the winner slot is better)."""
        return "tie" if self.tie else "win"

    @property
    def task_key(self) -> str:
        return f"{self.env_id}|{self.task_id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            **{k: getattr(self, k) for k in _TEXT_FIELDS},
            "gap": self.gap,
            "split": self.split,
            "near_miss": self.near_miss,
            "label": self.label,
            "winner": self.winner.to_dict(),
            "loser": self.loser.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PairItem:
        return cls(
            **{k: d[k] for k in _TEXT_FIELDS},
            winner=Trajectory.from_dict(d["winner"]),
            loser=Trajectory.from_dict(d["loser"]),
            gap=float(d["gap"]),
            split=d.get("split", "train"),
            near_miss=bool(d.get("near_miss", False)),
            tie=d.get("label") == "tie",
        )


_TEXT_FIELDS = ("env_id", "task_id", "source", "store")
"""The text fields of a :class:`PairItem`, which its JSON holds as they are."""


@dataclass
class Dataset:
    """Train and held-out pairs plus what the builder did (counts, drops)."""

    train: list[PairItem]
    heldout: list[PairItem]
    stats: dict[str, Any] = field(default_factory=dict)
    train_ties: list[PairItem] = field(default_factory=list)
    heldout_ties: list[PairItem] = field(default_factory=list)
    """Tie pairs (``tie=True``) of each side; empty unless ``tie_ratio`` > 0."""


def visible_length(t: Trajectory) -> int:
    """Characters the judge reads: message text and tool-call arguments."""
    return len(t.text())


def tool_call_count(t: Trajectory) -> int:
    """Tool calls the agent made in ``t`` (over all assistant messages)."""
    return sum(len(m.tool_calls or []) for m in t.messages if m.role == "assistant")


def is_near_miss(a: Trajectory, b: Trajectory) -> bool:
    """True when ``a`` and ``b`` differ by exactly one tool call."""
    return abs(tool_call_count(a) - tool_call_count(b)) == 1


def _group_ids(store: Store, runs: Iterable[str] | None) -> list[str]:
    if runs is None:
        return store.group_ids()
    return [gid for r in runs for gid in store.group_ids(run_id=r)]


def _trajectories(
    store: Store, runs: Iterable[str] | None = None
) -> Iterable[tuple[str, Trajectory]]:
    for gid in _group_ids(store, runs):
        g = store.get_group(gid)
        for t in g.trajectories:
            yield gid, t


def task_pools(
    stores: dict[str, Store], runs: Iterable[str] | None, dedupe: bool = True
) -> dict[tuple[str, str], dict[str, tuple[str, Trajectory]]]:
    """(env, task) -> content hash -> (store name, trajectory) of every trajectory with a
    verifier outcome (a reward, or cut at the turn limit), errors left out; first copy kept.
    ``dedupe=False`` keys them by store and trajectory id instead: every episode counts, also
    one whose content another episode repeated (how often the policy does it)."""
    pools: dict[tuple[str, str], dict[str, tuple[str, Trajectory]]] = defaultdict(dict)
    for name, store in stores.items():
        for _, t in _trajectories(store, runs):
            if t.verifier_outcome() is None:
                continue
            key = t.content_hash() if dedupe else f"{name}|{t.id}"
            pools[(t.env_id, t.task_id)].setdefault(key, (name, t))
    return pools


def verifier_pairs(
    stores: dict[str, Store],
    min_gap: float = 0.5,
    max_per_task: int = 4,
    seed: int = 0,
    runs: Iterable[str] | None = None,
) -> list[PairItem]:
    """Pairs of same-task trajectories whose verifiable rewards differ by >= ``min_gap``.

    Trajectories with identical judge-visible content are counted once per task; at most
    ``max_per_task`` pairs per task are kept (a seeded random choice, spread over winners),
    near misses (:func:`is_near_miss`) first. ``runs``: only groups of these run ids.
    An episode cut at its turn limit before it answered (``truncated``, no verifiable reward)
    counts as a failure (0.0): "never answers" is a failure a judge must learn to rank low.
    """
    pools = task_pools(stores, runs)
    rng = random.Random(seed)
    out: list[PairItem] = []
    for (env_id, task_id), pool in sorted(pools.items()):
        trajs = list(pool.values())
        cands = []
        for (sa, a), (sb, b) in itertools.combinations(trajs, 2):
            ra, rb = float(a.verifiable_reward or 0.0), float(b.verifiable_reward or 0.0)
            if abs(ra - rb) < min_gap or ra == rb:
                continue
            (w, sw), (lo, _) = ((a, sa), (b, sb)) if ra > rb else ((b, sb), (a, sa))
            cands.append(
                PairItem(env_id, task_id, w, lo, "verifier", sw, abs(ra - rb),
                         near_miss=is_near_miss(w, lo))
            )  # fmt: skip
        rng.shuffle(cands)
        cands.sort(key=lambda p: not p.near_miss)  # stable: near misses first, still shuffled
        out.extend(cands[:max_per_task])
    return out


def human_pairs(
    stores: dict[str, Store],
    max_per_task: int = 4,
    seed: int = 0,
    runs: Iterable[str] | None = None,
) -> list[PairItem]:
    """Pairs from people's rankings: within a group, lower mean rank wins (ties dropped).

    Skips are not rankings and are ignored. ``runs``: only groups of these run ids.
    """
    rng = random.Random(seed)
    out: list[PairItem] = []
    for name, store in stores.items():
        for g, by_id, mean_rank in _mean_ranks(store, runs):
            env_id, task_id = g.env_id, g.task_id
            cands = []
            for a, b in itertools.combinations(sorted(mean_rank), 2):
                if abs(mean_rank[a] - mean_rank[b]) < SCORE_TIE:
                    continue
                w, lo = (a, b) if mean_rank[a] < mean_rank[b] else (b, a)
                gap = abs(mean_rank[a] - mean_rank[b])
                cands.append(PairItem(env_id, task_id, by_id[w], by_id[lo], "human", name, gap))
            rng.shuffle(cands)
            out.extend(cands[:max_per_task])
    return out


def tie_pair(env_id: str, task_id: str, a: Trajectory, b: Trajectory, source: Source, store: str) -> PairItem:  # fmt: skip
    """A tie pair with the longer trajectory (then the larger content hash) in the winner slot."""
    ka = (visible_length(a), a.content_hash())
    kb = (visible_length(b), b.content_hash())
    w, lo = (a, b) if ka > kb else (b, a)
    return PairItem(env_id, task_id, w, lo, source, store, 0.0, tie=True)


def tie_pairs(
    stores: dict[str, Store],
    max_per_task: int = 4,
    seed: int = 0,
    runs: Iterable[str] | None = None,
    sources: Iterable[str] = SOURCES,
) -> list[PairItem]:
    """Pairs of different same-task trajectories that are equally good (``tie=True``).

    ``verifier``: equal verifiable rewards (a truncated episode counts as 0.0, as in
    :func:`verifier_pairs`), pooled per task over stores; ``human``: two trajectories of one
    group with equal mean rank. At most ``max_per_task`` per task and source (seeded), pairs
    whose tool-call counts differ first (the ties a judge most easily orders by surface).
    """
    sources = tuple(sources)
    rng = random.Random(seed)
    out: list[PairItem] = []

    def take(cands: list[PairItem]) -> None:
        rng.shuffle(cands)
        cands.sort(key=lambda p: tool_call_count(p.winner) == tool_call_count(p.loser))
        out.extend(cands[:max_per_task])

    if "verifier" in sources:
        for (env_id, task_id), pool in sorted(task_pools(stores, runs).items()):
            take([
                tie_pair(env_id, task_id, a, b, "verifier", sa)
                for (sa, a), (_, b) in itertools.combinations(pool.values(), 2)
                if float(a.verifiable_reward or 0.0) == float(b.verifiable_reward or 0.0)
            ])  # fmt: skip
    if "human" in sources:
        for name, store in stores.items():
            for g, by_id, mean_rank in _mean_ranks(store, runs):
                take([
                    tie_pair(g.env_id, g.task_id, by_id[a], by_id[b], "human", name)
                    for a, b in itertools.combinations(sorted(mean_rank), 2)
                    if abs(mean_rank[a] - mean_rank[b]) < SCORE_TIE
                    and by_id[a].content_hash() != by_id[b].content_hash()
                ])  # fmt: skip
    return out


def _mean_ranks(
    store: Store, runs: Iterable[str] | None
) -> Iterable[tuple[Group, dict[str, Trajectory], dict[str, float]]]:
    """Per ranked group: (group, trajectory id -> trajectory, trajectory id -> mean rank over
    labelers' latest rankings). Skips are ignored."""
    allowed = set(_group_ids(store, runs)) if runs is not None else None
    latest: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for h in store.human_rankings():  # oldest first: a labeler's latest ranking wins
        if h.get("skipped") or (allowed is not None and h["group_id"] not in allowed):
            continue
        latest[h["group_id"]][h["labeler"]] = h["ranking"]
    for gid, by_labeler in sorted(latest.items()):
        g = store.get_group(gid)
        by_id = {t.id: t for t in g.trajectories}
        mean_rank = {
            tid: sum(r[tid] for r in by_labeler.values() if tid in r)
            / sum(1 for r in by_labeler.values() if tid in r)
            for tid in by_id
            if any(tid in r for r in by_labeler.values())
        }
        yield g, by_id, mean_rank


def cap_ties(ties: list[PairItem], n: int, seed: int, prefer: set[str] | None = None) -> list[PairItem]:  # fmt: skip
    """At most ``n`` tie pairs (seeded), those of the ``prefer`` stores first, then those whose
    tool-call counts differ; input order kept."""
    prefer = prefer or set()
    items = list(ties)
    random.Random(seed).shuffle(items)
    items.sort(key=lambda p: (p.store not in prefer, tool_call_count(p.winner) == tool_call_count(p.loser)))  # fmt: skip
    keep = {id(p) for p in items[: max(0, n)]}
    return [p for p in ties if id(p) in keep]


def split_by_task(
    pairs: list[PairItem], heldout_fraction: float = 0.3, seed: int = 0, min_tasks: int = 1
) -> tuple[list[PairItem], list[PairItem]]:
    """Split so that no task has pairs on both sides.

    Per env, tasks are ordered by a seeded hash and the first ``round(fraction * n)`` are held
    out, at least ``min_tasks`` (a check that needs that many) while one task is left to train
    on, when the env has two or more: deterministic, the held-out share per env.
    """
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1), got {heldout_fraction}")
    tasks: dict[str, set[str]] = defaultdict(set)
    for p in pairs:
        tasks[p.env_id].add(p.task_key)
    held: set[str] = set()
    for keys in tasks.values():
        ordered = sorted(keys, key=lambda k: hashlib.sha256(f"{seed}|{k}".encode()).hexdigest())
        n = round(heldout_fraction * len(ordered))
        if heldout_fraction > 0 and len(ordered) >= 2:
            n = min(max(n, min_tasks, 1), len(ordered) - 1)
        held.update(ordered[:n])
    train: list[PairItem] = []
    heldout: list[PairItem] = []
    for p in pairs:
        p.split = "heldout" if p.task_key in held else "train"
        (heldout if p.split == "heldout" else train).append(p)
    return train, heldout


def length_balance(pairs: list[PairItem], seed: int = 0) -> tuple[list[PairItem], int]:
    """Subsample so the winner is the longer trajectory in half the unequal pairs, as far as
    the pairs allow.

    Balanced per (env, source). Near-miss pairs are never dropped but count in the balance: the
    other pairs of the side that near misses already fill are dropped first, so a cell's
    near misses where the longer chain wins are offset by pairs where the shorter one does (a
    policy's chain that never answers against one that answers). When near misses alone
    outnumber the other side, the cell stays tilted (``baselines`` reports it). Pairs of equal
    length are always kept. Returns (kept, dropped count).
    """
    rng = random.Random(seed)
    cells: dict[tuple[str, str], dict[str, list[PairItem]]] = defaultdict(
        lambda: {"longer": [], "shorter": [], "longer_nm": [], "shorter_nm": [], "equal": []}
    )
    for p in pairs:
        lw, ll = visible_length(p.winner), visible_length(p.loser)
        side = "longer" if lw > ll else "shorter" if lw < ll else "equal"
        if p.near_miss and side != "equal":
            side += "_nm"
        cells[(p.env_id, p.source)][side].append(p)
    kept: list[PairItem] = []
    for cell in cells.values():
        total = {s: len(cell[s]) + len(cell[s + "_nm"]) for s in ("longer", "shorter")}
        n = max(min(total.values()), len(cell["longer_nm"]), len(cell["shorter_nm"]))
        for side in ("longer", "shorter"):
            items = list(cell[side])
            rng.shuffle(items)
            kept.extend(cell[side + "_nm"])
            kept.extend(items[: max(0, n - len(cell[side + "_nm"]))])
        kept.extend(cell["equal"])
    kept_ids = {id(p) for p in kept}
    ordered = [p for p in pairs if id(p) in kept_ids]  # keep the input order
    return ordered, len(pairs) - len(ordered)


def baselines(pairs: list[PairItem]) -> dict[str, float | None]:
    """Accuracy of content-blind rules over both presentations of every pair.

    ``first_wins`` is 0.5 by construction; ``longer_wins`` is 0.5 after :func:`length_balance`
    up to equal-length pairs, which count as half right.
    """
    if not pairs:
        return {"first_wins": None, "longer_wins": None}
    longer = 0.0
    for p in pairs:
        lw, ll = visible_length(p.winner), visible_length(p.loser)
        longer += 1.0 if lw > ll else 0.5 if lw == ll else 0.0
    return {"first_wins": 0.5, "longer_wins": longer / len(pairs)}


def build_dataset(
    stores: dict[str, Store],
    heldout_fraction: float = 0.3,
    min_gap: float = 0.5,
    max_per_task: int = 4,
    balance_length: bool = True,
    seed: int = 0,
    sources: Iterable[str] = SOURCES,
    runs: Iterable[str] | None = None,
    tie_ratio: float = 0.0,
    prefer_stores: Iterable[str] = (),
    min_heldout_tasks: int = 1,
) -> Dataset:
    """Pairs from ``stores`` (name -> open Store), split by task, balanced.

    ``sources`` selects the labels (``verifier``, ``human`` or both); ``runs`` keeps only the
    groups of these run ids (e.g. a training run's stored groups). ``tie_ratio`` > 0 adds tie
    pairs (:func:`tie_pairs`), at most that many times the decided pairs of each side, in
    ``train_ties``/``heldout_ties`` (those of ``prefer_stores`` first); the decided pairs and
    their split do not change. ``min_heldout_tasks``: see :func:`split_by_task`.
    """
    sources = tuple(sources)
    bad = [s for s in sources if s not in SOURCES]
    if bad or not sources:
        raise ValueError(f"unknown label sources {bad or sources!r}; choose from {SOURCES}")
    if not (tie_ratio >= 0.0 and tie_ratio <= 100.0):  # False for nan
        raise ValueError(f"tie_ratio must be in [0, 100], got {tie_ratio}")
    runs = list(runs) if runs is not None else None
    pairs: list[PairItem] = []
    if "verifier" in sources:
        pairs += verifier_pairs(stores, min_gap, max_per_task, seed, runs)
    if "human" in sources:
        pairs += human_pairs(stores, max_per_task, seed, runs)
    stats: dict[str, Any] = {
        "pairs_found": len(pairs),
        "near_miss_found": sum(p.near_miss for p in pairs),
    }
    dropped = 0
    if balance_length:
        pairs, dropped = length_balance(pairs, seed)
    stats["dropped_for_length_balance"] = dropped
    train, heldout = split_by_task(pairs, heldout_fraction, seed, min_heldout_tasks)
    ties: dict[str, list[PairItem]] = {"train": [], "heldout": []}
    if tie_ratio > 0:
        found = tie_pairs(stores, max_per_task, seed, runs, sources)
        side = {p.task_key: p.split for p in pairs}
        rest = [p for p in found if p.task_key not in side]
        split_by_task(rest, heldout_fraction, seed)  # tie-only tasks: split among themselves
        for p in found:
            p.split = side.get(p.task_key, p.split)
            ties[p.split].append(p)
        stats["ties_found"] = len(found)
        for name, part in (("train", train), ("heldout", heldout)):
            ties[name] = cap_ties(ties[name], round(tie_ratio * len(part)), seed, set(prefer_stores))  # fmt: skip
    for name, part in (("train", train), ("heldout", heldout)):
        by: dict[str, int] = defaultdict(int)
        for p in part:
            by[f"{p.env_id}/{p.source}"] += 1
        stats[name] = {
            "pairs": len(part),
            "near_miss": sum(p.near_miss for p in part),
            "tasks": len({p.task_key for p in part}),
            "by_env_source": dict(sorted(by.items())),
            "baselines": baselines(part),
            "ties": len(ties[name]),
        }
    return Dataset(train, heldout, stats, ties["train"], ties["heldout"])
