"""Judge and ``litellm:`` policy calls through a LiteLLM Router, with a retry budget in time.

A ``[router]`` table in a TOML config (the training config, or a file of its own for
``rankgym judge --router FILE``) describes deployments, fallbacks and limits::

    [router]
    retry_budget_min = 10          # keep retrying rate limits / outages this long, then give up
    routing_strategy = "usage-based-routing-v2"   # enforces rpm/tpm below
    fallbacks = { judge = ["judge-backup"] }

    [[router.deployments]]
    model_name = "judge"           # what judge.model / litellm:NAME refer to
    model = "openai/gpt-4o-mini"   # the LiteLLM model string of this deployment
    rpm = 500
    tpm = 200000
    api_key_env = "OPENAI_API_KEY" # the key is read from the environment, never from the file

    [[router.deployments]]
    model_name = "judge-backup"
    model = "hosted_vllm/Qwen2.5-7B-Instruct"
    api_base = "http://gpu-box:8000/v1"

:func:`install` builds one process-wide ``litellm.Router``; :func:`acompletion` sends a call
through it when the model is one of its ``model_name`` s (else straight to
``litellm.acompletion``). Transient failures (429, 5xx, timeouts, connection errors, "no
deployment available" while every deployment is cooling down or over its rpm/tpm) are retried:
the wait is the provider's ``Retry-After`` (seconds or an HTTP date; ``retry-after-ms`` too)
when it sends one, else exponential backoff up to ``max_backoff_s``. When the next wait would
pass ``retry_budget_min`` since the first attempt, :class:`RetryBudgetExhausted` is raised; the
group judge then stores the group *unjudged* with that error (never silently dropped).

What it does not do: it does not retry bad requests, auth or not-found errors (no wait fixes
them); the budget is per call, not shared between concurrent calls; rpm/tpm are enforced by
LiteLLM's router (per process, not across machines).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import os
import random
import re
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rankgym.config import load_config
from rankgym.errors import RankgymError

log = logging.getLogger(__name__)

__all__ = [
    "Deployment",
    "RetryBudgetExhausted",
    "RouterConfig",
    "acompletion",
    "active",
    "completion",
    "install",
    "install_file",
    "retry_after_s",
    "uninstall",
]


class Deployment(BaseModel):
    """One deployment of a router model group."""

    model_config = ConfigDict(extra="forbid")
    model_name: str
    """The group name callers use (``judge.model``, ``litellm:NAME``)."""
    model: str
    """LiteLLM model string of this deployment (``openai/gpt-4o-mini``, ``hosted_vllm/...``)."""
    api_base: str | None = None
    api_key_env: str | None = None
    """Environment variable holding this deployment's API key (keys never go in the file)."""
    rpm: int | None = Field(None, ge=1, le=10_000_000)
    tpm: int | None = Field(None, ge=1, le=10_000_000_000)
    timeout_s: float | None = Field(None, gt=0, le=86_400)
    params: dict[str, Any] = Field(default_factory=dict)
    """More ``litellm_params`` for this deployment (e.g. ``api_version``)."""

    def litellm_entry(self) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, **self.params}
        for key in ("api_base", "rpm", "tpm"):
            if getattr(self, key) is not None:
                params[key] = getattr(self, key)
        if self.timeout_s is not None:
            params["timeout"] = self.timeout_s
        if self.api_key_env:
            secret = os.environ.get(self.api_key_env)
            if not secret:
                raise RankgymError(
                    f"router deployment {self.model_name!r} ({self.model}): environment "
                    f"variable {self.api_key_env} is not set; export it"
                )
            params["api_key"] = key
        return {"model_name": self.model_name, "litellm_params": params}


class RouterConfig(BaseModel):
    """The ``[router]`` table (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    deployments: list[Deployment] = Field(min_length=1)
    fallbacks: dict[str, list[str]] = Field(default_factory=dict)
    """Model group -> groups to try, in order, when it fails after its own retries."""
    retry_budget_min: float = Field(10.0, gt=0, le=10_080)
    """Minutes a call may keep waiting on rate limits and outages before it gives up."""
    max_backoff_s: float = Field(60.0, gt=0, le=3600)
    """Longest wait between attempts when the provider sends no Retry-After."""
    routing_strategy: Literal[
        "simple-shuffle", "least-busy", "usage-based-routing-v2", "latency-based-routing"
    ] = "simple-shuffle"
    cooldown_s: float | None = Field(None, ge=0, le=86_400)
    """How long a failing deployment is skipped (LiteLLM's default when unset)."""

    @model_validator(mode="after")
    def _known_groups(self) -> RouterConfig:
        names = {d.model_name for d in self.deployments}
        for src, dsts in self.fallbacks.items():
            unknown = [n for n in [src, *dsts] if n not in names]
            if unknown:
                raise ValueError(
                    f"fallbacks name {unknown} but the deployments define only {sorted(names)}"
                )
        return self

    @property
    def budget_s(self) -> float:
        return self.retry_budget_min * 60.0

    def model_names(self) -> set[str]:
        return {d.model_name for d in self.deployments}


class RetryBudgetExhausted(RankgymError, RuntimeError):
    """Transient failures lasted longer than the router's retry budget."""


_state: dict[str, Any] = {"router": None, "config": None}


def install(config: RouterConfig | dict[str, Any]) -> Any:
    """Build the process-wide ``litellm.Router`` from ``config`` and return it."""
    import litellm

    cfg = config if isinstance(config, RouterConfig) else RouterConfig.model_validate(config)
    kwargs: dict[str, Any] = {
        "model_list": [d.litellm_entry() for d in cfg.deployments],
        "fallbacks": [{k: v} for k, v in cfg.fallbacks.items()],
        "routing_strategy": cfg.routing_strategy,
        "num_retries": 0,  # the budget loop below owns retries, so waits honour Retry-After
    }
    if cfg.cooldown_s is not None:
        kwargs["cooldown_time"] = cfg.cooldown_s
    _state.update(router=litellm.Router(**kwargs), config=cfg)
    return _state["router"]


class _RouterFile(BaseModel):
    model_config = ConfigDict(extra="ignore")  # a training config's other tables are fine
    router: RouterConfig


def install_file(path: str) -> Any:
    """:func:`install` the ``[router]`` table of a TOML file (its own, or a training config).

    Raises ``rankgym.config.ConfigError`` (one line, naming the file and key) when the file
    is missing or the table is wrong.
    """
    return install(load_config(path, _RouterFile).router)


def uninstall() -> None:
    """Forget the process-wide router (calls go straight to LiteLLM again)."""
    _state.update(router=None, config=None)


def active(model: str) -> bool:
    """Whether calls for ``model`` go through the installed router."""
    cfg = _state["config"]
    return cfg is not None and model in cfg.model_names()


def retry_after_s(e: BaseException) -> float | None:
    """Seconds the provider asked to wait (``Retry-After``/``retry-after-ms``), else None."""
    headers = getattr(e, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(e, "response", None), "headers", None)
    if headers is not None:
        for key, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
            wait = _seconds(headers.get(key), scale)
            if wait is not None:
                return wait
    m = re.search(r"(?:retry|try again) (?:after|in) (\d+(?:\.\d+)?) ?s", str(e), re.IGNORECASE)
    return float(m.group(1)) if m else None


def _seconds(value: str | None, scale: float) -> float | None:
    """A header value as seconds (a number / ``scale``, or an HTTP date); None if unreadable."""
    if not value:
        return None
    try:
        wait = float(value) / scale
    except ValueError:
        try:
            wait = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, OverflowError):
            return None
    return max(0.0, wait) if math.isfinite(wait) else None


def _transient(e: BaseException) -> bool:
    import openai

    if isinstance(e, asyncio.TimeoutError | TimeoutError):
        return True
    if isinstance(e, openai.RateLimitError | openai.APITimeoutError | openai.APIConnectionError):
        return True
    status = getattr(e, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


async def acompletion(timeout_s: float | None = None, **kwargs: Any) -> Any:
    """``litellm.acompletion(**kwargs)``, through the router when it serves ``kwargs['model']``.

    Through the router, transient errors are retried within the budget (module docstring);
    ``timeout_s`` bounds each attempt. Raises :class:`RetryBudgetExhausted` when the budget
    runs out, and any non-transient error at once.
    """
    import litellm

    if not active(kwargs.get("model", "")):
        call = litellm.acompletion(**kwargs)
        return await (asyncio.wait_for(call, timeout_s) if timeout_s else call)
    router = _state["router"]
    kwargs = {k: v for k, v in kwargs.items() if k != "num_retries"}
    t0, attempt = time.monotonic(), 0
    while True:
        try:
            call = router.acompletion(**kwargs)
            return await (asyncio.wait_for(call, timeout_s) if timeout_s else call)
        except Exception as e:
            wait = _wait_or_raise(e, attempt, t0, kwargs.get("model"))
        attempt += 1
        await asyncio.sleep(wait)


def _wait_or_raise(e: Exception, attempt: int, t0: float, model: Any) -> float:
    """How long to wait before the next attempt; raises when no wait can help."""
    cfg: RouterConfig = _state["config"]
    if not _transient(e):
        raise e
    wait = _next_wait(e, attempt, cfg)
    spent = time.monotonic() - t0
    if spent + wait > cfg.budget_s:
        raise RetryBudgetExhausted(
            f"{model}: still failing after {spent:.0f} s and {attempt + 1} attempts (retry "
            f"budget {cfg.retry_budget_min:g} min); last: {type(e).__name__}: {str(e)[:200]}"
        ) from e
    log.info("router %s: %s; retrying in %.1f s", model, type(e).__name__, wait)
    return wait


def _next_wait(e: BaseException, attempt: int, cfg: RouterConfig) -> float:
    asked = retry_after_s(e)
    if asked is not None:
        return asked + 0.05  # a hair past the provider's instant
    return min(cfg.max_backoff_s, 2.0**attempt) * (0.75 + 0.5 * random.random())


def completion(timeout_s: float | None = None, **kwargs: Any) -> Any:
    """Synchronous :func:`acompletion` (for the ``litellm:`` policy's worker threads)."""
    import litellm

    if not active(kwargs.get("model", "")):
        return litellm.completion(**kwargs)
    router = _state["router"]
    kwargs = {k: v for k, v in kwargs.items() if k != "num_retries"}
    if timeout_s:
        kwargs.setdefault("timeout", timeout_s)
    t0, attempt = time.monotonic(), 0
    while True:
        try:
            return router.completion(**kwargs)
        except Exception as e:
            wait = _wait_or_raise(e, attempt, t0, kwargs.get("model"))
        attempt += 1
        time.sleep(wait)
