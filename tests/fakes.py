"""One scripted LiteLLM provider for unit tests (judge tests, trainer tests).

:class:`ScriptedLLM` is a real ``litellm.CustomLLM``: code under test goes through
``litellm.completion`` / ``acompletion``, exception mapping and usage accounting as in
production; only the model's reply text is scripted (:meth:`ScriptedLLM.reply`). Usage is
fixed at 100 prompt and 10 completion tokens.

What it does not do: streaming, tool calls in the reply, or real token counts.
"""

from __future__ import annotations

from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse, Usage


class ScriptedLLM(CustomLLM):
    """A LiteLLM provider named :attr:`provider` whose reply text is :meth:`reply`."""

    provider = "scripted"

    def reply(self, messages: list[dict[str, Any]]) -> str:
        """The reply text to ``messages`` (subclasses say what)."""
        raise NotImplementedError

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:  # type: ignore[override]
        text = self.reply(messages)
        resp: ModelResponse = kwargs.get("model_response") or ModelResponse()
        resp.choices[0].message.content = text  # type: ignore[union-attr]
        resp.model = f"{self.provider}/{model}"
        resp.usage = Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)  # type: ignore[attr-defined]
        return resp

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> ModelResponse:  # type: ignore[override]
        return self.completion(model, messages, *args, **kwargs)


def register(handler: ScriptedLLM) -> ScriptedLLM:
    """Register ``handler`` under its provider name, replacing an earlier one (idempotent)."""
    litellm.custom_provider_map = [
        p for p in litellm.custom_provider_map if p.get("provider") != handler.provider
    ] + [{"provider": handler.provider, "custom_handler": handler}]
    return handler


def unregister(provider: str) -> None:
    """Remove the provider named ``provider`` from LiteLLM's custom providers."""
    litellm.custom_provider_map = [
        p for p in litellm.custom_provider_map if p.get("provider") != provider
    ]
