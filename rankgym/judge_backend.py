"""Where a judge model runs: the embedded model in this process, or a provider via LiteLLM.

:func:`parse_model` reads a LiteLLM model string once and answers what callers ask of it:
``local/NAME[@ADAPTER]`` is a :class:`LocalBackend` (``rankgym.judges.local_provider`` serves
it on this machine: no credentials, no cost, torch threads to set, the embedded model's
context), anything else a :class:`RemoteBackend` (a provider: credentials LiteLLM asks for,
its price list, its context). Core, so the spec's hash, the judges, the trainer and the
dashboard ask the same object instead of testing ``model.startswith("local/")``.

What it does not do: load or call anything, check that a local name or adapter exists
(the local provider does on first call), or know which variables a provider needs (LiteLLM's
``validate_environment``, ``judges.spec.missing_credentials``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rankgym.judge_adapter import adapter_fingerprint

__all__ = [
    "LOCAL_PREFIX",
    "LOCAL_PROVIDER",
    "LocalBackend",
    "RemoteBackend",
    "parse_model",
]

LOCAL_PROVIDER = "local"
"""The LiteLLM provider name of the embedded judge (``judges/local_provider.py``)."""
LOCAL_PREFIX = LOCAL_PROVIDER + "/"


@dataclass(frozen=True)
class LocalBackend:
    """``local/NAME[@ADAPTER]``: the embedded model, served in this process."""

    model: str
    is_local: ClassVar[bool] = True
    needs_credentials: ClassVar[bool] = False
    """No provider, so no API key to export."""
    in_process: ClassVar[bool] = True
    """It computes on this machine: callers choose torch threads before judging."""
    free: ClassVar[bool] = True
    """Its cost is 0 (no price list to consult)."""
    context_window: ClassVar[int | None] = 8192
    """The embedded model's context in tokens (a spec's default ``context_window``)."""
    max_tokens: ClassVar[int] = 512
    """The default answer budget (a spec's default ``max_tokens``)."""

    @property
    def provider(self) -> str:
        return LOCAL_PROVIDER

    @property
    def name(self) -> str:
        """What follows ``local/``, adapter reference included (``smollm2@runs/judge``)."""
        return self.model[len(LOCAL_PREFIX) :]

    @property
    def adapter(self) -> str | None:
        """The adapter reference after ``@`` (None: the name's own default)."""
        _, at, ref = self.name.partition("@")
        return ref if at else None

    @property
    def fingerprint(self) -> str | None:
        """Content hash of the adapter it serves (``rankgym.judge_adapter``: ``"missing:<dir>"``
        for a folder without one, ``"pairwise"`` for ``@pairwise``); None for the yes/no reader,
        which serves none. Changes when the adapter is retrained."""
        return adapter_fingerprint(self.model)

    def spec_hash_fields(self) -> dict[str, str | None]:
        """What ``JudgeSpec.spec_hash`` adds for this model: the adapter's fingerprint, so a
        retrained adapter in the same folder never reuses cached scores (nothing for the yes/no
        reader; an ``@DIR`` whose adapter cannot be found still adds ``None``)."""
        fp = self.fingerprint
        return {"adapter": fp} if fp is not None or self.adapter is not None else {}


@dataclass(frozen=True)
class RemoteBackend:
    """Any other LiteLLM model string: a provider reached over the network (or a local server
    such as ``ollama/`` or ``hosted_vllm/``, which LiteLLM treats the same way)."""

    model: str
    is_local: ClassVar[bool] = False
    needs_credentials: ClassVar[bool] = True
    """The provider may need environment variables (LiteLLM says which)."""
    in_process: ClassVar[bool] = False
    free: ClassVar[bool] = False
    """Its cost comes from LiteLLM's price list (None where it has none)."""
    context_window: ClassVar[int | None] = None
    """Unknown here: LiteLLM's model info, else the provider's error, tells."""
    max_tokens: ClassVar[int] = 2048
    """The default answer budget (``JudgeSpec.max_tokens``'s default)."""
    EXACT_TOKENIZERS: ClassVar[frozenset[str]] = frozenset({"openai", "azure"})
    """Providers whose tokenizer LiteLLM ships (token counts are exact, not estimates)."""

    @property
    def provider(self) -> str:
        """The part before the first ``/`` ("" for a bare model name, which LiteLLM reads as
        an OpenAI model)."""
        head, slash, _ = self.model.partition("/")
        return head if slash else ""

    @property
    def fingerprint(self) -> str | None:
        """None: a provider's model has no adapter of ours to hash."""
        return None

    def spec_hash_fields(self) -> dict[str, str | None]:
        """Nothing: the spec's own fields identify a provider's model."""
        return {}

    @property
    def exact_token_counts(self) -> bool:
        """Whether LiteLLM counts this model's tokens exactly (else an estimate)."""
        return self.provider in self.EXACT_TOKENIZERS or not self.provider


def parse_model(model: str) -> LocalBackend | RemoteBackend:
    """The backend a judge model string names (``local/...`` or any other LiteLLM model)."""
    return LocalBackend(model) if model.startswith(LOCAL_PREFIX) else RemoteBackend(model)
