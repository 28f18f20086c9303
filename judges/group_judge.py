"""The group judge: one LiteLLM call per presentation of a group, validated, cached, stored.

For each group, :func:`judge_groups`:

1. builds the comparison request (``prompt.build_prompt``) for each of ``permutations``
   presentations: presentation 0 keeps the group's order, the others are deterministic
   shuffles seeded by ``spec.seed`` and the group's content hash;
2. looks each presentation up in the store's judge cache, keyed by
   ``(spec hash, hash(group content hash, presentation order, prompt format))``; a hit makes
   no call;
3. otherwise calls ``litellm.acompletion`` once (temperature, seed and max_tokens from the
   spec; ``response_format={"type": "json_object"}``; ``drop_params=True`` so providers that
   lack a parameter still answer) and validates the reply with pydantic: every label exactly
   once, no unknown or duplicate ids, finite scores, clamped to [0, 1];
4. retries with bounded exponential backoff on malformed output, wrong ids, timeouts, rate
   limits and provider errors. After a malformed reply the retry shows the judge its reply and
   the validation error (a deterministic judge would otherwise repeat itself). Auth, not-found
   and bad-request errors are not retried;
5. averages each trajectory's score over presentations (rationale from the first,
   ``hack_suspected`` when flagged in at least half), keeps every presentation in
   ``Judgement.presentations``, and stores the judgement. A group whose presentations cannot
   all be judged is stored with ``status="unjudged"`` and the error, never dropped;
6. records hack signals ``judge_hack_suspected`` and ``judge_top_verifier_failed`` (see
   :func:`judge_hack_signals`).

Groups that do not fit the judge's context (``spec.context_window``, else LiteLLM's model
info, else a context-window error from the provider) are judged as overlapping subsets and
merged by least squares with one offset per subset, so the result is one consistent scale.

What it does not do: it does not make a weak judge strong, it does not check that a rubric is
sensible, and subsets merged this way are only as comparable as their overlaps make them.
Token counts are the provider's (``usage``); money is ``litellm.completion_cost`` where LiteLLM
knows the price, else ``None``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from rankgym.types import Group, Judgement, JudgeSpec, TrajectoryScore, content_hash

from .prompt import (
    PROMPT_FORMAT,
    JudgePrompt,
    build_prompt,
    count_tokens,
    default_rubric,
)

log = logging.getLogger(__name__)

LOCAL_PREFIX = "local/"
VERIFIER_PASS = 1.0
"""A trajectory 'passes' its env's verifier when ``verifiable_reward >= VERIFIER_PASS``."""
_RANKGYM_EXTRA = {"prompt_format"}
"""Keys of ``JudgeSpec.extra`` that rankgym reads itself; all others go to LiteLLM."""


class JudgeOutputError(ValueError):
    """The judge answered, but not with one valid score per trajectory id."""


class JudgeFailed(RuntimeError):
    """A presentation could not be judged (retries exhausted, or it cannot fit the context)."""


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore")
    trajectory_id: str
    score: float
    rationale: str = ""
    hack_suspected: bool = False

    @field_validator("trajectory_id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> str:
        return str(v).strip()

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("score must be a finite number")
        return v

    @field_validator("rationale", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else str(v)


class JudgeOutput(BaseModel):
    """The JSON object the judge must return."""

    model_config = ConfigDict(extra="ignore")
    scores: list[_Item]


@dataclass
class RetryPolicy:
    """Bounded exponential backoff: ``min(max_delay_s, base_delay_s * 2**attempt)`` + jitter."""

    max_attempts: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    timeout_s: float = 300.0

    def delay(self, attempt: int) -> float:
        d = min(self.max_delay_s, self.base_delay_s * (2**attempt))
        return d * (0.75 + 0.25 * random.random())


def default_spec(
    model: str = "local/smollm2", rubric: str | None = None, **params: Any
) -> JudgeSpec:
    """A :class:`JudgeSpec` for ``model`` with the default rubric (or ``rubric`` text).

    ``params`` override JudgeSpec fields (``temperature``, ``seed``, ``max_tokens``,
    ``context_window``, ``extra``). For ``local/...`` the context window is the embedded
    model's 8192 tokens. Permutations are not part of the spec: they are a run setting, and
    each presentation is stored (and cached) separately.
    """
    extra = {"prompt_format": PROMPT_FORMAT, **params.pop("extra", {})}
    if "api_key" in extra:
        raise ValueError(
            "do not put api_key in a judge spec (it is stored in the database); set the "
            "provider's environment variable (e.g. OPENAI_API_KEY) instead"
        )
    fields: dict[str, Any] = {"model": model, "rubric": rubric or default_rubric(), "extra": extra}
    if model.startswith(LOCAL_PREFIX):
        fields.update(context_window=8192, max_tokens=512)
    fields.update(params)
    return JudgeSpec(**fields)


def missing_credentials(spec: JudgeSpec) -> list[str]:
    """Environment variables the judge's provider needs and that are not set (``[]`` if none).

    Asks LiteLLM's ``validate_environment``; a ``*_API_BASE`` variable counts as set when the
    spec carries ``api_base``. Does not call the provider, so a wrong key is not caught here.
    """
    import litellm

    if spec.model.startswith(LOCAL_PREFIX):
        return []
    try:
        found = litellm.validate_environment(spec.model)
    except Exception:  # an unknown provider: the first call reports it
        return []
    missing = list(found.get("missing_keys") or [])
    if spec.extra.get("api_base"):
        missing = [k for k in missing if not k.endswith("_API_BASE")]
    return missing


def check_credentials(spec: JudgeSpec) -> None:
    """Raise ``ValueError`` naming the missing environment variables for ``spec.model``."""
    missing = missing_credentials(spec)
    if missing:
        raise ValueError(
            f"judge {spec.model!r} needs {', '.join(missing)} in the environment (not set); "
            "export it, or use the embedded judge 'local/smollm2' for a run without a provider"
        )


# --------------------------------------------------------------------------- parsing


def _json_candidates(text: str) -> list[Any]:
    """JSON values found in ``text``: the whole text, fenced blocks, then each ``{``/``[``."""
    text = text.strip()
    out: list[Any] = []
    try:
        out.append(json.loads(text))
        return out
    except json.JSONDecodeError:
        pass
    dec = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = dec.raw_decode(text, i)
            except json.JSONDecodeError:
                continue
            out.append(value)
            if isinstance(value, dict) and "scores" in value:
                break
    return out


def parse_judge_output(text: str, labels: list[str]) -> dict[str, _Item]:
    """Validate a judge reply against the expected labels; return label -> item (clamped).

    Accepts the object alone, inside a code fence or surrounded by prose, and a bare list of
    entries. Raises :class:`JudgeOutputError` on anything else: no JSON, wrong shape, a score
    that is not a finite number, a missing, duplicate or unknown id.
    """
    if not text or not text.strip():
        raise JudgeOutputError("empty reply")
    parsed: JudgeOutput | None = None
    last_err = "no JSON object found in the reply"
    for cand in _json_candidates(text):
        if isinstance(cand, list):
            cand = {"scores": cand}
        if not isinstance(cand, dict) or "scores" not in cand:
            continue
        try:
            parsed = JudgeOutput.model_validate(cand)
            break
        except ValidationError as e:
            last_err = "invalid scores: " + "; ".join(
                f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:5]
            )
    if parsed is None:
        raise JudgeOutputError(last_err)
    canon = {lab.lower(): lab for lab in labels}
    items: dict[str, _Item] = {}
    dup, unknown = [], []
    for it in parsed.scores:
        lab = canon.get(it.trajectory_id.lower())
        if lab is None:
            unknown.append(it.trajectory_id)
        elif lab in items:
            dup.append(lab)
        else:
            items[lab] = it
    missing = [lab for lab in labels if lab not in items]
    problems = []
    if missing:
        problems.append(f"missing ids {missing}")
    if dup:
        problems.append(f"duplicate ids {dup}")
    if unknown:
        problems.append(f"unknown ids {unknown}")
    if problems:
        raise JudgeOutputError(
            f"expected exactly one entry for each of {labels}, got {len(parsed.scores)} "
            "entries: " + ", ".join(problems)
        )
    for it in items.values():
        it.score = min(1.0, max(0.0, it.score))
    return items


# --------------------------------------------------------------------------- helpers


def presentation_orders(
    ids: list[str], k: int, seed: int | None, group_hash: str
) -> list[list[str]]:
    """``k`` presentation orders: the given order, then distinct deterministic shuffles."""
    orders = [list(ids)]
    rng = random.Random(f"{seed}:{group_hash}")
    for _ in range(1, max(1, k)):
        o = list(ids)
        for _try in range(20):
            rng.shuffle(o)
            if o not in orders:
                break
        orders.append(list(o))
    return orders


def presentation_cache_key(group: Group, order: list[str], tools: Any) -> str:
    """The ``group_hash`` half of a judge-cache key: group content, order, prompt format."""
    return content_hash(
        {"group": group.content_hash(), "order": order, "format": PROMPT_FORMAT, "tools": tools}
    )


def _retryable(e: BaseException) -> bool:
    import openai

    if isinstance(e, JudgeOutputError | asyncio.TimeoutError | TimeoutError):
        return True
    return not isinstance(
        e,
        openai.BadRequestError
        | openai.AuthenticationError
        | openai.PermissionDeniedError
        | openai.NotFoundError
        | openai.UnprocessableEntityError,
    )


def _is_context_error(e: BaseException) -> bool:
    import litellm

    return isinstance(e, litellm.ContextWindowExceededError)


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:300]}"


def ensure_provider(model: str) -> None:
    """Register the embedded ``local/`` provider with LiteLLM when ``model`` needs it."""
    if model.startswith(LOCAL_PREFIX):
        from .local_provider import register

        register()


def context_budget(spec: JudgeSpec) -> int | None:
    """Input tokens a request may use: context window minus ``max_tokens`` (None = unknown)."""
    window = spec.context_window
    if window is None:
        try:
            import litellm

            info = litellm.get_model_info(spec.model)
            window = info.get("max_input_tokens") or info.get("max_tokens")
        except Exception:
            window = None
    if not window:
        return None
    if spec.context_window is not None:  # a total window: keep room for the answer
        return max(1, int(window) - spec.max_tokens)
    return int(window)


def merge_subset_scores(n_items: list[str], subsets: list[dict[str, float]]) -> dict[str, float]:
    """Merge scores from overlapping subsets into one scale.

    Model: ``score_in_subset_m(i) = g_i + b_m`` with ``b_0 = 0``; least squares for ``g`` and
    the offsets. Every item must be in at least one subset; subsets should be connected by
    overlaps (otherwise their offsets are arbitrary). Result clamped to [0, 1].
    """
    idx = {t: k for k, t in enumerate(n_items)}
    n, m = len(n_items), len(subsets)
    rows, rhs = [], []
    for s_i, sub in enumerate(subsets):
        for t, v in sub.items():
            row = np.zeros(n + m - 1)
            row[idx[t]] = 1.0
            if s_i > 0:
                row[n + s_i - 1] = 1.0
            rows.append(row)
            rhs.append(v)
    sol, *_ = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)
    return {t: float(min(1.0, max(0.0, sol[idx[t]]))) for t in n_items}


def overlapping_windows(order: list[str], size: int) -> list[list[str]]:
    """Windows of ``size`` over ``order``, consecutive windows sharing ``max(1, size//3)``."""
    n = len(order)
    if size >= n:
        return [list(order)]
    overlap = max(1, size // 3)
    step = max(1, size - overlap)
    out, start = [], 0
    while True:
        end = min(n, start + size)
        out.append(order[max(0, end - size) : end])
        if end >= n:
            return out
        start += step


def judge_hack_signals(group: Group, judgement: Judgement) -> list[tuple[str, str, str]]:
    """Hack signals from an ok judgement: ``(trajectory_id, name, detail)``.

    - ``judge_hack_suspected``: the judge set ``hack_suspected`` (in at least half of the
      presentations).
    - ``judge_top_verifier_failed``: the trajectory is among the judge's top scores (ties
      included; not when every score is equal), its ``verifiable_reward`` is known and below
      :data:`VERIFIER_PASS` (1.0), and another trajectory in the group has a strictly higher
      verifiable reward -- the judge preferred a failure over something better.
    """
    if judgement.status != "ok" or not judgement.scores:
        return []
    out: list[tuple[str, str, str]] = []
    for s in judgement.scores:
        if s.hack_suspected:
            out.append((s.trajectory_id, "judge_hack_suspected", s.rationale[:300]))
    scores = judgement.score_map()
    top = max(scores.values())
    if min(scores.values()) < top - 1e-9:
        vr = {t.id: t.verifiable_reward for t in group.trajectories}
        known = [v for v in vr.values() if v is not None]
        for tid, sc in scores.items():
            v = vr.get(tid)
            if sc >= top - 1e-9 and v is not None and v < VERIFIER_PASS and max(known) > v:
                out.append(
                    (
                        tid,
                        "judge_top_verifier_failed",
                        f"judge score {sc:.2f} (top) but verifiable reward {v:.2f} "
                        f"< best in group {max(known):.2f}",
                    )
                )
    return out


# --------------------------------------------------------------------------- the judge


class GroupJudge:
    """Judges groups under one spec; holds the call semaphore and the store."""

    def __init__(
        self,
        spec: JudgeSpec,
        store: Any | None = None,
        *,
        concurrency: int = 4,
        retry: RetryPolicy | None = None,
        tools: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        if "api_key" in spec.extra:
            raise ValueError("api_key must not be stored in a judge spec; use the env variable")
        self.spec = spec
        self.spec_hash = spec.spec_hash
        self.store = store
        self.retry = retry or RetryPolicy()
        self.sem = asyncio.Semaphore(max(1, concurrency))
        self.tools = tools or {}
        self.budget = context_budget(spec)
        ensure_provider(spec.model)

    # ---- one request ------------------------------------------------------------
    def _litellm_kwargs(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": self.spec.model,
            "messages": messages,
            "temperature": self.spec.temperature,
            "max_tokens": self.spec.max_tokens,
            "timeout": self.retry.timeout_s,
            "num_retries": 0,
            "drop_params": True,
            "response_format": {"type": "json_object"},
        }
        if self.spec.seed is not None:
            kw["seed"] = self.spec.seed
        kw.update({k: v for k, v in self.spec.extra.items() if k not in _RANKGYM_EXTRA})
        if kw.get("response_format") is None:
            kw.pop("response_format")
        return kw

    async def _call(self, messages: list[dict[str, str]]) -> tuple[str, int, int, float | None]:
        import litellm

        async with self.sem:
            resp = await asyncio.wait_for(
                litellm.acompletion(**self._litellm_kwargs(messages)),
                timeout=self.retry.timeout_s + 5,
            )
        text = resp.choices[0].message.content or "" if resp.choices else ""
        usage = getattr(resp, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0)
        tout = int(getattr(usage, "completion_tokens", 0) or 0)
        cost: float | None
        try:
            cost = float(litellm.completion_cost(completion_response=resp))
        except Exception:
            cost = (getattr(resp, "_hidden_params", {}) or {}).get("response_cost")
        return text, tin, tout, cost

    async def _judge_prompt(self, prompt: JudgePrompt) -> dict[str, Any]:
        """Call until one valid answer; return a presentation record (raises after retries)."""
        labels = list(prompt.labels)
        rec: dict[str, Any] = {
            "order": prompt.order,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": None,
            "calls": 0,
            "errors": [],
        }
        t0 = time.perf_counter()
        messages = prompt.messages
        for attempt in range(self.retry.max_attempts):
            if attempt:
                await asyncio.sleep(self.retry.delay(attempt - 1))
            rec["calls"] += 1
            try:
                text, tin, tout, cost = await self._call(messages)
            except Exception as e:  # noqa: BLE001 - classified below
                rec["errors"].append(_describe(e))
                if _is_context_error(e) or not _retryable(e):
                    e.presentation = rec  # type: ignore[attr-defined]
                    raise
                log.info("judge call failed (attempt %d): %s", attempt + 1, _describe(e))
                continue
            rec["input_tokens"] += tin
            rec["output_tokens"] += tout
            if cost is not None:
                rec["cost_usd"] = (rec["cost_usd"] or 0.0) + cost
            try:
                items = parse_judge_output(text, labels)
            except JudgeOutputError as e:
                rec["errors"].append(_describe(e))
                log.info("judge reply rejected (attempt %d): %s", attempt + 1, e)
                messages = [
                    *prompt.messages,
                    {"role": "assistant", "content": text[:4000]},
                    {
                        "role": "user",
                        "content": f"That reply could not be used: {e}. Reply again with only "
                        f"the JSON object, exactly one entry for each id in {json.dumps(labels)}.",
                    },
                ]
                continue
            rec.update(
                scores={prompt.labels[k]: v.score for k, v in items.items()},
                rationales={prompt.labels[k]: v.rationale for k, v in items.items()},
                hack_suspected={prompt.labels[k]: v.hack_suspected for k, v in items.items()},
                raw_response=text,
                latency_s=time.perf_counter() - t0,
            )
            return rec
        err = JudgeFailed(
            f"no valid answer after {self.retry.max_attempts} attempts; last: {rec['errors'][-1]}"
        )
        err.presentation = rec  # type: ignore[attr-defined]
        raise err

    # ---- one presentation (maybe split) --------------------------------------------
    def _fits(self, prompt: JudgePrompt, budget: int | None) -> bool:
        return budget is None or count_tokens(self.spec.model, prompt.messages) <= budget

    async def _presentation(self, group: Group, order: list[str]) -> dict[str, Any]:
        tools = self.tools.get(group.id)
        key = presentation_cache_key(group, order, tools)
        if self.store is not None:
            hit = self.store.cache_get(self.spec_hash, key)
            if hit is not None:
                return {**hit, "cached": True}
        prompt = build_prompt(group, self.spec.rubric, order, tools)
        budget = self.budget
        if self._fits(prompt, budget):
            try:
                rec = await self._judge_prompt(prompt)
            except Exception as e:
                if not _is_context_error(e):
                    raise
                budget = int(count_tokens(self.spec.model, prompt.messages) * 0.6)
                rec = await self._split(group, order, tools, budget)
        else:
            rec = await self._split(group, order, tools, budget)
        rec["cached"] = False
        if self.store is not None:
            self.store.cache_put(self.spec_hash, key, rec)
        return rec

    async def _split(
        self, group: Group, order: list[str], tools: Any, budget: int | None
    ) -> dict[str, Any]:
        """Judge overlapping subsets that fit ``budget`` and merge them onto one scale."""
        for size in range(len(order) - 1, 1, -1):
            windows = overlapping_windows(order, size)
            prompts = [build_prompt(group, self.spec.rubric, w, tools) for w in windows]
            if all(self._fits(p, budget) for p in prompts):
                break
        else:
            raise JudgeFailed(
                f"even two trajectories of group {group.id} do not fit the judge's context "
                f"({budget} input tokens); use a judge with a larger context_window"
            )
        parts = await asyncio.gather(*(self._judge_prompt(p) for p in prompts))
        merged = merge_subset_scores(order, [p["scores"] for p in parts])
        rationales: dict[str, str] = {}
        hacks: dict[str, bool] = {}
        for p in parts:
            for t, r in p["rationales"].items():
                rationales.setdefault(t, r)
            for t, h in p["hack_suspected"].items():
                hacks[t] = hacks.get(t, False) or h
        return {
            "order": order,
            "scores": merged,
            "rationales": rationales,
            "hack_suspected": hacks,
            "raw_response": json.dumps([p["raw_response"] for p in parts]),
            "subsets": [{"order": p["order"], "scores": p["scores"]} for p in parts],
            "input_tokens": sum(p["input_tokens"] for p in parts),
            "output_tokens": sum(p["output_tokens"] for p in parts),
            "cost_usd": (
                None
                if all(p["cost_usd"] is None for p in parts)
                else sum(p["cost_usd"] or 0.0 for p in parts)
            ),
            "calls": sum(p["calls"] for p in parts),
            "errors": [e for p in parts for e in p["errors"]],
            "latency_s": max(p["latency_s"] for p in parts),
        }

    # ---- one group ------------------------------------------------------------------
    async def judge(self, group: Group, permutations: int = 1) -> Judgement:
        """Judge one group (``permutations`` presentations) and return its judgement."""
        t0 = time.perf_counter()
        ids = [t.id for t in group.trajectories]
        orders = presentation_orders(ids, permutations, self.spec.seed, group.content_hash())
        unique = list(dict.fromkeys(tuple(o) for o in orders))  # tiny groups repeat orders
        done = await asyncio.gather(
            *(self._presentation(group, list(o)) for o in unique), return_exceptions=True
        )
        by_order = dict(zip(unique, done, strict=True))
        results = [by_order[tuple(o)] for o in orders]
        presentations: list[dict[str, Any]] = []
        errors: list[str] = []
        seen: set[tuple[str, ...]] = set()
        for i, r in enumerate(results):
            repeat = tuple(orders[i]) in seen  # same order as an earlier one: no new cost
            seen.add(tuple(orders[i]))
            if isinstance(r, BaseException):
                rec = dict(getattr(r, "presentation", {"order": orders[i], "calls": 0}))
                rec.update(error=_describe(r), cached=repeat)
                presentations.append(rec)
                errors.append(f"presentation {i + 1}/{len(orders)}: {_describe(r)}")
            else:
                presentations.append({**r, "cached": True} if repeat else r)
        fresh = [p for p in presentations if not p.get("cached")]
        j = Judgement(
            group_id=group.id,
            spec_hash=self.spec_hash,
            presentations=presentations,
            input_tokens=sum(p.get("input_tokens", 0) for p in fresh),
            output_tokens=sum(p.get("output_tokens", 0) for p in fresh),
            cost_usd=(
                None
                if all(p.get("cost_usd") is None for p in fresh)
                else sum(p.get("cost_usd") or 0.0 for p in fresh)
            ),
            calls=sum(p.get("calls", 0) for p in fresh),
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
                score=min(1.0, max(0.0, sum(p["scores"][tid] for p in presentations) / k)),
                rationale=first["rationales"].get(tid, ""),
                hack_suspected=2 * sum(bool(p["hack_suspected"].get(tid)) for p in presentations)
                >= k,
            )
            for tid in ids
        ]
        j.raw_response = first.get("raw_response")
        return j

    async def judge_and_record(
        self,
        group: Group,
        permutations: int = 1,
        on_done: Callable[[Group, Judgement], None] | None = None,
    ) -> Judgement:
        """:meth:`judge` then :meth:`record`; any unexpected error becomes an unjudged group."""
        try:
            j = await self.judge(group, permutations)
        except Exception as e:  # a bug must not lose the other groups' results
            log.exception("judging group %s failed", group.id)
            j = Judgement(
                group_id=group.id, spec_hash=self.spec_hash, status="unjudged", error=_describe(e)
            )
        self.record(group, j)
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
        rows = self.store.query("SELECT content_hash FROM groups WHERE id = ?", (group.id,))
        if rows and rows[0]["content_hash"] == group.content_hash():
            self.store.put_judgement(j)
        else:
            self.store.put_group(group)
        for tid, name, detail in signals:
            self.store.add_hack_signal(tid, name, detail)


async def judge_groups(
    groups: list[Group],
    spec: JudgeSpec,
    store: Any | None = None,
    permutations: int = 1,
    concurrency: int = 4,
    *,
    retry: RetryPolicy | None = None,
    tools: dict[str, list[dict[str, Any]]] | None = None,
    on_done: Callable[[Group, Judgement], None] | None = None,
) -> list[Judgement]:
    """Judge ``groups`` concurrently (at most ``concurrency`` LiteLLM calls in flight).

    Sets ``group.judgement`` on each group and returns the judgements in input order. With a
    ``store``: the spec is saved, presentations are cached there, each judgement (ok or
    unjudged) and the judge's hack signals are written as soon as the group is done (the group
    itself is written too if the store does not have it yet). ``tools`` maps group id to the
    OpenAI tool schemas shown to the judge. Never raises for a judge failure: failed groups
    come back with ``status="unjudged"`` and their error.
    """
    if store is not None:
        store.put_judge_spec(spec)
    judge = GroupJudge(spec, store, concurrency=concurrency, retry=retry, tools=tools)
    return list(
        await asyncio.gather(*(judge.judge_and_record(g, permutations, on_done) for g in groups))
    )


def judge_groups_sync(
    groups: list[Group], spec: JudgeSpec, store: Any | None = None, **kw: Any
) -> list[Judgement]:
    """:func:`judge_groups` for callers without an event loop."""
    return asyncio.run(judge_groups(groups, spec, store, **kw))


def summarize(judgements: list[Judgement], spec_hash: str) -> dict[str, Any]:
    """Counts for ``rankgym judge --json`` and for trainer step metrics."""
    costs = [j.cost_usd for j in judgements if j.cost_usd is not None]
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
        "spec_hash": spec_hash,
    }
