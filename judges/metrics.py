"""Agreement statistics between two score vectors, and their aggregation over groups.

Pure numpy: no store, no pydantic. A *unit* is one comparison of two score vectors over the
same trajectories of one group (higher = better on both sides). Metrics per unit, all
tie-aware:

- ``kendall_tau_b`` and ``spearman`` (equal to ``scipy.stats.kendalltau`` / ``spearmanr``);
- ``top1``: Jaccard overlap of the two top sets (all items tied at the maximum): 1 when both
  sides put the same item(s) first, 0 when their firsts are disjoint;
- ``pairwise_accuracy``: share of item pairs where both sides agree on the three-way outcome
  (better, worse, tie).

:func:`aggregate` gives **macro** (mean over groups of the mean over that group's units;
undefined metrics left out) and **micro** (pooled over all pairs) values with 95% cluster
bootstrap CIs over groups (percentile method as in ``scipy.stats.bootstrap``), as an
:class:`Aggregate` of one :class:`MicroMacro` per metric.

What this does not do: correct for chance agreement, weight groups by size in the macro
average, or give a CI with fewer than two groups (``None``). Scores within 1e-9 tie.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar, Self

import numpy as np

__all__ = [
    "METRICS",
    "Aggregate",
    "DictRecord",
    "MicroMacro",
    "UnitStats",
    "aggregate",
    "kendall_tau_b",
    "none_if_nan",
    "pairwise_accuracy",
    "spearman",
    "top1_agreement",
    "unit_stats",
]

METRICS = ("kendall_tau_b", "spearman", "top1", "pairwise_accuracy")
_DECIMALS = 9


def _arr(x: Sequence[float]) -> np.ndarray:
    return np.round(np.asarray(x, dtype=float), _DECIMALS)


_TRIU: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _signs(x: np.ndarray) -> np.ndarray:
    n = len(x)
    if n not in _TRIU:
        _TRIU[n] = np.triu_indices(n, k=1)
    i, j = _TRIU[n]
    return np.sign(x[i] - x[j])


def _centred_ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank, as ``scipy.stats.rankdata``), minus the mean
    rank, divided by n."""
    n = len(x)
    less = (x[None, :] < x[:, None]).sum(axis=1)
    equal = (x[None, :] == x[:, None]).sum(axis=1)
    return (less + (equal + 1) / 2.0 - (n + 1) / 2.0) / n


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
    if n == 0:
        return UnitStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0)
    sa, sb = _signs(x), _signs(y)
    prod = sa * sb
    rx, ry = _centred_ranks(x), _centred_ranks(y)
    top_a, top_b = x == x.max(), y == y.max()
    return UnitStats(
        n=n,
        concordant=int((prod > 0).sum()),
        discordant=int((prod < 0).sum()),
        pairs=len(sa),
        tied_a=int((sa == 0).sum()),
        tied_b=int((sb == 0).sum()),
        agree=int((sa == sb).sum()),
        top_inter=int((top_a & top_b).sum()),
        top_union=int((top_a | top_b).sum()),
        sxy=float(rx @ ry),
        sxx=float(rx @ rx),
        syy=float(ry @ ry),
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


def _ci(c: Any) -> tuple[float, float] | None:
    return None if c is None else (float(c[0]), float(c[1]))


@dataclass(frozen=True)
class MicroMacro:
    """One metric over a set of units: the micro and macro values and their 95% CIs.

    A value is None when undefined (e.g. tau of constant scores); a CI is None with fewer than
    two groups, no resamples, or an undefined value.
    """

    micro: float | None
    micro_ci: tuple[float, float] | None
    macro: float | None
    macro_ci: tuple[float, float] | None

    def to_dict(self) -> dict[str, Any]:
        """``{"micro", "micro_ci", "macro", "macro_ci"}``, CIs as ``[lo, hi]`` lists (JSON)."""
        return {
            "micro": self.micro,
            "micro_ci": list(self.micro_ci) if self.micro_ci else None,
            "macro": self.macro,
            "macro_ci": list(self.macro_ci) if self.macro_ci else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MicroMacro:
        """Inverse of :meth:`to_dict`."""
        return cls(d["micro"], _ci(d["micro_ci"]), d["macro"], _ci(d["macro_ci"]))


class DictRecord:
    """Base of the report dataclasses: ``to_dict``/``from_dict`` over their fields.

    Values are kept as they are, except the fields named in ``nested``: dicts of records,
    converted with the record type's own ``to_dict``/``from_dict``.
    """

    nested: ClassVar[dict[str, Any]] = {}
    """Field name -> the record type of that field's ``{name: record}`` values."""
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # set by @dataclass on each subclass

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able dict: every field by name, in declaration order."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for k in self.nested:
            out[k] = {name: r.to_dict() for name, r in out[k].items()}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Self:
        """Inverse of :meth:`to_dict`; keys that are not fields (added by callers) are ignored."""
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d}  # missing: the default
        for k, record in cls.nested.items():
            kw[k] = {name: record.from_dict(v) for name, v in kw[k].items()}
        return cls(**kw)


@dataclass(frozen=True)
class Aggregate(DictRecord):
    """What :func:`aggregate` measured over a set of units (``to_dict``: ``{"n_groups",
    "n_units", "metrics": {metric: MicroMacro.to_dict()}}``)."""

    nested = {"metrics": MicroMacro}

    n_groups: int
    """Groups with at least one unit of two or more items."""
    n_units: int
    """Units counted (units of fewer than two items are skipped)."""
    metrics: dict[str, MicroMacro]
    """One entry per name in :data:`METRICS`, in that order."""


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
    if len(values) == 1:
        return values[0]
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if len(v) else math.nan


def none_if_nan(x: float | None) -> float | None:
    """``x`` as a float, or None when it is None, NaN or infinite (JSON has no NaN)."""
    return None if x is None or not math.isfinite(x) else float(x)


def _resample_counts(rng: np.random.Generator, b: int, g: int) -> np.ndarray:
    """``b`` cluster-bootstrap resamples as counts: row r says how often each group was drawn."""
    idx = rng.integers(0, g, size=(b, g)) + (np.arange(b) * g)[:, None]
    return np.bincount(idx.ravel(), minlength=b * g).reshape(b, g).astype(float)


def aggregate(
    units: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Aggregate:
    """Micro and macro values of every metric with cluster-bootstrap CIs over groups.

    ``units`` are ``(group_id, a, b)``; units with fewer than two items are skipped. Values
    are ``None`` when undefined, CIs ``None`` with < 2 groups.

    The bootstrap is the percentile method of ``scipy.stats.bootstrap`` over resampled groups,
    written out so that every metric, micro and macro, is computed from the same resamples in
    one matrix product (resample counts x per-group sums): scipy's version re-gathered the
    per-group sums for each of the eight statistics and took seconds on 10k groups.
    """
    by_group: dict[str, list[UnitStats]] = defaultdict(list)
    for gid, a, b in units:
        if len(a) >= 2:
            by_group[gid].append(unit_stats(a, b))
    groups = list(by_group)
    G = len(groups)
    n_units = sum(len(v) for v in by_group.values())
    if G == 0:
        return Aggregate(0, n_units, {m: MicroMacro(None, None, None, None) for m in METRICS})
    sums = np.array([[sum(getattr(u, f) for u in by_group[g]) for f in _FIELDS] for g in groups])
    values = np.array(
        [[_finite_mean([getattr(u, m) for u in by_group[g]]) for m in METRICS] for g in groups]
    )
    valid = np.isfinite(values)
    table = np.hstack([sums, np.where(valid, values, 0.0), valid.astype(float)])
    nf, nm = len(_FIELDS), len(METRICS)

    def evaluate(weights: np.ndarray) -> dict[str, np.ndarray]:
        tot = weights @ table
        summed = {f: tot[:, i] for i, f in enumerate(_FIELDS)}
        res = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            for k, m in enumerate(METRICS):
                res[f"{m}.micro"] = _micro(summed, m)
                n_valid = tot[:, nf + nm + k]
                res[f"{m}.macro"] = np.where(n_valid > 0, tot[:, nf + k] / n_valid, np.nan)
        return res

    point = evaluate(np.ones((1, G)))
    draws: dict[str, list[np.ndarray]] = defaultdict(list)
    if G >= 2 and n_resamples > 0:
        rng = np.random.default_rng(seed)
        for start in range(0, n_resamples, 256):
            for key, v in evaluate(_resample_counts(rng, min(256, n_resamples - start), G)).items():
                draws[key].append(v)
    alpha = (1.0 - confidence) / 2
    metrics: dict[str, MicroMacro] = {}
    for m in METRICS:
        entry: dict[str, Any] = {}
        for kind in ("micro", "macro"):
            value = none_if_nan(float(point[f"{m}.{kind}"][0]))
            entry[kind], entry[f"{kind}_ci"] = value, None
            if value is not None and draws:
                d = np.concatenate(draws[f"{m}.{kind}"])
                d = d[np.isfinite(d)]
                if len(d):
                    lo, hi = np.quantile(d, [alpha, 1.0 - alpha])
                    entry[f"{kind}_ci"] = (float(lo), float(hi))
        metrics[m] = MicroMacro(**entry)
    return Aggregate(G, n_units, metrics)
