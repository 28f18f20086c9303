"""How often the judge agrees with people, with the verifier, and with itself.

A *unit* is one comparison of two score vectors over the same trajectories of one group
(higher = better on both sides; human ranks are negated). Four kinds of units are built from
a store:

- ``judge_vs_human``: the judge's scores vs each labeler's ranking of the group;
- ``judge_vs_verifier``: the judge's scores vs ``verifiable_reward`` (trajectories where it is
  known, at least two per group);
- ``human_vs_human``: every pair of labelers who ranked the same group (latest ranking each);
- ``judge_vs_self``: every pair of presentations of one judgement (``--permutations K``):
  position consistency.

Metrics per unit, all tie-aware:

- ``kendall_tau_b`` and ``spearman`` (equal to ``scipy.stats.kendalltau`` / ``spearmanr``);
- ``top1``: Jaccard overlap of the two top sets (all items tied at the maximum): 1 when both
  sides put the same item(s) first, 0 when their firsts are disjoint;
- ``pairwise_accuracy``: share of item pairs where both sides agree on the three-way outcome
  (better, worse, tie).

Aggregates: **macro** = mean over groups of the mean over that group's units (units whose
metric is undefined, e.g. a constant side for tau, are left out); **micro** = pooled over all
pairs (tau-b from summed concordant/discordant/tie counts, pairwise accuracy from summed
pairs), pooled Pearson of within-group centred ranks scaled by group size (spearman), summed
intersections over summed unions (top1). 95% confidence intervals come from a cluster
bootstrap over groups (percentile method as in ``scipy.stats.bootstrap``; groups resampled
with replacement, so several labelers or presentations of one group move together).

What this does not do: it does not correct for chance agreement, does not weight groups by
size in the macro average, and says nothing when there are fewer than two groups (the CI is
then ``None``). Scores within ``SCORE_TIE`` (1e-9) count as tied.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rankgym.types import SCORE_TIE

from .metrics import (
    METRICS,
    Aggregate,
    DictRecord,
    MicroMacro,
    UnitStats,
    aggregate,
    kendall_tau_b,
    pairwise_accuracy,
    spearman,
    top1_agreement,
    unit_stats,
)
from .metrics import none_if_nan as _none

if TYPE_CHECKING:
    from rankgym.store import Store

PAIRS = ("judge_vs_human", "judge_vs_verifier", "human_vs_human", "judge_vs_self")

__all__ = [
    "METRICS",
    "PAIRS",
    "Aggregate",
    "AgreementReport",
    "Disagreement",
    "MicroMacro",
    "UnitStats",
    "aggregate",
    "agreement_report",
    "build_units",
    "disagreements",
    "format_report",
    "kendall_tau_b",
    "pairwise_accuracy",
    "spearman",
    "top1_agreement",
    "unit_stats",
]

# --------------------------------------------------------------------------- from a store


def _pick_spec(store: Store, spec_hash: str | None) -> str | None:
    if spec_hash:
        hashes = store.spec_hashes_like(spec_hash)
        if len(hashes) != 1:
            raise ValueError(
                f"judge spec {spec_hash!r} matches {len(hashes)} specs in the store; pass a "
                "longer prefix of one of: " + ", ".join(r["hash"] for r in store.judge_specs())
            )
        return hashes[0]
    return store.most_judged_spec()


@dataclass
class _Data:
    spec_hash: str | None
    groups: dict[str, dict[str, Any]]
    judge: dict[str, dict[str, float]]  # group id -> trajectory id -> score (latest ok)
    presentations: dict[str, list[dict[str, float]]]  # group id -> scores per presentation
    humans: dict[str, dict[str, dict[str, float]]]  # group -> labeler -> id -> rank
    verifier: dict[str, dict[str, float]]  # group -> id -> reward
    n_unjudged: int
    skipped_rankings: list[str] = field(default_factory=list)  # damaged rows, named


def _load(
    store: Store, spec_hash: str | None, env_id: str | None, labeled_only: bool = False
) -> _Data:
    """Everything the metrics need, in a few SQL queries (no pydantic objects: 10k+ groups).

    ``labeled_only``: judge scores of groups people ranked, nothing else (for disagreements).
    """
    spec = _pick_spec(store, spec_hash)
    groups = {r["id"]: r for r in store.group_index(env_id)}
    humans: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    problems: list[str] = []
    for h in store.human_rankings(problems=problems):  # damaged rows are skipped and named
        if h["group_id"] in groups and not h["skipped"]:
            humans[h["group_id"]][h["labeler"]] = h["ranking"]  # oldest first: latest wins
    wanted = set(humans) if labeled_only else set(groups)
    judge: dict[str, dict[str, float]] = {}
    presentations: dict[str, list[dict[str, float]]] = {}
    verifier: dict[str, dict[str, float]] = defaultdict(dict)
    n_unjudged = 0
    latest: dict[str, str] = {}  # group -> latest ok judgement id
    if spec and wanted:
        for r in store.ok_judgement_ids(spec):
            if r["group_id"] in wanted:
                latest[r["group_id"]] = r["id"]
        for r in store.judgement_scores(latest.values()):
            judge.setdefault(r["group_id"], {})[r["trajectory_id"]] = r["score"]
    if spec and not labeled_only:
        chosen_set = set(latest.values())
        for r in store.multi_presentation_judgements(spec):
            if r["id"] in chosen_set:
                pres = json.loads(r["presentations"])
                presentations[r["group_id"]] = [
                    p["scores"] for p in pres if isinstance(p.get("scores"), dict)
                ]
        n_unjudged = sum(
            1
            for gid in store.failed_judgement_group_ids(spec)
            if gid in groups and gid not in judge
        )
        for r in store.judged_verifiable_rewards(spec):
            if r["group_id"] in judge:
                verifier[r["group_id"]][r["id"]] = r["verifiable_reward"]
    return _Data(spec, groups, judge, presentations, dict(humans), dict(verifier), n_unjudged, problems)  # fmt: skip


def _align(a: dict[str, float], b: dict[str, float]) -> tuple[list[float], list[float]]:
    ids = [k for k in a if k in b]
    return [a[k] for k in ids], [b[k] for k in ids]


def _neg(ranking: dict[str, float]) -> dict[str, float]:
    return {k: -float(v) for k, v in ranking.items()}


def build_units(data: _Data) -> dict[str, list[tuple[str, list[float], list[float]]]]:
    """The four kinds of units (see module docstring) from loaded store data."""
    units: dict[str, list[tuple[str, list[float], list[float]]]] = {p: [] for p in PAIRS}
    for gid, js in data.judge.items():
        for ranking in data.humans.get(gid, {}).values():
            units["judge_vs_human"].append((gid, *_align(js, _neg(ranking))))
        vr = data.verifier.get(gid, {})
        if len(vr) >= 2:
            units["judge_vs_verifier"].append((gid, *_align(js, vr)))
        for p, q in itertools.combinations(data.presentations.get(gid, []), 2):
            units["judge_vs_self"].append((gid, *_align(p, q)))
    for gid, by_labeler in data.humans.items():
        for r1, r2 in itertools.combinations(by_labeler.values(), 2):
            units["human_vs_human"].append((gid, *_align(_neg(r1), _neg(r2))))
    return units


@dataclass(frozen=True)
class AgreementReport(DictRecord):
    """The agreement tables of one judge spec (what ``rankgym agreement`` prints).

    ``to_dict`` is the ``--json`` shape (documented in docs/judging.md)::

        {"spec_hash": str | None, "model": str | None, "env_id": str | None,
         "n_groups": int, "n_judged": int, "n_unjudged": int, "n_labeled": int,
         "pairs": {pair: {"n_groups": int, "n_units": int,
                          "metrics": {metric: {"micro": float | None,
                                               "micro_ci": [lo, hi] | None,
                                               "macro": float | None,
                                               "macro_ci": [lo, hi] | None}}}},
         "skipped_rankings": [str]}     # only when a damaged ranking row was left out
    """

    spec_hash: str | None
    """The judge spec measured (None: the store has no judgements)."""
    model: str | None
    """That spec's judge model."""
    env_id: str | None
    """The env the groups were limited to (None: all envs)."""
    n_groups: int
    """Groups in scope."""
    n_judged: int
    """Groups with an ok judgement under the spec."""
    n_unjudged: int
    """Groups whose judging under the spec failed (and never succeeded)."""
    n_labeled: int
    """Groups at least one person ranked."""
    pairs: dict[str, Aggregate]
    """One :class:`Aggregate` per name in :data:`PAIRS`, in that order."""
    skipped_rankings: list[str] = field(default_factory=list)
    """Stored ranking rows left out because they are damaged (each named, with the reason)."""

    nested = {"pairs": Aggregate}

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape; ``skipped_rankings`` only when a row was left out."""
        out = super().to_dict()
        if not out["skipped_rankings"]:
            del out["skipped_rankings"]
        return out


def agreement_report(
    store: Store,
    spec_hash: str | None = None,
    env_id: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> AgreementReport:
    """Agreement tables for one judge spec (default: the spec with most ok judgements)."""
    data = _load(store, spec_hash, env_id)
    spec = store.get_judge_spec(data.spec_hash) if data.spec_hash else None
    units = build_units(data)
    return AgreementReport(
        spec_hash=data.spec_hash,
        model=spec.model if spec else None,
        env_id=env_id,
        n_groups=len(data.groups),
        n_judged=len(data.judge),
        n_unjudged=data.n_unjudged,
        n_labeled=len(data.humans),
        pairs={p: aggregate(units[p], n_resamples=n_resamples, seed=seed) for p in PAIRS},
        skipped_rankings=data.skipped_rankings,
    )


@dataclass(frozen=True)
class Disagreement:
    """One labeled, judged group: how far the judge is from people's consensus there."""

    group_id: str
    env_id: str
    task_id: str
    n_labelers: int
    kendall_tau_b: float | None
    """Judge scores vs people's mean rank (None: undefined, e.g. one side constant)."""
    pairwise_accuracy: float | None
    top1: float | None
    judge_top: list[str]
    """Trajectory ids the judge tied first."""
    human_top: list[str]
    """Trajectory ids with the best mean rank."""
    judge_scores: dict[str, float]
    human_mean_rank: dict[str, float]
    """Trajectory id -> mean rank over labelers (1 = best)."""

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-able dict (the ``disagreements`` of ``rankgym agreement --json``)."""
        return asdict(self)


def disagreements(
    store: Store, spec_hash: str | None = None, env_id: str | None = None, limit: int = 20
) -> list[Disagreement]:
    """Labeled, judged groups where the judge and the people disagree most, worst first.

    People's consensus is the mean rank over labelers. Sorted by pairwise accuracy, then
    Kendall tau-b (undefined tau counts as 0).
    """
    data = _load(store, spec_hash, env_id, labeled_only=True)
    rows = []
    for gid, by_labeler in data.humans.items():
        js = data.judge.get(gid)
        if js is None:
            continue
        mean_rank = {
            k: float(np.mean([r[k] for r in by_labeler.values() if k in r]))
            for k in js
            if any(k in r for r in by_labeler.values())
        }
        a, b = _align(js, _neg(mean_rank))
        if len(a) < 2:
            continue
        st = unit_stats(a, b)
        top_j = max(js.values())
        best_h = min(mean_rank.values())
        rows.append(
            Disagreement(
                group_id=gid,
                env_id=data.groups[gid]["env_id"],
                task_id=data.groups[gid]["task_id"],
                n_labelers=len(by_labeler),
                kendall_tau_b=_none(st.kendall_tau_b),
                pairwise_accuracy=_none(st.pairwise_accuracy),
                top1=_none(st.top1),
                judge_top=[k for k, v in js.items() if v >= top_j - SCORE_TIE],
                human_top=[k for k, v in mean_rank.items() if v <= best_h + SCORE_TIE],
                judge_scores=js,
                human_mean_rank=mean_rank,
            )
        )
    rows.sort(key=lambda r: (r.pairwise_accuracy or 0.0, r.kendall_tau_b or 0.0))
    return rows[:limit]


def format_report(report: AgreementReport) -> str:
    """The report as plain-text tables (what ``rankgym agreement`` prints)."""

    def f(x: float | None) -> str:
        return "   -  " if x is None else f"{x:+.3f}" if x < 0 else f"{x:.3f} "

    def ci(c: tuple[float, float] | None) -> str:
        return "" if not c or c[0] is None else f"[{c[0]:.2f}, {c[1]:.2f}]"

    r = report
    lines = [
        f"judge spec {r.spec_hash or '-'} ({r.model or 'no judgements'})"
        + (f", env {r.env_id}" if r.env_id else ""),
        f"groups {r.n_groups}, judged {r.n_judged}, unjudged "
        f"{r.n_unjudged}, labeled by people {r.n_labeled}",
    ]
    if r.skipped_rankings:
        lines.append(f"skipped {len(r.skipped_rankings)} damaged ranking row(s):")
        lines += [f"  {note}" for note in r.skipped_rankings[:10]]
    for pair, agg in r.pairs.items():
        lines.append("")
        lines.append(f"{pair}: {agg.n_groups} groups, {agg.n_units} comparisons")
        if not agg.n_groups:
            continue
        lines.append(f"  {'metric':<18} {'micro':>7} {'95% CI':<15} {'macro':>7} {'95% CI':<15}")
        for m, v in agg.metrics.items():
            lines.append(
                f"  {m:<18} {f(v.micro):>7} {ci(v.micro_ci):<15} "
                f"{f(v.macro):>7} {ci(v.macro_ci):<15}"
            )
    return "\n".join(lines)
