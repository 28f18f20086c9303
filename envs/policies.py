"""Policies: what writes the assistant's next message for a batch of conversations.

A policy takes a batch of chat histories (OpenAI message dicts) and the tool schemas of each,
and returns one :class:`Generation` per conversation: the assistant message (text and/or
OpenAI ``tool_calls``) plus, for local models, the exact prompt and completion token ids and
the sampler's log-probabilities, which the GRPO trainer needs for its importance ratio.

Implementations (``make_policy(spec)``):

- ``embedded``: :class:`TransformersPolicy` over SmolLM2-135M-Instruct (bf16 weights on CPU).
- ``hf:PATH[@ADAPTER_DIR]``: any local causal LM directory, optionally with a peft adapter.
- ``litellm:MODEL``: any LiteLLM model (evaluation baselines; no token ids or logprobs).
- ``random``: random text and random tool calls, no model (stress tests, a reward floor).
- ``oracle``: replays ``env.oracle(task)``, the env's scripted solution (proves tasks solvable).

Sampling in :class:`TransformersPolicy` is a plain KV-cached loop (not ``model.generate``):
every conversation waiting for the model goes into one left-padded batch, finished rows are
dropped from the batch as they stop, and each row samples with its own ``torch.Generator``
seeded from the episode seed and turn, so a rollout's tokens do not depend on what else was in
the batch (up to floating-point differences between batch shapes).

``completion_logprobs`` are the log-softmax of the *processed* logits the token was sampled
from: logits divided by the temperature, then top-k/top-p filtered (renormalised over the kept
tokens). With ``temperature=1`` and no top-k/top-p that is the model's own log-probability.
With ``temperature=0`` (greedy) they are the log-softmax of the raw logits. The trainer
recomputes its own log-probabilities at its temperature for the ratio; these are what the
sampler actually used.

Tool calls: models whose chat template takes ``tools`` get them natively; other templates
(SmolLM2's among them) get the text protocol of ``rankgym.envs.toolcalls`` — instructions in
the system prompt (added only if the env has not put them there), earlier tool calls rendered
as ``<tool_call>{json}</tool_call>``, tool results as a user turn of ``<tool_response>`` blocks.
Either way tool calls are parsed from the generated text with the lenient parser.

What this module does not do: no vLLM server (GPU path, later), no streaming, no prompt-cache
reuse across turns (each turn re-encodes the whole conversation), no stop strings other than
the model's end-of-turn tokens, and the LiteLLM policy does not retry failed calls (a failure
becomes that episode's error).
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import logging
import random
import string
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rankgym.envs.toolcalls import has_tool_call_markup, parse_text, protocol_prompt

__all__ = [
    "EpisodeContext",
    "Generation",
    "LiteLLMPolicy",
    "OraclePolicy",
    "Policy",
    "RandomPolicy",
    "TransformersPolicy",
    "derive_seed",
    "make_policy",
    "render_text_protocol",
]

log = logging.getLogger(__name__)

Messages = list[dict[str, Any]]
Tools = list[dict[str, Any]]
AUTOCAST_MIN_ROWS = 8


@dataclass
class Generation:
    """One assistant turn produced by a policy for one conversation.

    ``message`` is an OpenAI assistant dict (``content`` and/or ``tool_calls`` with JSON-string
    arguments). Token ids and logprobs are empty for policies without a local model.
    ``error`` set means the policy could not produce this turn; the rollout driver ends that
    episode with the error recorded. ``notes`` are things worth knowing (prompt truncated).
    """

    message: dict[str, Any]
    prompt_token_ids: list[int] = field(default_factory=list)
    completion_token_ids: list[int] = field(default_factory=list)
    completion_logprobs: list[float] = field(default_factory=list)
    policy: str = ""
    text: str = ""
    """The raw generated text, before tool-call parsing."""
    completion_tokens: int = 0
    """Completion length in tokens (from the ids, or the API's usage for remote models)."""
    notes: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class EpisodeContext:
    """What the rollout driver knows about a conversation, for policies that need it.

    ``seed`` and ``turn`` make sampling reproducible per episode; ``task`` and ``env`` let the
    oracle look up its script. Policies must work without a context where they can.
    """

    task: Any = None
    env: Any = None
    seed: int | None = None
    turn: int = 0


@runtime_checkable
class Policy(Protocol):
    """Anything with a ``name`` and a batched ``generate``.

    ``name`` identifies the policy and its weights in every ``Turn`` it produces (the trainer
    sets it to e.g. ``embedded@step3`` after each update).
    """

    name: str

    def generate(
        self,
        batch: list[Messages],
        tools: list[Tools],
        contexts: Sequence[EpisodeContext] | None = None,
    ) -> list[Generation]: ...


def derive_seed(*parts: Any) -> int:
    """A stable 63-bit seed from any printable parts (not Python's salted ``hash``)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _assistant_message(text: str) -> dict[str, Any]:
    """Parse generated text into an assistant dict with OpenAI tool calls.

    When calls are found the markup is removed from ``content`` (None if nothing is left);
    when none are found the text is kept whole, so an env still sees broken markup and can
    tell the agent what went wrong.
    """
    parsed = parse_text(text)
    if parsed.tool_calls:
        return {
            "role": "assistant",
            "content": parsed.content or None,
            "tool_calls": parsed.tool_calls,
        }
    return {"role": "assistant", "content": text}


def _args_obj(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def _render_calls(tool_calls: list[dict[str, Any]]) -> str:
    return "\n".join(
        "<tool_call>"
        + json.dumps(
            {
                "name": tc["function"]["name"],
                "arguments": _args_obj(tc["function"].get("arguments")),
            },
            ensure_ascii=False,
        )
        + "</tool_call>"
        for tc in tool_calls
    )


def render_text_protocol(messages: Messages, tools: Tools) -> Messages:
    """Rewrite a conversation for a model without native tool calling.

    Only ``system``/``user``/``assistant`` roles remain, with string content: the protocol
    instructions are added to the system message unless an env already put a ``<tool_call>``
    example there; assistant tool calls become ``<tool_call>`` markup (unless the content already
    holds it); tool results become ``<tool_response name="...">`` blocks in a user turn.
    Consecutive messages of the same role are merged, for templates that insist on alternation.
    """
    out: Messages = []
    instructions = protocol_prompt(tools)
    has_protocol = any(
        m.get("role") == "system" and has_tool_call_markup(m.get("content") or "") for m in messages
    )
    for m in messages:
        role, content = m.get("role"), m.get("content") or ""
        if role == "assistant" and m.get("tool_calls") and not has_tool_call_markup(content):
            content = (content + "\n" if content else "") + _render_calls(m["tool_calls"])
        elif role == "tool":
            name = m.get("name") or "tool"
            role, content = "user", f'<tool_response name="{name}">\n{content}\n</tool_response>'
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n" + content
        else:
            out.append({"role": role, "content": content})
    if instructions and not has_protocol:
        if out and out[0]["role"] == "system":
            out[0]["content"] = (out[0]["content"] + "\n\n" + instructions).strip()
        else:
            out.insert(0, {"role": "system", "content": instructions})
    return out


def _render_native(messages: Messages, tools: Tools) -> Messages:
    """Messages for a template that takes ``tools``: arguments as dicts, None content as ''.

    The env's text-protocol instructions are removed from the system message (the template
    brings its own).
    """
    instructions = protocol_prompt(tools)
    out: Messages = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        m["content"] = m.get("content") or ""
        if m["role"] == "system" and instructions and instructions in m["content"]:
            m["content"] = m["content"].replace(instructions, "").strip()
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {
                    "id": tc.get("id"),
                    "type": "function",
                    "function": {
                        "name": tc["function"]["name"],
                        "arguments": _args_obj(tc["function"].get("arguments")),
                    },
                }
                for tc in m["tool_calls"]
            ]
        out.append(m)
    return out


# ============================================================================================
# Local transformers models


class TransformersPolicy:
    """Batched sampling from a local causal LM (plain or peft-wrapped) with token ids and logprobs.

    ``model`` may be a ``PeftModel``: the trainer passes its LoRA model and sets ``name`` after
    each update. ``generate`` switches the model to eval mode (no dropout) under
    ``torch.inference_mode`` and restores the previous mode after. ``autocast``: None means bf16
    autocast for batches of 8+ rows when the weights are float32 on a CPU with bf16 support
    (faster prefill; at small batches it slows decoding); weights already in bf16 run as they
    are; True/False force it. Prompts longer than ``max_prompt_tokens`` keep the system message's
    tokens and the most recent tokens (a note is recorded in ``Generation.notes``).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        name: str = "transformers",
        max_new_tokens: int = 96,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int = 0,
        max_prompt_tokens: int = 2048,
        max_batch_size: int = 64,
        autocast: bool | None = None,
        tool_mode: str = "auto",
    ) -> None:
        import torch

        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if tool_mode not in ("auto", "native", "text"):
            raise ValueError(f"tool_mode must be auto, native or text, got {tool_mode!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.seed = seed
        self.max_prompt_tokens = max_prompt_tokens
        self.max_batch_size = max_batch_size
        self._rng = random.Random(seed)
        template = getattr(tokenizer, "chat_template", None) or ""
        if tool_mode == "auto":
            tool_mode = "native" if "tools" in template else "text"
        self.tool_mode = tool_mode
        self.pad_id = tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = tokenizer.eos_token_id
        self.eos_ids = self._eos_ids()
        param = next(model.parameters())
        self.device = param.device
        self.autocast = autocast
        self._autocast_capable = (
            self.device.type == "cpu" and param.dtype == torch.float32 and _cpu_bf16_supported()
        )
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        params = inspect.signature(type(base).forward).parameters
        # transformers >= 5.2x calls the KV cache `cache`; earlier versions `past_key_values`
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (
            self.tokenizer.eos_token_id,
            getattr(getattr(self.model, "generation_config", None), "eos_token_id", None),
        ):
            if isinstance(source, int):
                ids.add(source)
            elif isinstance(source, list | tuple):
                ids.update(int(x) for x in source)
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(end, int) and end != getattr(self.tokenizer, "unk_token_id", None):
            ids.add(end)
        return ids

    # ---- prompts ------------------------------------------------------------------------

    def _template_ids(self, messages: Messages, tools: Tools | None, gen_prompt: bool) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            messages, tools=tools or None, add_generation_prompt=gen_prompt, tokenize=False
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def encode(self, messages: Messages, tools: Tools) -> tuple[list[int], list[str]]:
        """Prompt token ids for a conversation (template + tool rendering + truncation)."""
        if self.tool_mode == "native":
            msgs, template_tools = _render_native(messages, tools), tools
        else:
            msgs, template_tools = render_text_protocol(messages, tools), None
        ids = self._template_ids(msgs, template_tools, gen_prompt=True)
        notes: list[str] = []
        limit = self.max_prompt_tokens
        if len(ids) > limit:
            prefix: list[int] = []
            if msgs and msgs[0]["role"] == "system":
                sys_ids = self._template_ids(msgs[:1], template_tools, gen_prompt=False)
                if ids[: len(sys_ids)] == sys_ids and len(sys_ids) < limit // 2:
                    prefix = sys_ids
            kept = ids[len(prefix) :][-(limit - len(prefix)) :]
            notes.append(
                f"prompt truncated from {len(ids)} to {limit} tokens: kept "
                + ("the system message and " if prefix else "")
                + f"the last {len(kept)} tokens"
            )
            ids = prefix + kept
        return ids, notes

    # ---- sampling -----------------------------------------------------------------------

    def generate(
        self,
        batch: list[Messages],
        tools: list[Tools],
        contexts: Sequence[EpisodeContext] | None = None,
    ) -> list[Generation]:
        """One assistant turn for each conversation, sampled in left-padded batches."""
        if len(tools) != len(batch):
            raise ValueError(f"got {len(batch)} conversations but {len(tools)} tool lists")
        results: list[Generation | None] = [None] * len(batch)
        prompts: list[tuple[int, list[int], int]] = []  # (index, ids, row seed)
        notes: dict[int, list[str]] = {}
        for i, (messages, tool_list) in enumerate(zip(batch, tools, strict=True)):
            ctx = contexts[i] if contexts is not None else None
            if ctx is not None and ctx.seed is not None:
                row_seed = derive_seed(self.seed, ctx.seed, ctx.turn)
            else:
                row_seed = self._rng.getrandbits(63)
            try:
                ids, notes[i] = self.encode(messages, tool_list)
            except Exception as e:  # a template that rejects this conversation
                results[i] = Generation(
                    message={"role": "assistant", "content": ""},
                    policy=self.name,
                    error=f"chat template failed: {type(e).__name__}: {e}",
                )
                continue
            prompts.append((i, ids, row_seed))
        prompts.sort(key=lambda p: len(p[1]))  # similar lengths together: less padding
        for start in range(0, len(prompts), self.max_batch_size):
            chunk = prompts[start : start + self.max_batch_size]
            sampled = self._sample([p[1] for p in chunk], [p[2] for p in chunk])
            for (i, ids, _), (out_ids, logprobs) in zip(chunk, sampled, strict=True):
                text = self.tokenizer.decode(out_ids, skip_special_tokens=True)
                results[i] = Generation(
                    message=_assistant_message(text),
                    prompt_token_ids=ids,
                    completion_token_ids=out_ids,
                    completion_logprobs=logprobs,
                    policy=self.name,
                    text=text,
                    completion_tokens=len(out_ids),
                    notes=notes.get(i, []),
                )
        return [r for r in results if r is not None]

    def _sample(
        self, prompts: list[list[int]], seeds: list[int]
    ) -> list[tuple[list[int], list[float]]]:
        import torch
        from transformers import DynamicCache

        model, device = self.model, self.device
        n, width = len(prompts), max(len(p) for p in prompts)
        input_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((n, width), dtype=torch.long)
        for r, p in enumerate(prompts):
            input_ids[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attention[r, width - len(p) :] = 1
        input_ids, attention = input_ids.to(device), attention.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        gens = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_lp: list[list[float]] = [[] for _ in range(n)]
        alive = list(range(n))  # original row of each current batch row
        was_training = model.training
        model.eval()
        try:
            with (
                torch.inference_mode(),
                torch.autocast(device.type, dtype=torch.bfloat16, enabled=self._use_autocast(n)),
            ):
                cache = DynamicCache(config=getattr(model, "config", None))
                out = model(
                    input_ids=input_ids,
                    attention_mask=attention,
                    position_ids=positions,
                    use_cache=True,
                    logits_to_keep=1,
                    **{self._cache_kwarg: cache},
                )
                for t in range(self.max_new_tokens):
                    tokens, logprobs = self._pick(
                        out.logits[:, -1, :].float(), [gens[r] for r in alive]
                    )
                    keep: list[int] = []
                    for j, r in enumerate(alive):
                        tok = int(tokens[j])
                        out_ids[r].append(tok)
                        out_lp[r].append(float(logprobs[j]))
                        if tok not in self.eos_ids:
                            keep.append(j)
                    if not keep or t == self.max_new_tokens - 1:
                        break
                    if len(keep) < len(alive):
                        idx = torch.tensor(keep, dtype=torch.long, device=device)
                        cache.batch_select_indices(idx)
                        attention, positions, tokens = attention[idx], positions[idx], tokens[idx]
                        alive = [alive[j] for j in keep]
                    attention = torch.cat([attention, attention.new_ones((len(alive), 1))], dim=1)
                    positions = positions[:, -1:] + 1
                    out = model(
                        input_ids=tokens[:, None],
                        attention_mask=attention,
                        position_ids=positions,
                        use_cache=True,
                        **{self._cache_kwarg: cache},
                    )
        finally:
            model.train(was_training)
        return list(zip(out_ids, out_lp, strict=True))

    def _use_autocast(self, rows: int) -> bool:
        if self.autocast is not None:
            return bool(self.autocast)
        # Measured on a 2-core AVX512-bf16 CPU, SmolLM2-135M, 200-token prompts: autocast makes
        # the prefill 2.6-3x faster from 8 rows up, but decoding 2x slower at 1 row (weights are
        # re-cast every step) and equal at 32 rows. So: autocast for batches of 8 or more.
        return self._autocast_capable and rows >= AUTOCAST_MIN_ROWS

    def _pick(self, logits: Any, gens: list[Any]) -> tuple[Any, Any]:
        """Choose one token per row; returns (tokens, log-prob of each under the sampler)."""
        import torch

        if self.temperature == 0:
            logprobs = torch.log_softmax(logits, dim=-1)
            tokens = logits.argmax(dim=-1)
            return tokens, logprobs.gather(1, tokens[:, None])[:, 0]
        scores = logits / self.temperature
        if self.top_k and self.top_k < scores.shape[-1]:
            kth = torch.topk(scores, self.top_k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.top_p < 1.0:  # as transformers' TopPLogitsWarper
            sorted_scores, order = torch.sort(scores, descending=False, dim=-1)
            cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
            remove_sorted = cum <= (1 - self.top_p)
            remove_sorted[:, -1] = False
            remove = remove_sorted.scatter(1, order, remove_sorted)
            scores = scores.masked_fill(remove, float("-inf"))
        logprobs = torch.log_softmax(scores, dim=-1)
        probs = logprobs.exp()
        tokens = torch.stack(
            [torch.multinomial(probs[j], 1, generator=g)[0] for j, g in enumerate(gens)]
        )
        return tokens, logprobs.gather(1, tokens[:, None])[:, 0]


def _cpu_bf16_supported() -> bool:
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


# ============================================================================================
# LiteLLM (remote or custom-provider models; evaluation only)


class LiteLLMPolicy:
    """Any LiteLLM model as a policy: concurrent ``litellm.completion`` calls, one per episode.

    For evaluation baselines only: no token ids and no logprobs (empty lists), so its groups
    can be judged but not trained on. ``tool_mode="auto"`` sends native ``tools`` when LiteLLM
    says the model supports function calling, else rewrites the conversation with the text
    protocol and parses calls from the reply. ``completion_kwargs`` go to every call unchanged.
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
        import litellm

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

    def generate(
        self,
        batch: list[Messages],
        tools: list[Tools],
        contexts: Sequence[EpisodeContext] | None = None,
    ) -> list[Generation]:
        """One completion per conversation, ``concurrency`` at a time; failures become errors."""
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(self._one, batch, tools))

    def _one(self, messages: Messages, tools: Tools) -> Generation:
        import litellm

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
            resp = litellm.completion(**kwargs)
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
                else _assistant_message(text)
            )
            usage = getattr(resp, "usage", None)
            n_out = int(getattr(usage, "completion_tokens", 0) or 0)
            return Generation(message=message, policy=self.name, text=text, completion_tokens=n_out)
        except Exception as e:
            return Generation(
                message={"role": "assistant", "content": ""},
                policy=self.name,
                error=f"litellm {self.model}: {type(e).__name__}: {e}",
            )


# ============================================================================================
# Random and oracle


class RandomPolicy:
    """Random text or random tool calls; no model. A floor for rewards and a stress test.

    Half the turns (``p_tool``) call a random tool of the episode with random arguments of
    roughly the right JSON types (sometimes unknown tools or unparsable arguments); the others
    answer with random words and a random number. Seeded per episode and turn when the driver
    passes a context.
    """

    def __init__(self, seed: int = 0, p_tool: float = 0.5, name: str = "random") -> None:
        self.name = name
        self.seed = seed
        self.p_tool = p_tool
        self._rng = random.Random(seed)

    def generate(
        self,
        batch: list[Messages],
        tools: list[Tools],
        contexts: Sequence[EpisodeContext] | None = None,
    ) -> list[Generation]:
        out = []
        for i, tool_list in enumerate(tools):
            ctx = contexts[i] if contexts is not None else None
            if ctx is not None and ctx.seed is not None:
                rng = random.Random(derive_seed("random", self.seed, ctx.seed, ctx.turn))
            else:
                rng = random.Random(self._rng.getrandbits(63))
            out.append(self._one(rng, tool_list))
        return out

    def _one(self, rng: random.Random, tool_list: Tools) -> Generation:
        if tool_list and rng.random() < self.p_tool:
            fn = rng.choice(tool_list).get("function", {})
            name = fn.get("name", "tool") if rng.random() < 0.9 else _word(rng)
            props = fn.get("parameters", {}).get("properties", {})
            if rng.random() < 0.1:
                arguments = "{" + _word(rng)  # not JSON
            else:
                arguments = json.dumps({k: _random_value(rng, v) for k, v in props.items()})
            call = {
                "id": "call_0",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            text = _render_calls([call])
        else:
            words = [_word(rng) for _ in range(rng.randint(1, 8))]
            text = " ".join(words) + f" {rng.randint(0, 10**6)}"
            message = {"role": "assistant", "content": text}
        return Generation(message=message, policy=self.name, text=text)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))


def _random_value(rng: random.Random, schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind is None and "anyOf" in schema:
        kind = rng.choice(schema["anyOf"]).get("type")
    if kind == "integer":
        return rng.randint(-100, 1000)
    if kind == "number":
        return round(rng.uniform(-100, 1000), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [_random_value(rng, schema.get("items", {})) for _ in range(rng.randint(0, 3))]
    if kind == "null":
        return None
    return " ".join(_word(rng) for _ in range(rng.randint(1, 3)))


class OraclePolicy:
    """Replays ``env.oracle(task)``: the k-th assistant turn of an episode is the script's k-th.

    Needs the episode's task (and env) through ``EpisodeContext``, which the rollout driver
    passes; without one it reports an error per conversation. When the script runs out or the
    env has no oracle, the turn is an error (the episode ends with it recorded).
    """

    def __init__(self, env: Any = None, name: str = "oracle") -> None:
        self.env = env
        self.name = name

    def generate(
        self,
        batch: list[Messages],
        tools: list[Tools],
        contexts: Sequence[EpisodeContext] | None = None,
    ) -> list[Generation]:
        out = []
        for i, messages in enumerate(batch):
            ctx = contexts[i] if contexts is not None else None
            env = (ctx.env if ctx is not None else None) or self.env
            task = ctx.task if ctx is not None else None
            k = sum(m.get("role") == "assistant" for m in messages)
            empty = {"role": "assistant", "content": ""}
            if env is None or task is None:
                err = "the oracle policy needs the episode's env and task (run it via rollout)"
                out.append(Generation(message=empty, policy=self.name, error=err))
                continue
            script = env.oracle(task)
            if not script:
                err = f"env {getattr(env, 'env_id', type(env).__name__)} has no oracle"
                out.append(Generation(message=empty, policy=self.name, error=err))
            elif k >= len(script):
                err = f"oracle script for task {task.id} has {len(script)} turns, asked for turn {k + 1}"
                out.append(Generation(message=empty, policy=self.name, error=err))
            else:
                msg = copy.deepcopy(dict(script[k]))
                msg["role"] = "assistant"
                out.append(Generation(message=msg, policy=self.name, text=msg.get("content") or ""))
        return out


# ============================================================================================
# Specs


def make_policy(
    spec: str,
    env: Any = None,
    *,
    max_new_tokens: int | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
) -> Policy:
    """Build a policy from a spec string (see the module docstring for the specs).

    ``max_new_tokens`` defaults to 96 for local models and 512 for LiteLLM models. Raises
    ``rankgym.cli.UserError`` for an unknown spec or a missing model directory.
    """
    from rankgym.cli import UserError

    sampling = {
        "max_new_tokens": max_new_tokens or 96,
        "temperature": temperature,
        "top_p": top_p,
        "seed": seed,
    }
    if spec in ("embedded", "transformers"):
        from rankgym.model import shared_embedded

        dtype = "bfloat16" if _cpu_bf16_supported() else "float32"
        model, tok = shared_embedded(dtype)
        return TransformersPolicy(model, tok, name="embedded", **sampling)
    if spec.startswith("hf:"):
        path, adapter = spec[3:], None
        if "@" in path and not Path(path).is_dir():
            path, adapter = path.rsplit("@", 1)
        if not path or not Path(path).is_dir():
            raise UserError(
                f"--policy {spec}: {path!r} is not a directory; hf:PATH needs a local "
                "transformers model directory (config.json + weights), optionally @ADAPTER_DIR"
            )
        if adapter is not None and not (Path(adapter) / "adapter_config.json").is_file():
            raise UserError(
                f"--policy {spec}: {adapter!r} holds no adapter_config.json; "
                "@ADAPTER_DIR must be a peft adapter directory (e.g. a trainer checkpoint)"
            )
        from rankgym.model import load_causal_lm

        dtype = "bfloat16" if _cpu_bf16_supported() else "float32"
        model, tok = load_causal_lm(path, dtype=dtype)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, adapter)
            model.eval()
        return TransformersPolicy(model, tok, name=spec, **sampling)
    if spec.startswith("litellm:") and len(spec) > len("litellm:"):
        return LiteLLMPolicy(
            spec[len("litellm:") :],
            temperature=temperature,
            max_tokens=max_new_tokens or 512,
            top_p=None if top_p == 1.0 else top_p,
            seed=seed,
        )
    if spec == "random":
        return RandomPolicy(seed=seed)
    if spec == "oracle":
        return OraclePolicy(env=env)
    raise UserError(
        f"unknown policy {spec!r}; use one of: embedded, hf:PATH[@ADAPTER_DIR], "
        "litellm:MODEL (e.g. litellm:openai/gpt-4o-mini), random, oracle"
    )
