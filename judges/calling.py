"""Calling the judge model: one LiteLLM request, its usage and cost, and error classes.

:func:`call_judge` sends one chat request with the spec's temperature, seed and max_tokens,
``response_format={"type": "json_object"}`` and ``drop_params=True`` (providers that lack a
parameter still answer), and returns a :class:`Reply`. :func:`is_retryable` says which errors
deserve another try: malformed output, timeouts, rate limits and provider errors do; auth,
not-found and bad-request errors do not.

What it does not do: retry (``GroupJudge`` owns the retry loop, because a retry after a
malformed reply shows the judge its reply), or parse the reply (``parse.py``).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any

from rankgym import router
from rankgym.errors import RankgymError
from rankgym.router import RetryBudgetExhausted
from rankgym.types import JudgeSpec

from .parse import JudgeOutputError, clean_text
from .record import Presentation
from .spec import RANKGYM_EXTRA

__all__ = [
    "JudgeFailed",
    "Reply",
    "RetryPolicy",
    "call_judge",
    "describe",
    "is_context_error",
    "is_retryable",
    "litellm_kwargs",
]


class JudgeFailed(RankgymError, RuntimeError):
    """A presentation could not be judged (retries exhausted, a non-retryable error, or it
    cannot fit the context). ``presentation`` holds what was spent and the errors met."""

    def __init__(
        self, message: str, presentation: Presentation | None = None, *, context: bool = False
    ) -> None:
        super().__init__(message)
        self.presentation = presentation
        self.context = context
        """True when the provider said the request exceeds its context window."""


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


@dataclass
class Reply:
    """The judge's text and what the call cost (``cost_usd`` None when LiteLLM has no price)."""

    text: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    wall_s: float = 0.0
    """Seconds from sending the request to its answer."""
    service_s: float | None = None
    """Of ``wall_s``, the seconds the model worked, when the provider says (the embedded judge
    does; the rest was a wait for the one model); None: the provider does not say."""


def litellm_kwargs(
    spec: JudgeSpec, messages: list[dict[str, str]], timeout_s: float
) -> dict[str, Any]:
    """The ``litellm.acompletion`` arguments for ``messages`` under ``spec``."""
    kw: dict[str, Any] = {
        "model": spec.model,
        "messages": messages,
        "temperature": spec.temperature,
        "max_tokens": spec.max_tokens,
        "timeout": timeout_s,
        "num_retries": 0,
        "drop_params": True,
        "response_format": {"type": "json_object"},
    }
    if spec.seed is not None:
        kw["seed"] = spec.seed
    kw.update({k: v for k, v in spec.extra.items() if k not in RANKGYM_EXTRA})
    if kw.get("response_format") is None:
        kw.pop("response_format")
    return kw


def _cost(resp: Any) -> float | None:
    import litellm

    try:
        return float(litellm.completion_cost(completion_response=resp))
    except Exception:  # no price known for this model: fall back to what the provider said
        return (getattr(resp, "_hidden_params", {}) or {}).get("response_cost")


async def call_judge(spec: JudgeSpec, messages: list[dict[str, str]], retry: RetryPolicy) -> Reply:
    """One ``litellm.acompletion`` call (no retry); raises what LiteLLM raises."""
    t0 = time.perf_counter()
    resp = await router.acompletion(  # through the LiteLLM Router when one serves spec.model
        retry.timeout_s + 5, **litellm_kwargs(spec, messages, retry.timeout_s)
    )
    wall = time.perf_counter() - t0
    service = (getattr(resp, "_hidden_params", None) or {}).get("rankgym_service_s")
    text = resp.choices[0].message.content or "" if resp.choices else ""
    usage = getattr(resp, "usage", None)
    return Reply(
        text=clean_text(text),
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost_usd=_cost(resp),
        wall_s=wall,
        service_s=min(wall, float(service)) if isinstance(service, int | float) else None,
    )


def is_retryable(e: BaseException) -> bool:
    """Whether another attempt may succeed (bad output, timeouts, rate limits, 5xx)."""
    import openai

    if isinstance(e, RetryBudgetExhausted):  # it already waited as long as allowed
        return False
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


def is_context_error(e: BaseException) -> bool:
    """Whether the provider said the request does not fit its context window."""
    import litellm

    return isinstance(e, litellm.ContextWindowExceededError)


def describe(e: BaseException) -> str:
    """``"ErrorType: message"`` cut to 300 characters, for records and logs."""
    if isinstance(e, JudgeFailed):
        return str(e)[:300]
    return f"{type(e).__name__}: {str(e)[:300]}"
