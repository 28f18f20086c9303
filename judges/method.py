"""The judge protocol: what every judging method provides, and the plan of a judging run.

A judging method (``rankgym.judges.method.JudgeMethod``) turns groups into judgements under one
:class:`~rankgym.types.JudgeSpec`. It implements two things:

- :meth:`JudgeMethod.plan`: the requests it *would* send for some groups (their messages,
  input tokens, whether the store's judge cache already answers them, whether they fit the
  judge's context), a token and cost estimate, and no call. ``rankgym judge --dry-run``
  prints the plan.
- :meth:`JudgeMethod.judge`: one group's :class:`~rankgym.types.Judgement` (``status="ok"``
  with a score per trajectory, or ``"unjudged"`` with the error).

The base class adds the rest, shared by every method: :meth:`~JudgeMethod.judge_and_record`
(an unexpected error becomes an unjudged group; the judgement, its hack signals and, if new,
the group go to the store) and :func:`judge_all` (groups concurrently). The group judge
(``group_judge.GroupJudge``: one call per presentation of the whole group) is the built-in
method; a training reward picks its method (``Reward.judge_method``, ``trainer/rewards.py``).
Adding a judge method is one subclass (docs/judging.md, "Adding a judge method").

What it does not do: choose a method from the spec (the caller does), or limit concurrency
(each method holds its own semaphore, sized by ``concurrency``).
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from rankgym.types import Group, Judgement, JudgeSpec

from .calling import RetryPolicy, describe
from .prompt import exact_token_counts
from .signals import judge_hack_signals

if TYPE_CHECKING:
    from rankgym.store import Store

__all__ = [
    "GroupPlan",
    "JudgeMethod",
    "JudgeOptions",
    "JudgePlan",
    "PlannedRequest",
    "estimate_cost",
    "judge_all",
    "make_plan",
]

log = logging.getLogger(__name__)


@dataclass
class PlannedRequest:
    """One request a method would send: a presentation order and its messages."""

    order: list[str]
    input_tokens: int
    cached: bool
    """The store's judge cache answers it: no call."""
    fits: bool
    """It fits the judge's context budget (else the method splits it)."""
    messages: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GroupPlan:
    """The requests for one group; ``identical`` maps each twin shown once to its original."""

    group_id: str
    trajectories: int
    requests: list[PlannedRequest] = field(default_factory=list)
    identical: dict[str, str] = field(default_factory=dict)
    note: str | None = None
    """Why nothing is asked (e.g. ``"no trajectories"``); None when there are requests."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group_id": self.group_id,
            "presentations": [r.to_dict() for r in self.requests],
        }
        if self.note is not None:
            out["note"] = self.note
        else:
            out["identical"] = self.identical
        return out


@dataclass
class JudgePlan:
    """What judging some groups would cost, request by request; nothing was sent."""

    model: str
    spec_hash: str
    groups: list[GroupPlan]
    estimated_output_tokens: int
    estimated_cost_usd: float | None
    exact_token_counts: bool
    """Input token counts come from the judge's own tokenizer (else LiteLLM's estimate)."""

    @property
    def requests(self) -> int:
        """Requests that would be sent (cache hits left out)."""
        return sum(not r.cached for g in self.groups for r in g.requests)

    @property
    def cached(self) -> int:
        """Requests the judge cache answers."""
        return sum(r.cached for g in self.groups for r in g.requests)

    @property
    def input_tokens(self) -> int:
        """Input tokens of the requests that would be sent."""
        return sum(r.input_tokens for g in self.groups for r in g.requests if not r.cached)


def estimate_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """LiteLLM's price of that many tokens on ``model``; None when it has no price for it."""
    try:
        import litellm

        p_in, p_out = litellm.cost_per_token(
            model=model, prompt_tokens=input_tokens, completion_tokens=output_tokens
        )
    except Exception:  # LiteLLM has no price for this model: the cost is unknown (None)
        return None
    return float(p_in + p_out)


def make_plan(
    spec: JudgeSpec, spec_hash: str, groups: list[GroupPlan], estimated_output_tokens: int
) -> JudgePlan:
    """A :class:`JudgePlan` of ``groups`` with the cost estimate of its uncached requests."""
    plan = JudgePlan(
        model=spec.model,
        spec_hash=spec_hash,
        groups=groups,
        estimated_output_tokens=estimated_output_tokens,
        estimated_cost_usd=None,
        exact_token_counts=exact_token_counts(spec.model),
    )
    plan.estimated_cost_usd = estimate_cost(spec.model, plan.input_tokens, estimated_output_tokens)
    return plan


class JudgeOptions(TypedDict, total=False):
    """The keyword options every method takes (a subclass's ``**options``)."""

    concurrency: int
    """Requests in flight at most (default 4)."""
    retry: RetryPolicy | None
    tools: dict[str, list[dict[str, Any]]] | None
    """Group id -> the OpenAI tool schemas shown to the judge."""


class JudgeMethod(ABC):
    """A way of judging groups under one spec (module docstring); subclass and implement
    :meth:`plan` and :meth:`judge`.

    ``tools`` maps group id to the OpenAI tool schemas shown to the judge; ``store`` (optional)
    holds the judge cache and receives what :meth:`record` writes.
    """

    def __init__(
        self, spec: JudgeSpec, store: Store | None = None, **options: Unpack[JudgeOptions]
    ) -> None:
        if "api_key" in spec.extra:
            raise ValueError("api_key must not be stored in a judge spec; use the env variable")
        self.spec = spec
        self.spec_hash = spec.spec_hash
        self.store = store
        self.retry = options.get("retry") or RetryPolicy()
        self.concurrency = max(1, options.get("concurrency", 4))
        self.tools = options.get("tools") or {}

    @abstractmethod
    def plan(self, groups: Sequence[Group], permutations: int = 1) -> JudgePlan:
        """The requests judging ``groups`` would send, with their token counts; sends none."""

    @abstractmethod
    async def judge(
        self, group: Group, permutations: int = 1, orders: list[list[str]] | None = None
    ) -> Judgement:
        """One group's judgement (not stored); a judge failure is an ``unjudged`` judgement."""

    async def judge_and_record(
        self,
        group: Group,
        permutations: int = 1,
        on_done: Callable[[Group, Judgement], None] | None = None,
        orders: list[list[str]] | None = None,
    ) -> Judgement:
        """:meth:`judge` then :meth:`record`; any unexpected error becomes an unjudged group."""
        try:
            j = await self.judge(group, permutations, orders)
        except Exception as e:  # a bug must not lose the other groups' results
            log.exception("judging group %s failed", group.id)
            j = Judgement(
                group_id=group.id, spec_hash=self.spec_hash, status="unjudged", error=describe(e)
            )
        try:
            self.record(group, j)
        except Exception as e:  # the store refused it: report this group, keep the others
            log.exception("storing the judgement of group %s failed", group.id)
            j = Judgement(
                group_id=group.id,
                spec_hash=self.spec_hash,
                status="unjudged",
                error=f"could not store the judgement: {describe(e)}",
            )
            group.judgement = j
        if on_done is not None:
            on_done(group, j)
        return j

    def record(self, group: Group, j: Judgement) -> None:
        """Attach ``j`` to ``group``, add judge hack signals, and write both to the store."""
        group.judgement = j
        signals = judge_hack_signals(group, j)
        by_id = {t.id: t for t in group.trajectories}
        for tid, name, _ in signals:
            if name not in by_id[tid].hack_signals:
                by_id[tid].hack_signals.append(name)
        if self.store is None:
            return
        if self.store.group_content_hash(group.id) == group.content_hash():
            self.store.put_judgement(j)
        else:
            self.store.put_group(group)
        for tid, name, detail in signals:
            self.store.add_hack_signal(tid, name, detail)


async def judge_all(
    method: JudgeMethod,
    groups: Sequence[Group],
    permutations: int = 1,
    on_done: Callable[[Group, Judgement], None] | None = None,
) -> list[Judgement]:
    """Judge and record ``groups`` concurrently with ``method``; judgements in input order."""
    return list(
        await asyncio.gather(*(method.judge_and_record(g, permutations, on_done) for g in groups))
    )
