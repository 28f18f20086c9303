"""Any LiteLLM model as a policy (evaluation baselines: no token ids, no logprobs).

Part of ``rankgym.envs.policies``. Failed calls are not retried: the error ends that episode.
"""

from __future__ import annotations

from typing import Any

from rankgym import router
from rankgym.envs.policies.base import (
    BatchPolicy,
    Generation,
    Row,
    assistant_message,
    map_concurrently,
    render_text_protocol,
)


class LiteLLMPolicy(BatchPolicy):
    """Any LiteLLM model as a policy: concurrent ``litellm.completion`` calls, one per episode.

    For evaluation baselines only: no token ids and no logprobs (empty lists), so its groups
    can be judged but not trained on. ``tool_mode="auto"`` sends native ``tools`` when LiteLLM
    says the model supports function calling, else rewrites the conversation with the text
    protocol and parses calls from the reply. ``completion_kwargs`` go to every call unchanged.
    When a LiteLLM Router is installed (``rankgym.router``) and ``model`` names one of its
    groups, calls go through it (fallbacks, rpm/tpm, Retry-After, the retry budget).
    """

    def __init__(
        self,
        model: str,
        name: str | None = None,
        temperature: float = 1.0,
        max_tokens: int = 512,
        top_p: float | None = None,
        seed: int | None = None,
        concurrency: int = 8,
        tool_mode: str = "auto",
        completion_kwargs: dict[str, Any] | None = None,
    ) -> None:
        import litellm  # ~10 s to import: only when a LiteLLM policy is made

        self.model = model
        self.name = name or f"litellm:{model}"
        self.temperature, self.max_tokens, self.top_p, self.seed = (
            temperature,
            max_tokens,
            top_p,
            seed,
        )
        self.concurrency = max(1, concurrency)
        self.completion_kwargs = dict(completion_kwargs or {})
        if tool_mode == "auto":
            try:
                native = bool(litellm.supports_function_calling(model=model))
            except Exception:
                native = False
            tool_mode = "native" if native else "text"
        self.tool_mode = tool_mode

    def generate_rows(self, rows: list[Row]) -> list[Generation]:
        """One completion per conversation, ``concurrency`` at a time; failures become errors."""
        return map_concurrently(self.one, rows, self.concurrency)

    def one(self, row: Row) -> Generation:
        """One ``completion`` call; any exception becomes this turn's error."""
        messages, tools = row.messages, row.tools

        kwargs: dict[str, Any] = {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "drop_params": True,  # providers without seed/top_p support ignore them
            **self.completion_kwargs,
        }
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.tool_mode == "native":
            kwargs["messages"] = [{k: v for k, v in m.items() if v is not None} for m in messages]
            if tools:
                kwargs["tools"] = tools
        else:
            kwargs["messages"] = render_text_protocol(messages, tools)
        try:
            resp = router.completion(**kwargs)  # a Router group when one is installed
            msg = resp.choices[0].message
            text = msg.content or ""
            calls = [
                {
                    "id": tc.id or f"call_{k}",
                    "type": "function",
                    "function": {
                        "name": tc.function.name,
                        "arguments": tc.function.arguments or "{}",
                    },
                }
                for k, tc in enumerate(getattr(msg, "tool_calls", None) or [])
            ]
            message = (
                {"role": "assistant", "content": text or None, "tool_calls": calls}
                if calls
                else assistant_message(text)
            )
            usage = getattr(resp, "usage", None)
            n_out = int(getattr(usage, "completion_tokens", 0) or 0)
            return Generation(message=message, policy=self.name, text=text, completion_tokens=n_out)
        except Exception as e:
            return Generation.failed(self.name, f"litellm {self.model}: {type(e).__name__}: {e}")
