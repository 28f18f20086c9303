"""The judge specification: building a :class:`JudgeSpec`, its credentials, its context budget.

A spec (model string, rubric, parameters) is identified by its content hash; every score in
the store names the spec that produced it. :func:`default_spec` is the one place a spec is
built from options (the CLI and the trainer both call it).

What it does not do: call the provider. :func:`missing_credentials` asks LiteLLM which
environment variables a provider needs; a wrong key is only caught by the first call.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rankgym.credentials import url_has_credentials
from rankgym.errors import UserError
from rankgym.judge_backend import LOCAL_PREFIX, parse_model
from rankgym.types import JudgeSpec

from .prompt import PROMPT_FORMAT, default_rubric

__all__ = [
    "LOCAL_PREFIX",
    "RANKGYM_EXTRA",
    "check_credentials",
    "context_budget",
    "default_spec",
    "ensure_provider",
    "missing_credentials",
    "quiet_litellm",
]

RANKGYM_EXTRA = {"prompt_format"}
"""Keys of ``JudgeSpec.extra`` that rankgym reads itself; all others go to LiteLLM."""


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
    backend = parse_model(model)
    if backend.is_local:  # the embedded model's context and answer budget
        fields.update(context_window=backend.context_window, max_tokens=backend.max_tokens)
    fields.update(params)
    return JudgeSpec(**fields)


def spec_from_options(
    model: str,
    *,
    rubric_file: str | None = None,
    seed: int = 0,
    max_tokens: int | None = None,
    context_window: int | None = None,
    api_base: str | None = None,
    names: Mapping[str, str] | None = None,
) -> JudgeSpec:
    """The judge spec a user's options describe (CLI flags or a train config's ``[judge]``).

    Reads the rubric file and checks every option, raising ``UserError`` that names the option
    as the user typed it (``names`` maps ``judge``, ``rubric``, ``max_tokens``,
    ``context_window`` to e.g. ``--judge`` or ``judge.model``). Does not check credentials.
    """
    name = {**_CLI_NAMES, **(names or {})}
    rubric = None
    if rubric_file:
        path = Path(rubric_file)
        if not path.is_file():
            raise UserError(
                f"{name['rubric']}: file {rubric_file!r} does not exist; pass a text/markdown file"
            )
        try:
            rubric = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise UserError(
                f"{name['rubric']}: file {rubric_file!r} is not UTF-8 text (byte {e.start}); "
                "save it as UTF-8"
            ) from None
        if not rubric.strip():
            raise UserError(f"{name['rubric']}: file {rubric_file!r} is empty")
    if "/" not in model:
        raise UserError(
            f"{name['judge']} {model!r} is not a LiteLLM model string; use provider/model, e.g. "
            "local/smollm2, openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5, ollama/qwen3:8b"
        )
    params: dict[str, Any] = {"seed": seed}
    if max_tokens is not None:
        if max_tokens < 1:
            raise UserError(f"{name['max_tokens']} must be at least 1 (got {max_tokens})")
        params["max_tokens"] = max_tokens
    if context_window is not None:
        answer = max_tokens or parse_model(model).max_tokens
        if context_window <= answer:
            raise UserError(
                f"{name['context_window']} {context_window} leaves no room for the request: it "
                f"must be larger than the answer budget ({name['max_tokens']} {answer}); pass the "
                "judge's whole context in tokens, e.g. 8192"
            )
        params["context_window"] = context_window
    if api_base:
        if url_has_credentials(api_base):
            raise UserError(
                f"{name.get('api_base', '--api-base')}: credentials in the URL are refused (the "
                "spec is stored with every judgement); drop user:password@ and pass the key in "
                "the provider's environment variable"
            )
        params["extra"] = {"api_base": api_base}
    return default_spec(model, rubric, **params)


_CLI_NAMES = {
    "judge": "--judge",
    "rubric": "--rubric",
    "max_tokens": "--max-tokens",
    "context_window": "--context-window",
}


def missing_credentials(spec: JudgeSpec) -> list[str]:
    """Environment variables the judge's provider needs and that are not set (``[]`` if none).

    Asks LiteLLM's ``validate_environment``; a ``*_API_BASE`` variable counts as set when the
    spec carries ``api_base``. Does not call the provider, so a wrong key is not caught here.
    """
    import litellm

    if not parse_model(spec.model).needs_credentials:
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


def quiet_litellm() -> None:
    """Stop LiteLLM printing "Provider List" banners to stdout (for a model it has no price
    for, once per call), which would break ``--json`` output."""
    import litellm

    litellm.suppress_debug_info = True


def ensure_provider(model: str) -> None:
    """Register the embedded ``local/`` provider with LiteLLM when ``model`` needs it.

    Registering loads nothing: the local model is loaded on its first call.
    """
    if parse_model(model).is_local:
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
        except Exception:  # LiteLLM does not know the model: no budget, the provider decides
            window = None
    if not window:
        return None
    if spec.context_window is not None:  # a total window: keep room for the answer
        return max(1, int(window) - spec.max_tokens)
    return int(window)
