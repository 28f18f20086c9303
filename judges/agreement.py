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
bootstrap over groups (``scipy.stats.bootstrap``, percentile method, groups resampled with
replacement, so several labelers or presentations of one group move together).

What this does not do: it does not correct for chance agreement, does not weight groups by
size in the macro average, and says nothing when there are fewer than two groups (the CI is
then ``None``). Scores within 1e-9 count as tied.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

METRICS = ("kendall_tau_b", "spearman", "top1", "pairwise_accuracy")
PAIRS = ("judge_vs_human", "judge_vs_verifier", "human_vs_human", "judge_vs_self")
_DECIMALS = 9


def _arr(x: Sequence[float]) -> np.ndarray:
    return np.round(np.asarray(x, dtype=float), _DECIMALS)


def _signs(x: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(len(x), k=1)
    return np.sign(x[i] - x[j])


@dataclass
class UnitStats:
    """Sufficient statistics of one unit (what the micro averages pool)."""

    n: int
    concordant: int
    discordant: int
    pairs: int
    tied_a: int
    tied_b: int
    agree: int
    top_inter: int
    top_union: int
    sxy: float
    sxx: float
    syy: float

    @property
    def kendall_tau_b(self) -> float:
        den = math.sqrt((self.pairs - self.tied_a) * (self.pairs - self.tied_b))
        return (self.concordant - self.discordant) / den if den > 0 else math.nan

    @property
    def spearman(self) -> float:
        den = math.sqrt(self.sxx * self.syy)
        return self.sxy / den if den > 0 else math.nan

    @property
    def top1(self) -> float:
        return self.top_inter / self.top_union if self.top_union else math.nan

    @property
    def pairwise_accuracy(self) -> float:
        return self.agree / self.pairs if self.pairs else math.nan


def unit_stats(a: Sequence[float], b: Sequence[float]) -> UnitStats:
    """Statistics of two aligned score vectors (higher = better on both)."""
    x, y = _arr(a), _arr(b)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("a and b must be 1-d sequences of the same length")
    n = len(x)
    sa, sb = _signs(x), _signs(y)
    prod = sa * sb
    rx = (stats.rankdata(x) - (n + 1) / 2) / n if n else x
    ry = (stats.rankdata(y) - (n + 1) / 2) / n if n else y
    top_a = set(np.flatnonzero(x == x.max())) if n else set()
    top_b = set(np.flatnonzero(y == y.max())) if n else set()
    return UnitStats(
        n=n,
        concordant=int((prod > 0).sum()),
        discordant=int((prod < 0).sum()),
        pairs=len(sa),
        tied_a=int((sa == 0).sum()),
        tied_b=int((sb == 0).sum()),
        agree=int((sa == sb).sum()),
        top_inter=len(top_a & top_b),
        top_union=len(top_a | top_b),
        sxy=float((rx * ry).sum()),
        sxx=float((rx * rx).sum()),
        syy=float((ry * ry).sum()),
    )


def kendall_tau_b(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b (ties in either side handled as in scipy); nan if a side is constant."""
    return unit_stats(a, b).kendall_tau_b


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rho (Pearson of average ranks); nan if a side is constant."""
    return unit_stats(a, b).spearman


def top1_agreement(a: Sequence[float], b: Sequence[float]) -> float:
    """Jaccard overlap of the two top sets (ties at the maximum included)."""
    return unit_stats(a, b).top1


def pairwise_accuracy(a: Sequence[float], b: Sequence[float]) -> float:
    """Share of pairs with the same three-way outcome (better / worse / tie) on both sides."""
    return unit_stats(a, b).pairwise_accuracy


# --------------------------------------------------------------------------- aggregation


def _micro(s: dict[str, np.ndarray], metric: str) -> np.ndarray:
    """Micro value from summed statistics (arrays broadcast over bootstrap resamples)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if metric == "kendall_tau_b":
            den = np.sqrt((s["pairs"] - s["tied_a"]) * (s["pairs"] - s["tied_b"]))
            return np.where(den > 0, (s["concordant"] - s["discordant"]) / den, np.nan)
        if metric == "spearman":
            den = np.sqrt(s["sxx"] * s["syy"])
            return np.where(den > 0, s["sxy"] / den, np.nan)
        if metric == "top1":
            return np.where(s["top_union"] > 0, s["top_inter"] / s["top_union"], np.nan)
        return np.where(s["pairs"] > 0, s["agree"] / s["pairs"], np.nan)


_FIELDS = ("concordant", "discordant", "pairs", "tied_a", "tied_b", "agree", "top_inter",
           "top_union", "sxy", "sxx", "syy")  # fmt: skip


def _finite_mean(values: list[float]) -> float:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if len(v) else math.nan


def _none(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def aggregate(
    units: list[tuple[str, Sequence[float], Sequence[float]]],
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Micro and macro values of every metric with cluster-bootstrap CIs over groups.

    ``units`` are ``(group_id, a, b)``; units with fewer than two items are skipped. Returns
    ``{"n_groups", "n_units", "metrics": {metric: {"micro", "micro_ci", "macro",
    "macro_ci"}}}`` with ``None`` for undefined values and for CIs with < 2 groups.
    """
    by_group: dict[str, list[UnitStats]] = defaultdict(list)
    for gid, a, b in units:
        if len(a) >= 2:
            by_group[gid].append(unit_stats(a, b))
    groups = list(by_group)
    G = len(groups)
    out: dict[str, Any] = {"n_groups": G, "n_units": sum(len(v) for v in by_group.values())}
    metrics: dict[str, Any] = {}
    if G == 0:
        out["metrics"] = {
            m: {"micro": None, "micro_ci": None, "macro": None, "macro_ci": None} for m in METRICS
        }
        return out
    sums = {
        f: np.array([sum(getattr(u, f) for u in by_group[g]) for g in groups], float)
        for f in _FIELDS
    }
    for m in METRICS:
        per_group = np.array([_finite_mean([getattr(u, m) for u in by_group[g]]) for g in groups])

        def micro_stat(idx: np.ndarray, axis: int = -1, m: str = m) -> np.ndarray:
            return _micro({f: sums[f][idx].sum(axis=axis) for f in _FIELDS}, m)

        def macro_stat(idx: np.ndarray, axis: int = -1, pg: np.ndarray = per_group) -> np.ndarray:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return np.nanmean(pg[idx], axis=axis)

        all_idx = np.arange(G)
        entry: dict[str, Any] = {
            "micro": _none(float(micro_stat(all_idx))),
            "macro": _none(float(macro_stat(all_idx))) if not np.all(np.isnan(per_group)) else None,
            "micro_ci": None,
            "macro_ci": None,
        }
        if G >= 2:
            for name, fn in (("micro", micro_stat), ("macro", macro_stat)):
                if entry[name] is None:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = stats.bootstrap(
                        (all_idx,),
                        fn,
                        vectorized=True,
                        method="percentile",
                        n_resamples=n_resamples,
                        confidence_level=confidence,
                        rng=np.random.default_rng(seed),
                    )
                lo, hi = res.confidence_interval
                entry[f"{name}_ci"] = [_none(lo), _none(hi)]
        metrics[m] = entry
    out["metrics"] = metrics
    return out


# --------------------------------------------------------------------------- from a store


def _pick_spec(store: Any, spec_hash: str | None) -> str | None:
    if spec_hash:
        rows = store.query("SELECT hash FROM judge_specs WHERE hash LIKE ?", (spec_hash + "%",))
        if len(rows) != 1:
            raise ValueError(
                f"judge spec {spec_hash!r} matches {len(rows)} specs in the store; pass a "
                "longer prefix of one of: " + ", ".join(r["hash"] for r in store.judge_specs())
            )
        return rows[0]["hash"]
    rows = store.query(
        "SELECT spec_hash, COUNT(*) AS n FROM judgements WHERE status = 'ok' "
        "GROUP BY spec_hash ORDER BY n DESC, MAX(created_at) DESC LIMIT 1"
    )
    return rows[0]["spec_hash"] if rows else None


@dataclass
class _Data:
    spec_hash: str | None
    groups: dict[str, dict[str, Any]]
    judge: dict[str, Any]  # group id -> latest ok Judgement
    humans: dict[str, dict[str, dict[str, float]]]  # group -> labeler -> id -> rank
    verifier: dict[str, dict[str, float]]  # group -> id -> reward
    n_unjudged: int


def _load(store: Any, spec_hash: str | None, env_id: str | None) -> _Data:
    spec = _pick_spec(store, spec_hash)
    where, params = ("WHERE env_id = ?", (env_id,)) if env_id else ("", ())
    groups = {
        r["id"]: r for r in store.query(f"SELECT id, env_id, task_id FROM groups {where}", params)
    }
    judge: dict[str, Any] = {}
    failed: set[str] = set()
    if spec:
        for j in store.judgements(spec_hash=spec):
            if j.group_id not in groups:
                continue
            if j.status == "ok":
                judge[j.group_id] = j  # oldest first: the latest wins
            else:
                failed.add(j.group_id)
    humans: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for h in store.human_rankings():
        if h["group_id"] in groups and not h["skipped"]:
            humans[h["group_id"]][h["labeler"]] = h["ranking"]  # oldest first: latest wins
    verifier: dict[str, dict[str, float]] = defaultdict(dict)
    for r in store.query(
        "SELECT id, group_id, verifiable_reward FROM trajectories WHERE verifiable_reward IS NOT NULL"
    ):
        if r["group_id"] in groups:
            verifier[r["group_id"]][r["id"]] = r["verifiable_reward"]
    return _Data(spec, groups, judge, dict(humans), dict(verifier), len(failed - set(judge)))


def _align(a: dict[str, float], b: dict[str, float]) -> tuple[list[float], list[float]]:
    ids = [k for k in a if k in b]
    return [a[k] for k in ids], [b[k] for k in ids]


def _neg(ranking: dict[str, float]) -> dict[str, float]:
    return {k: -float(v) for k, v in ranking.items()}


def build_units(data: _Data) -> dict[str, list[tuple[str, list[float], list[float]]]]:
    """The four kinds of units (see module docstring) from loaded store data."""
    units: dict[str, list[tuple[str, list[float], list[float]]]] = {p: [] for p in PAIRS}
    for gid, j in data.judge.items():
        js = j.score_map()
        for ranking in data.humans.get(gid, {}).values():
            units["judge_vs_human"].append((gid, *_align(js, _neg(ranking))))
        vr = data.verifier.get(gid, {})
        if len(vr) >= 2:
            units["judge_vs_verifier"].append((gid, *_align(js, vr)))
        pres = [p["scores"] for p in j.presentations if isinstance(p.get("scores"), dict)]
        for p, q in itertools.combinations(pres, 2):
            units["judge_vs_self"].append((gid, *_align(p, q)))
    for gid, by_labeler in data.humans.items():
        for r1, r2 in itertools.combinations(by_labeler.values(), 2):
            units["human_vs_human"].append((gid, *_align(_neg(r1), _neg(r2))))
    return units


def agreement_report(
    store: Any,
    spec_hash: str | None = None,
    env_id: str | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Agreement tables for one judge spec (default: the spec with most ok judgements).

    Shape (documented in docs/judging.md)::

        {"spec_hash": str | None, "model": str | None, "env_id": str | None,
         "n_groups": int, "n_judged": int, "n_unjudged": int, "n_labeled": int,
         "pairs": {pair: {"n_groups": int, "n_units": int,
                          "metrics": {metric: {"micro": float | None,
                                               "micro_ci": [lo, hi] | None,
                                               "macro": float | None,
                                               "macro_ci": [lo, hi] | None}}}}}

    ``pair`` is one of :data:`PAIRS`, ``metric`` one of :data:`METRICS`.
    """
    data = _load(store, spec_hash, env_id)
    spec = store.get_judge_spec(data.spec_hash) if data.spec_hash else None
    units = build_units(data)
    return {
        "spec_hash": data.spec_hash,
        "model": spec.model if spec else None,
        "env_id": env_id,
        "n_groups": len(data.groups),
        "n_judged": len(data.judge),
        "n_unjudged": data.n_unjudged,
        "n_labeled": len(data.humans),
        "pairs": {p: aggregate(units[p], n_resamples=n_resamples, seed=seed) for p in PAIRS},
    }


def disagreements(
    store: Any, spec_hash: str | None = None, env_id: str | None = None, limit: int = 20
) -> list[dict[str, Any]]:
    """Labeled, judged groups where the judge and the people disagree most, worst first.

    People's consensus is the mean rank over labelers. Sorted by pairwise accuracy, then
    Kendall tau-b (undefined tau counts as 0). Each row: ``group_id``, ``env_id``,
    ``task_id``, ``n_labelers``, ``kendall_tau_b``, ``pairwise_accuracy``, ``top1``,
    ``judge_top`` / ``human_top`` (ids tied first), ``judge_scores``, ``human_mean_rank``.
    """
    data = _load(store, spec_hash, env_id)
    rows = []
    for gid, by_labeler in data.humans.items():
        j = data.judge.get(gid)
        if j is None:
            continue
        js = j.score_map()
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
            {
                "group_id": gid,
                "env_id": data.groups[gid]["env_id"],
                "task_id": data.groups[gid]["task_id"],
                "n_labelers": len(by_labeler),
                "kendall_tau_b": _none(st.kendall_tau_b),
                "pairwise_accuracy": _none(st.pairwise_accuracy),
                "top1": _none(st.top1),
                "judge_top": [k for k, v in js.items() if v >= top_j - 1e-9],
                "human_top": [k for k, v in mean_rank.items() if v <= best_h + 1e-9],
                "judge_scores": js,
                "human_mean_rank": mean_rank,
            }
        )
    rows.sort(key=lambda r: (r["pairwise_accuracy"] or 0.0, r["kendall_tau_b"] or 0.0))
    return rows[:limit]


def format_report(report: dict[str, Any]) -> str:
    """The report as plain-text tables (what ``rankgym agreement`` prints)."""

    def f(x: float | None) -> str:
        return "   -  " if x is None else f"{x:+.3f}" if x < 0 else f"{x:.3f} "

    def ci(c: list[float | None] | None) -> str:
        return "" if not c or c[0] is None else f"[{c[0]:.2f}, {c[1]:.2f}]"

    lines = [
        f"judge spec {report['spec_hash'] or '-'} ({report['model'] or 'no judgements'})"
        + (f", env {report['env_id']}" if report["env_id"] else ""),
        f"groups {report['n_groups']}, judged {report['n_judged']}, unjudged "
        f"{report['n_unjudged']}, labeled by people {report['n_labeled']}",
    ]
    for pair, agg in report["pairs"].items():
        lines.append("")
        lines.append(f"{pair}: {agg['n_groups']} groups, {agg['n_units']} comparisons")
        if not agg["n_groups"]:
            continue
        lines.append(f"  {'metric':<18} {'micro':>7} {'95% CI':<15} {'macro':>7} {'95% CI':<15}")
        for m, v in agg["metrics"].items():
            lines.append(
                f"  {m:<18} {f(v['micro']):>7} {ci(v['micro_ci']):<15} "
                f"{f(v['macro']):>7} {ci(v['macro_ci']):<15}"
            )
    return "\n".join(lines)
