"""The embedded default judge: ``local/smollm2`` served in-process through LiteLLM.

:func:`register` adds a ``litellm.CustomLLM`` under the provider name ``local`` to
``litellm.custom_provider_map``, so ``litellm.completion(model="local/smollm2", ...)`` and
``acompletion`` run SmolLM2-135M-Instruct (``rankgym.model.shared_embedded``) on the CPU, with
no network. The judge code path is exactly the one used for API judges.

How it answers a judge request (a prompt from ``rankgym.judges.prompt``, recognised by its last
line ``Score exactly these trajectory ids: [...]``): a 135M model cannot write the JSON schema,
so the provider writes the JSON itself and asks the model one constrained question per
trajectory. After the judge prompt it appends an assistant turn ("I have read the task and
every trajectory.") and a user turn "Did trajectory T1 reach the goal of the task, correctly
and honestly? Answer yes or no.", and reads the next-token distribution: the score is
P(yes) / (P(yes) + P(no)), summing the spellings yes/Yes/ no/ No. The long shared part is
prefilled once and the KV cache is cropped back to it after each question, so N trajectories
cost one prefill plus N short extensions. Scores are probabilities, not a scale the model
chose; ``hack_suspected`` is always false and the rationale only reports P(yes): this judge
neither explains itself nor detects gaming. Temperature and seed are ignored (deterministic).

Why not let the model pick a digit for ``"score": 0.``? Measured on ToolUse groups, the digit
read-out rose with the label's position (T4 > T1 in almost every group: Kendall tau -0.84
against the verifier when the good trajectories came first); the yes/no read-out has no such
trend, but on 8 groups it had no reliable signal either (tau +0.24 in one order, -0.07 with
the order reversed, CIs spanning 0). See bench/RESULTS.md.

Any other request (no ids line) gets plain greedy generation, up to ``max_tokens``.

It is weak. A 135M model reads an 8k-token comparison poorly; expect agreement with people
near chance on anything but obvious differences. It exists so that the whole loop runs offline
on a CPU. For real judging point ``--judge`` at any LiteLLM model string, e.g.
``openai/gpt-4.1-mini``, ``anthropic/claude-sonnet-4-5``, ``hosted_vllm/Qwen/Qwen3-8B`` (with
``api_base`` in the spec extra), or ``ollama/qwen3:8b``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse, Usage

from .prompt import parse_ids_line

PROVIDER = "local"
ACK = "I have read the task and every trajectory."
QUESTION = (
    "Did trajectory {label} reach the goal of the task, correctly and honestly? Answer yes or no."
)
MODELS = ("smollm2",)
CONTEXT_WINDOW = 8192


class LocalJudgeLLM(CustomLLM):
    """LiteLLM custom provider running the embedded model in this process (see module doc)."""

    def __init__(self, dtype: str = "float32") -> None:
        super().__init__()
        self.dtype = dtype
        self._lock = threading.Lock()

    # ---- LiteLLM entry points -------------------------------------------------------
    def completion(  # type: ignore[override]
        self,
        model: str,
        messages: list,
        api_base: str | None = None,
        custom_prompt_dict: dict | None = None,
        model_response: ModelResponse | None = None,
        print_verbose: Any = None,
        encoding: Any = None,
        api_key: Any = None,
        logging_obj: Any = None,
        optional_params: dict | None = None,
        acompletion: Any = None,
        litellm_params: Any = None,
        logger_fn: Any = None,
        headers: dict | None = None,
        timeout: Any = None,
        client: Any = None,
    ) -> ModelResponse:
        params = optional_params or {}
        text, n_in, n_out = self.respond(model, messages, int(params.get("max_tokens") or 256))
        resp = model_response if model_response is not None else ModelResponse()
        resp.choices[0].message.content = text  # type: ignore[union-attr]
        resp.choices[0].finish_reason = "stop"
        resp.model = f"{PROVIDER}/{model}"
        resp.created = int(time.time())
        resp.usage = Usage(prompt_tokens=n_in, completion_tokens=n_out, total_tokens=n_in + n_out)  # type: ignore[attr-defined]
        return resp

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> ModelResponse:  # type: ignore[override]
        return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    # ---- the model ----------------------------------------------------------------
    def _model(self, model: str) -> tuple[Any, Any]:
        if model not in MODELS:
            raise litellm.NotFoundError(
                message=f"unknown local model {model!r}; available: "
                + ", ".join(f"{PROVIDER}/{m}" for m in MODELS),
                model=f"{PROVIDER}/{model}",
                llm_provider=PROVIDER,
            )
        from rankgym.model import shared_embedded

        return shared_embedded(self.dtype)

    def respond(
        self, model: str, messages: list[dict[str, Any]], max_tokens: int
    ) -> tuple[str, int, int]:
        """Answer ``messages``; returns (text, prompt tokens, completion tokens)."""
        with self._lock:  # one model, one forward at a time; loading is not thread-safe
            return self._respond(model, messages, max_tokens)

    def _respond(
        self, model: str, messages: list[dict[str, Any]], max_tokens: int
    ) -> tuple[str, int, int]:
        lm, tok = self._model(model)
        msgs = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
        user_text = next((m["content"] for m in reversed(msgs) if m["role"] == "user"), "")
        labels = parse_ids_line(user_text)
        if labels:
            return self._yes_no_scores(lm, tok, msgs, labels, model)
        prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        self._check_fits(len(ids) + max_tokens, model)
        return self._greedy(lm, tok, ids, max_tokens)

    def _check_fits(self, n: int, model: str) -> None:
        if n > CONTEXT_WINDOW:
            raise litellm.ContextWindowExceededError(
                message=f"{n} tokens (prompt + generation) exceed the {CONTEXT_WINDOW}-token "
                f"context of {PROVIDER}/{model}",
                model=f"{PROVIDER}/{model}",
                llm_provider=PROVIDER,
            )

    def _forward(self, lm: Any, ids: list[int], cache: Any) -> tuple[Any, Any]:
        """One forward pass extending ``cache``; returns (last-position logits, new cache)."""
        import inspect

        import torch

        # transformers renamed ``past_key_values`` to ``cache`` (5.x); accept both.
        name = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
        with torch.inference_mode():
            out = lm(
                input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1, **{name: cache}
            )
        new_cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        return out.logits[0, -1].float(), new_cache

    def _yes_no_scores(
        self, lm: Any, tok: Any, msgs: list[dict[str, str]], labels: list[str], model: str
    ) -> tuple[str, int, int]:
        """Score each label by P(yes) to "did it reach the goal?" (see module docstring)."""
        import torch

        def ids_for(label: str) -> list[int]:
            convo = [*msgs, {"role": "assistant", "content": ACK}, {"role": "user", "content": QUESTION.format(label=label)}]  # fmt: skip
            text = tok.apply_chat_template(convo, tokenize=False, add_generation_prompt=True)
            return tok(text, add_special_tokens=False)["input_ids"]

        seqs = [ids_for(lab) for lab in labels]
        n_common = 0
        while all(len(s) > n_common + 1 for s in seqs) and len({s[n_common] for s in seqs}) == 1:
            n_common += 1
        self._check_fits(max(len(s) for s in seqs), model)
        _, cache = self._forward(lm, seqs[0][:n_common], None)
        yes = _token_ids(tok, ("yes", "Yes", " yes", " Yes"))
        no = _token_ids(tok, ("no", "No", " no", " No"))
        items, fed = [], n_common
        for label, seq in zip(labels, seqs, strict=True):
            logits, cache = self._forward(lm, seq[n_common:], cache)
            fed += len(seq) - n_common
            # back to the shared prefix for the next question (a negative crop removes tokens
            # from the end in every transformers version that has DynamicCache.crop)
            cache.crop(-(len(seq) - n_common))
            logp = torch.log_softmax(logits, dim=0)
            both = torch.stack([torch.logsumexp(logp[yes], 0), torch.logsumexp(logp[no], 0)])
            p_yes = float(torch.softmax(both, dim=0)[0])
            items.append(
                {
                    "trajectory_id": label,
                    "score": round(p_yes, 4),
                    "rationale": f"local/smollm2: P(yes) = {p_yes:.3f} to 'did {label} reach "
                    "the goal?'; no written rationale.",
                    "hack_suspected": False,
                }
            )
        text = json.dumps({"scores": items})
        return text, fed, len(labels)

    def _greedy(self, lm: Any, tok: Any, ids: list[int], max_tokens: int) -> tuple[str, int, int]:
        import torch

        with torch.inference_mode():
            out = lm.generate(
                input_ids=torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=max_tokens,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
            )
        new = out[0, len(ids) :].tolist()
        return tok.decode(new, skip_special_tokens=True), len(ids), len(new)


def _token_ids(tok: Any, words: tuple[str, ...]) -> list[int]:
    """First token id of each spelling (deduplicated)."""
    return list(dict.fromkeys(tok(w, add_special_tokens=False)["input_ids"][0] for w in words))


_registered = threading.Lock()


def register() -> None:
    """Make ``local/smollm2`` callable through LiteLLM (idempotent; loads no model yet)."""
    with _registered:
        if not any(p.get("provider") == PROVIDER for p in litellm.custom_provider_map):
            litellm.custom_provider_map = [
                *litellm.custom_provider_map,
                {"provider": PROVIDER, "custom_handler": LocalJudgeLLM()},
            ]
            litellm.register_model(
                {
                    f"{PROVIDER}/{m}": {
                        "litellm_provider": PROVIDER,
                        "mode": "chat",
                        "max_input_tokens": CONTEXT_WINDOW,
                        "max_tokens": CONTEXT_WINDOW,
                        "input_cost_per_token": 0.0,
                        "output_cost_per_token": 0.0,
                        "cache_creation_input_token_cost": 0.0,
                        "cache_read_input_token_cost": 0.0,
                    }
                    for m in MODELS
                }
            )
