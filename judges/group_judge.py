"""The group judge: one LiteLLM call per presentation of a group, validated, cached, stored.

For each group, :func:`judge_groups`:

1. builds the comparison request (``prompt.build_prompt``) for each of ``permutations``
   presentations: presentation 0 keeps the group's order, the others are deterministic
   shuffles seeded by ``spec.seed`` and the group's content hash;
2. looks each presentation up in the store's judge cache, keyed by
   ``(spec hash, hash(group content hash, presentation order, prompt format, tools))``, plus
   the weights dtype for the in-process ``local/`` judge; a hit makes no call;
3. otherwise calls the judge once (``calling.call_judge``) and validates the reply
   (``parse.parse_judge_output``): every label exactly once, no unknown or duplicate ids,
   finite scores, clamped to [0, 1];
4. retries with bounded exponential backoff on malformed output, wrong ids, timeouts, rate
   limits and provider errors. After a malformed reply the retry shows the judge its reply and
   the validation error (a deterministic judge would otherwise repeat itself). Auth, not-found
   and bad-request errors are not retried;
5. averages each trajectory's score over presentations (rationale from the first,
   ``hack_suspected`` when flagged in at least half), keeps every presentation in
   ``Judgement.presentations``, and stores the judgement. A group whose presentations cannot
   all be judged is stored with ``status="unjudged"`` and the error, never dropped;
6. records hack signals ``judge_hack_suspected`` and ``judge_top_verifier_failed`` (see
   ``signals.judge_hack_signals``).

Groups that do not fit the judge's context (``spec.context_window``, else LiteLLM's model
info, else a context-window error from the provider) are judged as overlapping subsets and
merged onto one scale (``subsets.py``).

What it does not do: it does not make a weak judge strong, it does not check that a rubric is
sensible (``rankgym judge-check`` measures that). Token counts are the provider's (``usage``);
money is ``litellm.completion_cost`` where LiteLLM knows the price, else ``None``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from rankgym.judge_backend import parse_model
from rankgym.types import Group, Judgement, JudgeSpec, TrajectoryScore, content_hash

from .calling import (
    JudgeFailed,
    RetryPolicy,
    call_judge,
    describe,
    is_context_error,
    is_retryable,
)
from .method import (
    GroupPlan,
    JudgeMethod,
    JudgeOptions,
    JudgePlan,
    PlannedRequest,
    judge_all,
    make_plan,
)
from .parse import JudgeOutputError, parse_judge_reply
from .prompt import PROMPT_FORMAT, JudgePrompt, build_prompt, count_tokens, twins
from .record import Presentation, judge_summary
from .signals import VERIFIER_PASS, judge_hack_signals
from .spec import (
    LOCAL_PREFIX,
    check_credentials,
    context_budget,
    default_spec,
    ensure_provider,
    missing_credentials,
    quiet_litellm,
)
from .subsets import merge_subset_scores, overlapping_windows

if TYPE_CHECKING:
    from rankgym.store import Store

__all__ = [
    "LOCAL_PREFIX",
    "VERIFIER_PASS",
    "GroupJudge",
    "JudgeFailed",
    "JudgeOutputError",
    "RetryPolicy",
    "check_credentials",
    "default_spec",
    "judge_groups",
    "judge_groups_sync",
    "judge_hack_signals",
    "missing_credentials",
    "in_process_dtype",
    "presentation_cache_key",
    "presentation_orders",
    "summarize",
]

log = logging.getLogger(__name__)

summarize = judge_summary
"""Old name of :func:`record.judge_summary`, kept for callers."""


def presentation_orders(
    ids: list[str], k: int, seed: int | None, group_hash: str
) -> list[list[str]]:
    """``k`` presentation orders: the given order, then distinct deterministic shuffles."""
    return add_shuffles([list(ids)], ids, max(1, k) - 1, random.Random(f"{seed}:{group_hash}"))


def add_shuffles(
    orders: list[list[str]], ids: list[str], n: int, rng: random.Random
) -> list[list[str]]:
    """Append ``n`` shuffles of ``ids`` to ``orders``, each unlike the ones before when 20
    tries find one (a group of 2 has only 2 orders), and return ``orders``."""
    for _ in range(n):
        o = list(ids)
        for _try in range(20):
            rng.shuffle(o)
            if o not in orders:
                break
        orders.append(list(o))
    return orders


def presentation_cache_key(
    group: Group,
    order: list[str],
    tools: list[dict[str, Any]] | None,
    dtype: str | None = None,
) -> str:
    """The ``group_hash`` half of a judge-cache key: group content, order, prompt format and the
    tools shown (none and an empty list give the same prompt, so the same key); ``dtype``, the
    weights dtype of an in-process judge (``local/``), so a verdict computed in bf16 never
    answers for fp32 (``RANKGYM_JUDGE_DTYPE``). A provider's model gives None: its keys hold
    no dtype."""
    key: dict[str, Any] = {
        "group": group.content_hash(),
        "order": order,
        "format": PROMPT_FORMAT,
        "tools": tools or None,
    }
    if dtype is not None:
        key["dtype"] = dtype
    return content_hash(key)


def in_process_dtype(model: str) -> str | None:
    """The weights dtype a ``local/`` judge computes in (loads no model), part of every cache
    key of its verdicts; None for a provider's model."""
    if not parse_model(model).in_process:
        return None
    from .local_provider import serving_dtype

    return serving_dtype()


def _with_copies(rec: Presentation, copies: dict[str, str]) -> Presentation:
    """A copy of ``rec`` whose score maps also hold each twin (with its original's values)."""
    out = Presentation.from_dict(rec.to_dict())
    if copies:
        out.copies = dict(copies)
        for twin, src in copies.items():
            out.scores[twin] = out.scores[src]
            out.rationales[twin] = out.rationales.get(src, "")
            out.hack_suspected[twin] = out.hack_suspected.get(src, False)
    return out


def _storable(rec: Presentation) -> bool:
    """Whether ``rec`` round-trips through JSON and UTF-8 (else it is not cached: a cached
    record that cannot be read back would fail every rerun)."""
    try:
        json.dumps(rec.to_dict(), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError):
        log.warning("judge record for order %s is not storable; not cached", rec.order)
        return False
    return True


def _retry_messages(prompt: JudgePrompt, text: str, err: Exception) -> list[dict[str, str]]:
    """The request again, with the rejected reply and why it was rejected."""
    return [
        *prompt.messages,
        {"role": "assistant", "content": text[:4000]},
        {
            "role": "user",
            "content": f"That reply could not be used: {err}. Reply again with only the JSON "
            f"object, exactly one entry for each id in {json.dumps(list(prompt.labels))}.",
        },
    ]


class GroupJudge(JudgeMethod):
    """Judges groups under one spec, the whole group in each call (module docstring); holds
    the call semaphore and the store. The built-in :class:`~.method.JudgeMethod`."""

    OUTPUT_TOKENS_PER_TRAJECTORY = 60
    """The plan's estimate of answer tokens per trajectory shown (a score and a rationale)."""

    def __init__(
        self, spec: JudgeSpec, store: Store | None = None, **options: Unpack[JudgeOptions]
    ) -> None:
        super().__init__(spec, store, **options)
        self.sem = asyncio.Semaphore(self.concurrency)
        self.budget = context_budget(spec)
        ensure_provider(spec.model)
        quiet_litellm()  # no "Provider List" banners on stdout for unpriced models
        self.dtype = in_process_dtype(spec.model)
        """The local judge's weights dtype, part of its cache keys (None for a provider)."""

    # ---- the plan (``rankgym judge --dry-run``) -------------------------------------
    def plan(self, groups: Sequence[Group], permutations: int = 1) -> JudgePlan:
        """Every presentation :meth:`judge` would ask for, built and counted, none sent.

        Counts never load or convert the local model (``local/`` counts are estimates until its
        first real load). A presentation order repeated in a tiny group is listed each time.
        """
        plans, shown_total = [], 0
        for g in groups:
            copies = twins(g.trajectories)
            shown = [t.id for t in g.trajectories if t.id not in copies]
            shown_total += len(shown)
            if not shown:
                plans.append(GroupPlan(g.id, len(g.trajectories), note="no trajectories"))
                continue
            tools = self.tools.get(g.id)
            gp = GroupPlan(g.id, len(g.trajectories), identical=copies)
            for order in presentation_orders(shown, permutations, self.spec.seed, g.content_hash()):
                key = presentation_cache_key(g, order, tools, self.dtype)
                hit = (
                    self.store is not None and self.store.cache_get(self.spec_hash, key) is not None
                )
                prompt = build_prompt(g, self.spec.rubric, order, tools)
                n = count_tokens(self.spec.model, prompt.messages)
                fits = self.budget is None or n <= self.budget
                gp.requests.append(PlannedRequest(order, n, hit, fits, prompt.messages))
            plans.append(gp)
        out_tokens = self.OUTPUT_TOKENS_PER_TRAJECTORY * shown_total * permutations
        return make_plan(self.spec, self.spec_hash, plans, out_tokens)

    # ---- one request ------------------------------------------------------------
    async def _judge_prompt(self, prompt: JudgePrompt) -> Presentation:
        """Call until one valid answer; raises :class:`JudgeFailed` carrying the record."""
        labels = list(prompt.labels)
        rec = Presentation(order=prompt.order)
        t0 = time.perf_counter()
        messages = prompt.messages
        for attempt in range(self.retry.max_attempts):
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1))
            rec.calls += 1
            t_wait = t_call = time.perf_counter()
            try:
                async with self.sem:  # waiting here is queue time (behind --concurrency)
                    t_call = time.perf_counter()
                    rec.queue_s += t_call - t_wait
                    reply = await call_judge(self.spec, messages, self.retry)
            except Exception as e:  # noqa: BLE001 - classified below
                rec.service_s += time.perf_counter() - t_call
                rec.errors.append(describe(e))
                if is_context_error(e) or not is_retryable(e):
                    raise JudgeFailed(describe(e), rec, context=is_context_error(e)) from e
                log.info("judge call failed (attempt %d): %s", attempt + 1, describe(e))
                continue
            wall = time.perf_counter() - t_call
            service = wall if reply.service_s is None else min(wall, reply.service_s)
            rec.service_s += service
            rec.queue_s += wall - service  # e.g. behind other calls on the one local model
            rec.add_usage(reply.input_tokens, reply.output_tokens, reply.cost_usd)
            try:
                parsed = parse_judge_reply(reply.text, labels)
            except JudgeOutputError as e:
                rec.errors.append(describe(e))
                log.info("judge reply rejected (attempt %d): %s", attempt + 1, e)
                messages = _retry_messages(prompt, reply.text, e)
                continue
            items = parsed.items
            rec.scale = None if parsed.scale == 1.0 else parsed.scale
            rec.scores = {prompt.labels[k]: v.score for k, v in items.items()}
            rec.rationales = {prompt.labels[k]: v.rationale for k, v in items.items()}
            rec.hack_suspected = {prompt.labels[k]: v.hack_suspected for k, v in items.items()}
            rec.raw_response = reply.text
            rec.latency_s = time.perf_counter() - t0
            return rec
        raise JudgeFailed(
            f"no valid answer after {self.retry.max_attempts} attempts; last: {rec.errors[-1]}",
            rec,
        )

    # ---- one presentation (maybe split) --------------------------------------------
    def _fits(self, prompt: JudgePrompt, budget: int | None) -> bool:
        return budget is None or count_tokens(self.spec.model, prompt.messages) <= budget

    async def _presentation(self, group: Group, order: list[str]) -> Presentation:
        tools = self.tools.get(group.id)
        key = presentation_cache_key(group, order, tools, self.dtype)
        if self.store is not None:
            hit = self.store.cache_get(self.spec_hash, key)
            if hit is not None:
                rec = Presentation.from_dict(hit)
                rec.cached = True
                return rec
        prompt = build_prompt(group, self.spec.rubric, order, tools)
        budget = self.budget
        if self._fits(prompt, budget):
            try:
                rec = await self._judge_prompt(prompt)
            except JudgeFailed as e:
                if not e.context:
                    raise
                budget = int(count_tokens(self.spec.model, prompt.messages) * 0.6)
                rec = await self._split(group, order, tools, budget)
        else:
            rec = await self._split(group, order, tools, budget)
        rec.cached = False
        if self.store is not None and _storable(rec):
            self.store.cache_put(self.spec_hash, key, rec.to_dict())
        return rec

    async def _split(
        self, group: Group, order: list[str], tools: list[dict[str, Any]] | None, budget: int | None
    ) -> Presentation:
        """Judge overlapping subsets that fit ``budget`` and merge them onto one scale."""
        for size in range(len(order) - 1, 1, -1):
            windows = overlapping_windows(order, size)
            prompts = [build_prompt(group, self.spec.rubric, w, tools) for w in windows]
            if all(self._fits(p, budget) for p in prompts):
                break
        else:
            raise JudgeFailed(
                f"even two trajectories of group {group.id} do not fit the judge's context "
                f"({budget} input tokens); use a judge with a larger context_window",
                Presentation(order=order),
            )
        parts = await asyncio.gather(*(self._judge_prompt(p) for p in prompts))
        rec = Presentation(
            order=order,
            scores=merge_subset_scores(order, [p.scores for p in parts]),
            raw_response=json.dumps([p.raw_response for p in parts]),
            subsets=[{"order": p.order, "scores": p.scores} for p in parts],
            calls=sum(p.calls for p in parts),
            errors=[e for p in parts for e in p.errors],
            latency_s=max(p.latency_s for p in parts),
            service_s=sum(p.service_s for p in parts),
            queue_s=sum(p.queue_s for p in parts),
        )
        for p in parts:
            rec.add_usage(p.input_tokens, p.output_tokens, p.cost_usd)
            for t, r in p.rationales.items():
                rec.rationales.setdefault(t, r)
            for t, h in p.hack_suspected.items():
                rec.hack_suspected[t] = rec.hack_suspected.get(t, False) or h
        return rec

    # ---- one group ------------------------------------------------------------------
    async def judge(
        self, group: Group, permutations: int = 1, orders: list[list[str]] | None = None
    ) -> Judgement:
        """Judge one group (``permutations`` presentations) and return its judgement.

        Identical trajectories (same judged content, see ``prompt.twins``) are shown once; each
        twin receives the score of the first one, and ``copies`` in every presentation record
        says which. ``orders`` (trajectory ids, each a permutation of the group) replaces the
        default presentations (the group's order, then ``permutations - 1`` shuffles).
        """
        t0 = time.perf_counter()
        ids = [t.id for t in group.trajectories]
        if not ids:
            return Judgement(
                group_id=group.id,
                spec_hash=self.spec_hash,
                status="unjudged",
                error="the group has no trajectories: nothing to judge",
            )
        copies = twins(group.trajectories)
        shown = [i for i in ids if i not in copies]
        if orders is None:
            orders = presentation_orders(shown, permutations, self.spec.seed, group.content_hash())
        else:
            orders = [[i for i in o if i not in copies] for o in orders]
        unique = list(dict.fromkeys(tuple(o) for o in orders))  # tiny groups repeat orders
        done = await asyncio.gather(
            *(self._presentation(group, list(o)) for o in unique), return_exceptions=True
        )
        by_order = dict(zip(unique, done, strict=True))
        presentations: list[Presentation] = []
        errors: list[str] = []
        seen: set[tuple[str, ...]] = set()
        for i, o in enumerate(orders):
            r = by_order[tuple(o)]
            repeat = tuple(o) in seen  # same order as an earlier one: no new cost
            seen.add(tuple(o))
            if isinstance(r, BaseException):
                rec = getattr(r, "presentation", None) or Presentation(order=o)
                rec = Presentation.from_dict(rec.to_dict())
                rec.error = describe(r)
                errors.append(f"presentation {i + 1}/{len(orders)}: {describe(r)}")
            else:
                rec = _with_copies(r, copies)
            rec.cached = rec.cached or repeat
            presentations.append(rec)
        fresh = [p for p in presentations if not p.cached]
        costs = [p.cost_usd for p in fresh if p.cost_usd is not None]
        j = Judgement(
            group_id=group.id,
            spec_hash=self.spec_hash,
            presentations=[p.to_dict() for p in presentations],
            input_tokens=sum(p.input_tokens for p in fresh),
            output_tokens=sum(p.output_tokens for p in fresh),
            cost_usd=sum(costs) if costs else None,
            calls=sum(p.calls for p in fresh),
            cached=not fresh,
            latency_s=time.perf_counter() - t0,
        )
        if errors:
            j.status = "unjudged"
            j.error = "; ".join(errors)
            return j
        k = len(presentations)
        first = presentations[0]
        j.scores = [
            TrajectoryScore(
                trajectory_id=tid,
                score=min(1.0, max(0.0, sum(p.scores[tid] for p in presentations) / k)),
                rationale=first.rationales.get(tid, ""),
                hack_suspected=2 * sum(bool(p.hack_suspected.get(tid)) for p in presentations) >= k,
            )
            for tid in ids
        ]
        j.raw_response = first.raw_response
        return j


async def judge_groups(
    groups: list[Group],
    spec: JudgeSpec,
    store: Store | None = None,
    permutations: int = 1,
    concurrency: int = 4,
    *,
    retry: RetryPolicy | None = None,
    tools: dict[str, list[dict[str, Any]]] | None = None,
    on_done: Callable[[Group, Judgement], None] | None = None,
    method: type[JudgeMethod] | None = None,
) -> list[Judgement]:
    """Judge ``groups`` concurrently (at most ``concurrency`` LiteLLM calls in flight).

    Sets ``group.judgement`` on each group and returns the judgements in input order. With a
    ``store``: the spec is saved, presentations are cached there, each judgement (ok or
    unjudged) and the judge's hack signals are written as soon as the group is done (the group
    itself is written too if the store does not have it yet). ``tools`` maps group id to the
    OpenAI tool schemas shown to the judge. Never raises for a judge failure: failed groups
    come back with ``status="unjudged"`` and their error. ``method`` is the judging method
    (a :class:`~.method.JudgeMethod` class; default :class:`GroupJudge`).
    """
    if store is not None:
        store.put_judge_spec(spec)
    cls = method or GroupJudge
    judge = cls(spec, store, concurrency=concurrency, retry=retry, tools=tools)
    return await judge_all(judge, groups, permutations, on_done)


def judge_groups_sync(
    groups: list[Group], spec: JudgeSpec, store: Store | None = None, **kw: Any
) -> list[Judgement]:
    """:func:`judge_groups` for callers without an event loop."""
    return asyncio.run(judge_groups(groups, spec, store, **kw))
