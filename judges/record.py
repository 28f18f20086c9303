"""The record of one presentation of a group to the judge, and run summaries.

A :class:`Presentation` is what one comparison (one order of the group) produced: its scores,
rationales and flags by trajectory id, what it cost, and the errors met on the way. The store
keeps it as a plain dict (typed ``rankgym.types.PresentationRecord``) inside
``Judgement.presentations`` (and in the judge cache), so :meth:`Presentation.to_dict` /
:meth:`Presentation.from_dict` are the only conversions.

What it does not do: average presentations (``GroupJudge.judge`` does) or write to the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from rankgym.types import Judgement, PresentationRecord

__all__ = ["Presentation", "judge_summary", "judge_timing"]


@dataclass
class Presentation:
    """One presentation's outcome; ``error`` is set when it could not be judged."""

    order: list[str]
    scores: dict[str, float] = field(default_factory=dict)
    rationales: dict[str, str] = field(default_factory=dict)
    hack_suspected: dict[str, bool] = field(default_factory=dict)
    raw_response: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    calls: int = 0
    errors: list[str] = field(default_factory=list)
    latency_s: float = 0.0
    service_s: float = 0.0
    """Seconds the judge model worked on this presentation's calls (all attempts)."""
    queue_s: float = 0.0
    """Seconds its calls waited: for a ``--concurrency`` slot, and inside the provider for the
    one local model. ``latency_s`` is wall time, which also holds retry backoff."""
    subsets: list[dict[str, Any]] | None = None
    """For a group judged in overlapping parts: each part's order and raw scores."""
    cached: bool = False
    error: str | None = None
    copies: dict[str, str] | None = None
    """Trajectory id -> the identical trajectory whose score it received (deduplication)."""
    scale: float | None = None
    """Set when the judge answered on 0-10 or 0-100 and its scores were divided down."""

    def add_usage(self, input_tokens: int, output_tokens: int, cost: float | None) -> None:
        """Add one call's tokens and cost (cost stays None while no call reported one)."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def to_dict(self) -> PresentationRecord:
        """A JSON-able dict; optional fields that are unset are left out."""
        d = asdict(self)
        for k in ("subsets", "error", "copies", "scale"):
            if d[k] is None:
                del d[k]
        return cast(PresentationRecord, d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Presentation:
        """Inverse of :meth:`to_dict`; unknown keys (older records) are ignored."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


def judge_timing(j: Judgement) -> tuple[float, float] | None:
    """(service seconds, queue seconds) of a judgement's fresh (not cached) presentations, or
    None for records written before the split was measured."""
    fresh = [p for p in j.presentations if not p.get("cached")]
    if not fresh or not any("service_s" in p for p in fresh):
        return None
    return (
        sum(float(p.get("service_s") or 0.0) for p in fresh),
        sum(float(p.get("queue_s") or 0.0) for p in fresh),
    )


def judge_summary(judgements: list[Judgement], spec_hash: str) -> dict[str, Any]:
    """Counts for ``rankgym judge --json`` and for trainer step metrics; ``service_s_mean`` and
    ``queue_s_mean`` split the per-group latency into the judge's work and the wait for it."""
    costs = [j.cost_usd for j in judgements if j.cost_usd is not None]
    timings = [t for t in map(judge_timing, judgements) if t is not None]
    return {
        "groups": len(judgements),
        "judged": sum(j.status == "ok" for j in judgements),
        "unjudged": sum(j.status != "ok" for j in judgements),
        "cached": sum(j.cached and j.status == "ok" for j in judgements),
        "calls": sum(j.calls for j in judgements),
        "input_tokens": sum(j.input_tokens for j in judgements),
        "output_tokens": sum(j.output_tokens for j in judgements),
        "cost_usd": sum(costs) if costs else None,
        "latency_s_mean": (
            sum(j.latency_s for j in judgements) / len(judgements) if judgements else 0.0
        ),
        "service_s_mean": sum(t[0] for t in timings) / len(timings) if timings else None,
        "queue_s_mean": sum(t[1] for t in timings) / len(timings) if timings else None,
        "spec_hash": spec_hash,
    }
