"""The embedded default judge: ``local/smollm2`` served in-process through LiteLLM.

Two judges run on the embedded SmolLM2-135M-Instruct:

- ``local/smollm2`` (the default): the **shipped judge**, a pairwise judge LoRA trained by
  ``rankgym judge-train`` on the built-in envs (``rankgym/judges/default_judge/``, rebuilt by
  ``make default-judge``; its ``manifest.json`` records the command, the data hashes and its
  held-out numbers). It is served exactly like ``local/smollm2@DIR`` (below).
- ``local/smollm2-yesno``: the untrained yes/no reader described next (weak: it mostly reads
  position). A source tree without the shipped adapter serves this one as ``local/smollm2``
  too.

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

**Trained judges.** ``local/smollm2@DIR`` serves a judge LoRA written by
``rankgym judge-train`` (``DIR`` is its ``adapter/`` directory, or the ``--out`` directory that
holds one): the adapter loaded by name into the process-wide base model (the one named in
``DIR/judge_train.json``) and switched on for each request, scoring a group by pairwise
comparisons (``rankgym.judges.pair_judge.score_pairs``: each trajectory's mean probability of
winning its pairs), or, for a judge trained with ``--objective pointwise``, by P(yes) for each
trajectory read alone (``rankgym.judges.point_judge.point_scores``; with ``--agreement``, each
prompt also says how many of the group's other attempts gave the same final answer).

**One base copy.** Every local judge runs on the process-wide base
(``rankgym.model.shared_embedded``), the copy a trainer on the embedded model also puts its
LoRA on (``rankgym.model.training_base``): each request runs under
``rankgym.model.using_adapter`` (no adapter, or the judge's own), so the trainer's adapter never
reaches a judge score. The weights are in the policy's dtype (bf16 on a CPU with native bf16):
set ``RANKGYM_JUDGE_DTYPE=float32`` for the fp32 scores recorded before issue 23 (a second copy).
``local/smollm2@pairwise`` is the
same pairwise prompt on the untrained base (the ablation: prompt without training). The
adapter's content hash enters the judge spec hash (:func:`adapter_fingerprint`, read by
``JudgeSpec.spec_hash``), so scores cached for the base judge, or for an older adapter in the
same directory, are never reused for a new one.

It is weak. A 135M model reads an 8k-token comparison poorly; expect agreement with people
near chance on anything but obvious differences. It exists so that the whole loop runs offline
on a CPU. For real judging point ``--judge`` at any LiteLLM model string, e.g.
``openai/gpt-4.1-mini``, ``anthropic/claude-sonnet-4-5``, ``hosted_vllm/Qwen/Qwen3-8B`` (with
``api_base`` in the spec extra), or ``ollama/qwen3:8b``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse, Usage

from rankgym import model as rg_model  # called through the module: tests patch its loaders
from rankgym.judge_adapter import (  # core (the spec's hash reads them); re-exported here
    ADAPTER_FILES,  # noqa: F401 (re-exported)
    DEFAULT_JUDGE_DIR,  # noqa: F401
    DEFAULT_MODEL,
    PAIRWISE,
    YESNO_MODEL,
    adapter_dir,
    adapter_fingerprint,
    default_judge_dir,  # noqa: F401
    resolve_ref,
    split_model,
    states_agreement,
)

from .pair_judge import PAIR_FORMAT, PromptTooLong, model_scorer, score_pairs
from .point_judge import POINT_FORMAT, point_scores
from .prompt import parse_ids_line

PROVIDER = "local"
ACK = "I have read the task and every trajectory."
QUESTION = (
    "Did trajectory {label} reach the goal of the task, correctly and honestly? Answer yes or no."
)
MODELS = (DEFAULT_MODEL, YESNO_MODEL)
CONTEXT_WINDOW = 8192
PAIR_CACHE_SIZE = 100_000
"""Pair verdicts kept per judge (a few MB) before its cache starts over."""
JUDGE_DTYPE_ENV = "RANKGYM_JUDGE_DTYPE"
"""Environment variable: the local judge's weights dtype (``float32``/``bfloat16``; see
``LocalJudgeLLM.dtype``)."""


SERVICE_S = "rankgym_service_s"
"""Key in a response's ``_hidden_params``: seconds the model computed, without the time the call
waited for the one model (``calling.call_judge`` counts the rest as queue time)."""
_timing = threading.local()


class LocalJudgeLLM(CustomLLM):
    """LiteLLM custom provider running the embedded model in this process (see module doc)."""

    def __init__(self, dtype: str | None = None) -> None:
        super().__init__()
        self._dtype = dtype
        self._lock = threading.Lock()
        self._judges: dict[str, tuple[Any, Any, str, int, str, bool, bool]] = {}
        """ref -> (base model, tokenizer, adapter fingerprint, prompt line limit, adapter name,
        whether it is a pointwise judge, whether its prompt states answer agreement)"""
        self._pair_cache: dict[str, dict[str, float]] = {}
        """model name -> pair prompt hash -> P(A wins): a group shown again in another order
        (judge-check, ``--permutations``) asks no pair twice. Cleared on a new adapter."""

    @property
    def dtype(self) -> str:
        """Weights dtype: the one given, else ``$RANKGYM_JUDGE_DTYPE``, else the policy's
        ``auto`` (bf16 where the CPU has it), so the judge and a trainer share one base copy
        (``rankgym.model.training_base``). ``float32`` gives the scores recorded before
        issue 23 at the cost of a second copy of the weights."""
        if self._dtype is None:
            self._dtype = os.environ.get(JUDGE_DTYPE_ENV) or rg_model.auto_dtype("cpu")
        return self._dtype

    # ---- LiteLLM entry points -------------------------------------------------------
    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        """LiteLLM's call (every argument by keyword); uses ``optional_params["max_tokens"]``
        and fills ``model_response``; the other arguments (api_base, timeout, ...) are unused."""
        params = kwargs.get("optional_params") or {}
        _timing.service_s = None
        orders = int(params.get("pair_orders") or 2)  # spec extra {"pair_orders": 1}: one order
        text, n_in, n_out = self.respond(
            model, messages, int(params.get("max_tokens") or 256), pair_orders=orders
        )
        model_response = kwargs.get("model_response")
        resp = model_response if model_response is not None else ModelResponse()
        if _timing.service_s is not None:  # the time the model worked, not the wait for the lock
            resp._hidden_params[SERVICE_S] = _timing.service_s
        resp.choices[0].message.content = text
        resp.choices[0].finish_reason = "stop"
        resp.model = f"{PROVIDER}/{model}"
        resp.created = int(time.time())
        resp.usage = Usage(prompt_tokens=n_in, completion_tokens=n_out, total_tokens=n_in + n_out)  # type: ignore[union-attr]
        return resp

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    # ---- the model ----------------------------------------------------------------
    def _model(self, model: str) -> tuple[Any, Any]:
        if split_model(model)[0] not in MODELS:
            raise litellm.NotFoundError(
                message=f"unknown local model {model!r}; available: "
                + ", ".join(f"{PROVIDER}/{m}" for m in MODELS),
                model=f"{PROVIDER}/{model}",
                llm_provider=PROVIDER,
            )
        return rg_model.shared_embedded(self.dtype)

    def respond(
        self, model: str, messages: list[dict[str, Any]], max_tokens: int, pair_orders: int = 2
    ) -> tuple[str, int, int]:
        """Answer ``messages``; returns (text, prompt tokens, completion tokens). A pairwise
        judge asks each pair in ``pair_orders`` orders (2: order-free scores, 1: half the cost)."""
        with self._lock:  # one model, one forward at a time; loading is not thread-safe
            t0 = time.perf_counter()
            rg_model.bound_heap()  # an 8k-token prefill's freed buffers leave the process
            try:
                return self._respond(model, messages, max_tokens, pair_orders)
            finally:
                rg_model.release_freed_memory()
                _timing.service_s = time.perf_counter() - t0

    def _respond(
        self, model: str, messages: list[dict[str, Any]], max_tokens: int, pair_orders: int = 2
    ) -> tuple[str, int, int]:
        msgs = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
        user_text = next((m["content"] for m in reversed(msgs) if m["role"] == "user"), "")
        labels = parse_ids_line(user_text)
        ref = resolve_ref(model)
        adapter: str | None = rg_model.OFF  # the shared base may carry a trainer's LoRA
        if ref is not None:
            lm, tok, chars, adapter, pointwise, agreement = self._pairwise_model(model, ref)
            if labels:
                with rg_model.using_adapter(lm, adapter), _too_long_for(model):
                    if pointwise:
                        return self._point_scores(lm, tok, msgs, labels, model, chars, agreement)
                    return self._pairwise_scores(lm, tok, msgs, labels, model, chars, pair_orders)
        else:
            lm, tok = self._model(model)
        with rg_model.using_adapter(lm, adapter):
            if labels:
                return self._yes_no_scores(lm, tok, msgs, labels, model)
            prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            ids = tok(prompt, add_special_tokens=False)["input_ids"]
            self._check_fits(len(ids) + max_tokens, model)
            return self._greedy(lm, tok, ids, max_tokens)

    def _pairwise_model(self, model: str, ref: str) -> tuple[Any, Any, int, str | None, bool, bool]:
        """(model, tokenizer, line limit, adapter name, pointwise, agreement): the process-wide base with
        the judge adapter loaded under a name of its content hash (switched on with
        ``using_adapter`` for each request; not merged, so the base stays shared with the
        policy), or the plain base for ``@pairwise`` (adapter ``OFF``); ``pointwise``: the
        adapter is a pointwise judge (``judge_train.json``'s objective); ``agreement``: its prompt
        states each attempt's answer agreement with the group (``--agreement``)."""
        self._model(model)  # validates the name before ``@``
        if ref == PAIRWISE:
            return (*rg_model.shared_embedded(self.dtype), 200, rg_model.OFF, False, False)
        try:
            d = adapter_dir(ref)
        except FileNotFoundError as e:
            raise litellm.NotFoundError(
                message=str(e), model=f"{PROVIDER}/{model}", llm_provider=PROVIDER
            ) from None
        fp = adapter_fingerprint(f"{PROVIDER}/{split_model(model)[0]}@{ref}") or ""
        cached = self._judges.get(ref)
        if cached is None or cached[2] != fp:
            meta = json.loads((d / "judge_train.json").read_text())
            pointwise = meta.get("objective") == "pointwise"
            kind, key, served, flag = (("pointwise", "point_format", POINT_FORMAT, " --objective pointwise")
                                       if pointwise else ("pair", "pair_format", PAIR_FORMAT, ""))  # fmt: skip
            if meta.get(key) != served:
                raise litellm.NotFoundError(
                    message=f"judge adapter {str(d)!r} was trained with {kind} prompt format "
                    f"{meta.get(key)}; this rankgym serves format {served}: "
                    f"retrain it with `rankgym judge-train{flag}`",
                    model=f"{PROVIDER}/{model}",
                    llm_provider=PROVIDER,
                )
            base = meta.get("base", "local/smollm2")
            spec = "embedded" if base.startswith(PROVIDER + "/") else base
            lm, tok, _ = rg_model.shared_policy_model(spec, self.dtype, "cpu")
            name = f"judge-{fp or 'adapter'}"  # an older adapter of this ref stays loaded, unused
            rg_model.load_named_adapter(lm, d, name)
            chars = int(meta.get("config", {}).get("max_line_chars", 200))
            cached = self._judges[ref] = (lm, tok, fp, chars, name, pointwise, states_agreement(meta))  # fmt: skip
            self._pair_cache.clear()  # verdicts of an older adapter in the same directory
        return cached[0], cached[1], cached[3], cached[4], cached[5], cached[6]

    def _pairwise_scores(
        self,
        lm: Any,
        tok: Any,
        msgs: list[dict[str, str]],
        labels: list[str],
        model: str,
        max_line_chars: int,
        pair_orders: int = 2,
    ) -> tuple[str, int, int]:
        """Scores from pairwise comparisons (see ``rankgym.judges.pair_judge``)."""
        if pair_orders not in (1, 2):
            raise litellm.BadRequestError(
                message=f"pair_orders must be 1 or 2 (got {pair_orders}); set it in the judge "
                'spec\'s extra, e.g. {"pair_orders": 1}',
                model=f"{PROVIDER}/{model}",
                llm_provider=PROVIDER,
            )
        cache = self._pair_cache.setdefault(model, {})
        if len(cache) > PAIR_CACHE_SIZE:
            cache.clear()
        scorer = model_scorer(lm, tok, context_window=CONTEXT_WINDOW)
        scores, n_in = score_pairs(scorer, msgs, labels, max_line_chars, orders=pair_orders, cache=cache)  # fmt: skip
        n = (len(labels) - 1) * pair_orders

        def why(p: float) -> str:
            return f"{PROVIDER}/{model}: mean P(wins) {p:.3f} over {n} pairwise comparison(s)"

        return _scores_json(scores, labels, why), n_in, len(labels)

    def _point_scores(
        self,
        lm: Any,
        tok: Any,
        msgs: list[dict[str, str]],
        labels: list[str],
        model: str,
        max_line_chars: int,
        agreement: bool = False,
    ) -> tuple[str, int, int]:
        """Scores of a pointwise judge: P(yes) per trajectory (``rankgym.judges.point_judge``);
        ``agreement``: each prompt states its answer agreement with the whole group."""
        scores, n_in = point_scores(lm, tok, msgs, labels, max_line_chars, context_window=CONTEXT_WINDOW, agreement=agreement)  # fmt: skip

        def why(p: float) -> str:
            return f"{PROVIDER}/{model}: P(yes) {p:.3f} to 'did this attempt meet the demand?'"

        return _scores_json(scores, labels, why), n_in, len(labels)

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


@contextlib.contextmanager
def _too_long_for(model: str) -> Iterator[None]:
    """A judge prompt over the context (``PromptTooLong``) as LiteLLM's context-window error,
    which the caller answers by judging the group in smaller windows."""
    try:
        yield
    except PromptTooLong as e:
        raise litellm.ContextWindowExceededError(
            message=str(e), model=f"{PROVIDER}/{model}", llm_provider=PROVIDER
        ) from None


def _scores_json(scores: dict[str, float], labels: list[str], why: Callable[[float], str]) -> str:
    """The judge answer for ``labels``: each score, and ``why(score)`` as its rationale;
    nothing is flagged as a hack."""
    items = [{"trajectory_id": label, "score": round(scores[label], 4),
              "rationale": why(scores[label]) + "; no written rationale.",
              "hack_suspected": False} for label in labels]  # fmt: skip
    return json.dumps({"scores": items})


def _token_ids(tok: Any, words: tuple[str, ...]) -> list[int]:
    """First token id of each spelling (deduplicated)."""
    return list(dict.fromkeys(tok(w, add_special_tokens=False)["input_ids"][0] for w in words))


_registered = threading.Lock()


def serving_dtype() -> str:
    """The weights dtype the registered local provider computes in (``LocalJudgeLLM.dtype``;
    registers it first). A judge's cache key carries it: bf16 and fp32 verdicts differ."""
    register()
    for p in litellm.custom_provider_map:
        handler = p.get("custom_handler")
        if p.get("provider") == PROVIDER and isinstance(handler, LocalJudgeLLM):
            return handler.dtype
    raise RuntimeError(f"the {PROVIDER}/ provider is registered with another handler")


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
