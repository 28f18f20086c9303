"""Can this judge judge? Calibration groups of known order, judged in several orders.

:func:`calibration_groups` rolls out ``n_groups`` tasks of an env with a *mixed* policy:
slot ``k`` of every group is the env's oracle with noise ``k / (G - 1)`` (``oracle~P``: with
probability P a random tool call instead of the oracle's next step), so each group runs from
the clean solution to the random policy. The known order is the verifier's
(``verifiable_reward``), ties broken by less noise (the rubric prefers more progress and fewer
wasted calls); identical trajectories tie.

:func:`run_check` judges every group in its rollout order (best first), reversed, and in
``permutations - 2`` shuffles, stores groups and judgements (the dashboard's Agreement page
shows them under the judge's spec), and :func:`check_report` measures, with cluster-bootstrap
95% CIs over groups:

- ``pairwise_accuracy``, ``kendall_tau``, ``top1``: each presentation's scores against the known
  order (one unit per presentation: what one judge call gives you);
- ``position_consistency``: Kendall tau-b between the presentations of one group (the
  dashboard's judge-vs-self). A judge that reads position only scores about -1/3 with three
  orders (rollout vs reversed is -1, the shuffles about 0), a consistent judge near 1;
- ``by_order`` (rollout / reversed / shuffled) and ``averaged`` (the mean over presentations,
  what ``--permutations K`` training would use), and ``mean_score_by_noise``.

``can_judge`` is true when the tau CI lies above 0. The numbers are a :class:`CheckScores`;
:func:`run_check` returns them with what the run cost as a :class:`CheckReport`, whose
``to_dict`` is the ``--json`` output. What it does not do: test the rubric on
your task distribution (calibration groups come from the oracle and random calls, so they
are easier than two sampled policies of similar skill), or detect reward hacking. It lives
above the envs and the judges (it rolls out an env and runs a judge), so it sits in the
trainer layer; it moved here from ``rankgym.judges.check`` (issue 27).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import time
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Self

from rankgym.envs.policies import make_policy
from rankgym.envs.registry import make
from rankgym.envs.rollout import EnvFactory, rollout_groups, rollout_to_store
from rankgym.errors import StoreError
from rankgym.judges.calling import RetryPolicy
from rankgym.judges.group_judge import GroupJudge, add_shuffles
from rankgym.judges.method import JudgeMethod
from rankgym.judges.metrics import Aggregate, aggregate
from rankgym.judges.prompt import twins
from rankgym.types import Group, Judgement, JudgeSpec

if TYPE_CHECKING:
    from rankgym.store import Store

__all__ = [
    "CheckConfig",
    "CheckReport",
    "CheckScores",
    "Estimate",
    "Headline",
    "calibration_groups",
    "check_orders",
    "check_report",
    "run_check",
]

RUN_ID = "judge-check"
HEADLINE = {
    "pairwise_accuracy": "pairwise_accuracy",
    "kendall_tau": "kendall_tau_b",
    "top1": "top1",
}


@dataclass
class CheckConfig:
    """What to check: ``groups`` tasks of ``env_id``, ``group_size`` noise levels each,
    ``permutations`` presentations (rollout, reversed, then shuffles; at least 2)."""

    env_id: str
    groups: int = 8
    group_size: int = 4
    permutations: int = 3
    seed: int = 0
    split: str = "train"
    resamples: int = 2000
    concurrency: int = 2
    env_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Estimate:
    """A macro value over groups with its 95% cluster-bootstrap CI.

    ``value`` is None when undefined (no variation); the bounds are None with fewer than two
    judged groups.
    """

    value: float | None
    ci_low: float | None
    ci_high: float | None

    @classmethod
    def of(cls, agg: Aggregate, metric: str) -> Estimate:
        """The macro value of ``metric`` in ``agg`` and its CI."""
        m = agg.metrics[metric]
        low, high = m.macro_ci or (None, None)
        return cls(m.macro, low, high)


@dataclass(frozen=True)
class Headline:
    """The three numbers against the known order."""

    pairwise_accuracy: Estimate
    kendall_tau: Estimate
    """Kendall tau-b."""
    top1: Estimate

    @classmethod
    def of(cls, agg: Aggregate) -> Headline:
        """The headline numbers of ``agg``."""
        return cls(*(Estimate.of(agg, m) for m in HEADLINE.values()))


@dataclass(frozen=True)
class CheckScores:
    """What :func:`check_report` measures (see the module docstring)."""

    pairwise_accuracy: Estimate
    """Each presentation's scores against the known order (one unit per presentation)."""
    kendall_tau: Estimate
    top1: Estimate
    position_consistency: Estimate
    """Kendall tau-b between the presentations of one group."""
    by_order: dict[str, Headline]
    """``rollout`` / ``reversed`` / ``shuffled`` (those with presentations)."""
    averaged: Headline
    """The mean over a group's presentations against the known order."""
    mean_score_by_noise: dict[str, float]
    """Noise level (``"0"``, ``"0.3333"``, ...) -> mean averaged judge score."""
    mean_verifiable_by_noise: dict[str, float]
    """Noise level -> mean verifiable reward (the known order's first key)."""
    can_judge: bool
    """The tau CI lies above 0."""
    judged: int
    """Calibration groups with an ok judgement."""
    unjudged: int
    """Calibration groups the judge failed on (left out of every number)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able dict (``--json``), fields in order, nested records as dicts."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Self:
        """Inverse of :meth:`to_dict`; keys other code added (``store``, ``decision``) ignored."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        for k in ("pairwise_accuracy", "kendall_tau", "top1", "position_consistency"):
            kw[k] = Estimate(**d[k])
        kw["by_order"] = {o: _headline(h) for o, h in d["by_order"].items()}
        kw["averaged"] = _headline(d["averaged"])
        return cls(**kw)


@dataclass(frozen=True)
class CheckReport(CheckScores):
    """:class:`CheckScores` plus what was checked and what it cost (``rankgym judge-check``)."""

    env: str
    judge: str
    """The judge's model."""
    spec_hash: str
    groups: int
    group_size: int
    permutations: int
    seed: int
    calls: int
    """Judge calls made (0 when every judgement came from the cache)."""
    cached: int
    """Judgements taken from the judge cache."""
    input_tokens: int
    cost_usd: float | None
    errors: list[str]
    """The first five errors of unjudged groups."""
    rollout_s: float
    seconds: float


def _plain(v: Any) -> Any:
    if isinstance(v, Estimate | Headline):
        return {f.name: _plain(getattr(v, f.name)) for f in fields(v)}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _headline(d: dict[str, Any]) -> Headline:
    return Headline(**{k: Estimate(**d[k]) for k in HEADLINE})


def noise_levels(group_size: int) -> list[float]:
    """``0, 1/(G-1), ..., 1``: the noise of each slot of a calibration group."""
    return [round(k / max(1, group_size - 1), 4) for k in range(group_size)]


def calibration_groups(cfg: CheckConfig, store: Store | None = None) -> list[Group]:
    """Roll out (or load from ``store``, same ids) the calibration groups of ``cfg``, in task order.

    With a store this is ``rollout_to_store`` (run ``judge-check-sS-gG``): each group is stored
    as it ends, so an interrupted check resumes without rolling out the stored groups again.
    Raises ``StoreError`` when a group could not be stored (a rerun retries it).
    """
    spec = ",".join(f"oracle~{nz:g}" for nz in noise_levels(cfg.group_size))
    kwargs: dict[str, Any] = dict(
        n_tasks=cfg.groups, group_size=cfg.group_size, split=cfg.split, seed=cfg.seed,
        run_id=f"{RUN_ID}-s{cfg.seed}-g{cfg.group_size}", progress=False,
    )  # fmt: skip
    factory = EnvFactory(lambda: make(cfg.env_id, **cfg.env_kwargs), cfg.env_id)
    policy = make_policy(spec, seed=cfg.seed)
    if store is None:
        return rollout_groups(factory, policy, **kwargs)
    res = rollout_to_store(store, factory, policy, **kwargs)
    if res.failed:
        f = res.failed[0]
        raise StoreError(
            f"{len(res.failed)} calibration groups could not be stored, the first "
            f"{f['group_id']} (task {f['task_id']}): {f['error']}; rerun to retry them"
        )
    new = {g.id: g for g in res.groups}
    groups = [new.get(i) or store.get_group(i) for i in res.group_ids]
    _add_missing_tools(groups, factory, cfg.split, store)
    return groups


def _add_missing_tools(groups: list[Group], factory: EnvFactory, split: str, store: Store) -> None:
    """Give groups stored before tools were kept (schema < 5) their env's tool schemas."""
    env = None
    for g in groups:
        if g.tools or not g.trajectories:
            continue
        env = env or factory()
        try:
            _, info = env.reset(seed=0, options={"task_id": g.task_id, "split": split})
        except Exception:  # noqa: BLE001 - the task is gone: judge it without a tools section
            continue
        g.tools = list(info.get("tools") or [])
        if g.tools:
            store.put_group(g)


def check_orders(group: Group, permutations: int, seed: int) -> list[list[str]]:
    """Rollout order, reversed, then ``permutations - 2`` distinct seeded shuffles."""
    ids = [t.id for t in group.trajectories]
    rng = random.Random(f"{seed}:{group.id}")
    orders = add_shuffles([ids, ids[::-1]], ids, max(0, permutations - 2), rng)
    return orders[: max(2, permutations)]


def _noise_of(group: Group) -> dict[str, float]:
    levels = noise_levels(len(group.trajectories))
    out = {}
    for k, t in enumerate(group.trajectories):
        name = t.turns[0].policy if t.turns else None
        try:
            out[t.id] = float(name.split("~", 1)[1]) if name and "~" in name else levels[k]
        except ValueError:
            out[t.id] = levels[k]
    return out


def known_order(group: Group) -> dict[str, float]:
    """Truth score per trajectory: verifier first, less noise second; identical ones tie."""
    noise = _noise_of(group)
    truth = {t.id: (t.verifiable_reward or 0.0) - 1e-3 * noise[t.id] for t in group.trajectories}
    for twin, first in twins(group.trajectories).items():
        truth[twin] = truth[first]
    return truth


def _kind(k: int) -> str:
    return "rollout" if k == 0 else "reversed" if k == 1 else "shuffled"


def check_report(
    groups: list[Group], judgements: list[Judgement], resamples: int = 2000, seed: int = 0
) -> CheckScores:
    """The numbers of the check (see the module docstring) from judged calibration groups."""
    units: dict[str, list[tuple[str, list[float], list[float]]]] = {
        "all": [], "rollout": [], "reversed": [], "shuffled": [], "averaged": [], "self": [],
    }  # fmt: skip
    by_noise: dict[float, list[float]] = {}
    vr_by_noise: dict[float, list[float]] = {}
    for g, j in zip(groups, judgements, strict=True):
        if j.status != "ok":
            continue
        ids = [t.id for t in g.trajectories]
        truth = known_order(g)
        tv = [truth[i] for i in ids]
        pres = [p["scores"] for p in j.presentations]
        for k, sc in enumerate(pres):
            unit = (g.id, [sc[i] for i in ids], tv)
            units["all"].append(unit)
            units[_kind(k)].append(unit)
        for a, b in itertools.combinations(pres, 2):
            units["self"].append((g.id, [a[i] for i in ids], [b[i] for i in ids]))
        avg = j.score_map()
        units["averaged"].append((g.id, [avg[i] for i in ids], tv))
        noise = _noise_of(g)
        for t in g.trajectories:
            by_noise.setdefault(noise[t.id], []).append(avg[t.id])
            vr_by_noise.setdefault(noise[t.id], []).append(t.verifiable_reward or 0.0)
    agg = {k: aggregate(u, n_resamples=resamples, seed=seed) for k, u in units.items()}
    headline = Headline.of(agg["all"])
    low = headline.kendall_tau.ci_low
    return CheckScores(
        pairwise_accuracy=headline.pairwise_accuracy,
        kendall_tau=headline.kendall_tau,
        top1=headline.top1,
        position_consistency=Estimate.of(agg["self"], "kendall_tau_b"),
        by_order={
            kind: Headline.of(agg[kind])
            for kind in ("rollout", "reversed", "shuffled")
            if units[kind]
        },
        averaged=Headline.of(agg["averaged"]),
        mean_score_by_noise={
            f"{nz:g}": round(statistics.mean(v), 4) for nz, v in sorted(by_noise.items())
        },
        mean_verifiable_by_noise={
            f"{nz:g}": round(statistics.mean(v), 4) for nz, v in sorted(vr_by_noise.items())
        },
        can_judge=bool(low is not None and low > 0),
        judged=sum(j.status == "ok" for j in judgements),
        unjudged=sum(j.status != "ok" for j in judgements),
    )


def run_check(
    cfg: CheckConfig,
    spec: JudgeSpec,
    store: Store | None = None,
    retry: RetryPolicy | None = None,
    method: type[JudgeMethod] | None = None,
) -> CheckReport:
    """Roll out (or reuse) the calibration groups, judge them, store both, and report.

    Judgements already in ``store`` for the same spec and orders come from the judge cache at
    no cost, so a rerun is quick. Never raises for a judge failure (unjudged groups are
    counted in ``unjudged``). ``method``: the judging method checked (default the group judge;
    a training run checks its reward's ``judge_method``).
    """
    t0 = time.perf_counter()
    groups = calibration_groups(cfg, store)
    rollout_s = time.perf_counter() - t0
    if store is not None:
        store.put_judge_spec(spec)
    tools = {g.id: g.tools for g in groups if g.tools}  # the env's tools reach the judge
    judge = (method or GroupJudge)(
        spec, store, concurrency=cfg.concurrency, retry=retry, tools=tools
    )

    async def main() -> list[Judgement]:
        return list(
            await asyncio.gather(
                *(
                    judge.judge_and_record(g, orders=check_orders(g, cfg.permutations, cfg.seed))
                    for g in groups
                )
            )
        )

    judgements = asyncio.run(main())
    scores = check_report(groups, judgements, cfg.resamples, cfg.seed)
    costs = [j.cost_usd for j in judgements if j.cost_usd is not None]
    return CheckReport(
        **vars(scores),
        env=cfg.env_id,
        judge=spec.model,
        spec_hash=spec.spec_hash,
        groups=len(groups),
        group_size=cfg.group_size,
        permutations=max(2, cfg.permutations),
        seed=cfg.seed,
        calls=sum(j.calls for j in judgements),
        cached=sum(j.cached for j in judgements),
        input_tokens=sum(j.input_tokens for j in judgements),
        cost_usd=sum(costs) if costs else None,
        errors=[j.error for j in judgements if j.error][:5],
        rollout_s=round(rollout_s, 2),
        seconds=round(time.perf_counter() - t0, 2),
    )
