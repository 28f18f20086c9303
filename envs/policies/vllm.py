"""The ``vllm:`` policy: rollouts through a vLLM OpenAI server, keeping token ids and logprobs.

:class:`VLLMPolicy` renders and tokenizes each conversation *locally* exactly as
:class:`~rankgym.envs.policies.transformers.TransformersPolicy` does (same chat template, same
tool protocol, same truncation), sends the prompt token ids to ``/v1/completions`` with
``return_token_ids`` and ``logprobs=0``, and returns the completion token ids with the
sampler's log-probabilities. So a turn sampled by vLLM trains exactly like an embedded one: the
prompt ids are ours, the completion ids are the server's. Each request carries a seed derived
from the episode seed and turn. The server must run with ``--logprobs-mode processed_logprobs``
(what :class:`~rankgym.envs.vllm_server.ManagedServer` starts) for the logprobs to be those of
the distribution the token was sampled from (after temperature/top-p), like the embedded ones.

``model`` is the served model the requests name: the base model, or a LoRA adapter loaded at
run time (the trainer switches it to ``<run>@step<k>`` after each update, see
``rankgym.trainer.adapter_sync``). Every reply must name that model, else the turn is an error.

Specs (``make_policy``):

- ``vllm:http://HOST:PORT`` or ``vllm:http://HOST:PORT@NAME``: a running server; NAME is a
  served model or loaded adapter (default: the first model it lists). The tokenizer is loaded
  from the model's ``root`` path, which must be readable here (same machine or shared disk).
- ``vllm:serve`` or ``vllm:serve:MODEL_DIR``: start a managed server for the embedded model (or
  MODEL_DIR) and stop it when the policy is closed or the process exits.

What is validated, per reply (anything else makes that turn an error, never stored data): the
reply names the requested model; ``choices[0].token_ids`` are integers (not floats, not bools)
inside the tokenizer's vocabulary, at most ``max_tokens`` of them; ``token_logprobs`` are one
finite number <= 0 per id (up to :data:`LOGPROB_SLACK` above 0 is read as 0, float rounding).
A server whose ``max_model_len`` leaves fewer than :data:`MIN_PROMPT_TOKENS` prompt tokens
beside ``max_new_tokens`` is refused when the policy is made. Timeouts: ``vllm_server``.

What it does not do: no streaming, no remote tokenization (the tokenizer files must be local),
no retries of a failed request (it becomes that episode's error), and sampling is not
bit-identical to the embedded policy's (different kernels and random streams), only the same
distribution.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from rankgym.envs.policies.base import (
    Generation,
    Messages,
    Row,
    Tools,
    map_concurrently,
    row_seed,
)
from rankgym.envs.policies.local import LocalTokensPolicy, Sampling, stop_token_ids
from rankgym.envs.vllm_server import ManagedServer, VLLMClient, VLLMError
from rankgym.errors import UserError
from rankgym.model import embedded_model_dir

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


__all__ = ["VLLMPolicy", "make_vllm_policy", "parse_completion"]

_INT63 = 2**63 - 1
LOGPROB_SLACK = 1e-3
"""How far above 0 a sampler log-probability may read (float rounding) before it is refused."""
MIN_PROMPT_TOKENS = 16


def parse_completion(
    resp: dict[str, Any], *, model: str, vocab_size: int, max_tokens: int
) -> tuple[list[int], list[float]]:
    """The completion token ids and log-probs of a ``/v1/completions`` reply, validated (see the
    module docstring); raises :class:`VLLMError` naming what is wrong."""
    if resp.get("model") != model:
        raise VLLMError(f"vLLM answered as {str(resp.get('model'))[:80]!r}, asked {model!r}")
    choices = resp.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise VLLMError("vLLM reply has no choices[0] object")
    choice = choices[0]
    ids = choice.get("token_ids")
    logprobs = choice.get("logprobs")
    lp = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(ids, list) or not isinstance(lp, list):
        raise VLLMError(
            "vLLM reply has no token_ids/logprobs lists; is it a vLLM server (return_token_ids "
            "needs vLLM >= 0.10.2)?"
        )
    if len(ids) > max_tokens:
        raise VLLMError(f"vLLM returned {len(ids)} token ids for max_tokens {max_tokens}")
    if len(lp) != len(ids):
        raise VLLMError(
            f"vLLM returned {len(ids)} token ids but {len(lp)} logprobs; is it a vLLM "
            "server (return_token_ids needs vLLM >= 0.10.2)?"
        )
    for k, t in enumerate(ids):
        if type(t) is not int or not 0 <= t < vocab_size:
            raise VLLMError(f"vLLM token_ids[{k}] = {str(t)[:40]!r} is not a token id of the {vocab_size}-token vocabulary")  # fmt: skip
    out_lp = []
    for k, x in enumerate(lp):
        if type(x) not in (int, float) or not math.isfinite(x) or x > LOGPROB_SLACK:
            raise VLLMError(f"vLLM token_logprobs[{k}] = {str(x)[:40]!r} is not a finite log-probability <= 0")  # fmt: skip
        out_lp.append(min(float(x), 0.0))
    return ids, out_lp


class VLLMPolicy(LocalTokensPolicy):
    """Batched rollouts through a vLLM server (see the module docstring).

    ``concurrency`` requests are in flight at once (vLLM batches them itself). ``server`` is a
    :class:`ManagedServer` the policy owns and stops in :meth:`close`.
    """

    def __init__(
        self,
        client: VLLMClient,
        tokenizer: PreTrainedTokenizerBase,
        model: str,
        name: str | None = None,
        concurrency: int = 64,
        server: ManagedServer | None = None,
        **sampling: Unpack[Sampling],
    ) -> None:
        super().__init__(tokenizer, name or f"vllm:{model}", **sampling)
        self.client, self.model = client, model
        self.concurrency = max(1, concurrency)
        self.server = server
        self.eos_ids = _eos_ids(tokenizer)
        # leave room for the answer inside the server's context (it refuses longer requests)
        window = next((m.get("max_model_len") for m in client.models() if m["id"] == model), None)
        if window:
            room = int(window) - self.max_new_tokens
            if room < MIN_PROMPT_TOKENS:
                raise VLLMError(
                    f"vLLM {client.base_url} serves {model!r} with max_model_len {window}: no room "
                    f"for a prompt beside max_new_tokens {self.max_new_tokens}; start it with a "
                    "larger --max-model-len or lower max_new_tokens"
                )
            self.max_prompt_tokens = max(1, min(self.max_prompt_tokens, room))
        self.vocab_size = len(tokenizer)

    def payload(self, ids: list[int], seed: int) -> dict[str, Any]:
        """The ``/v1/completions`` request for one prompt."""
        p: dict[str, Any] = {
            "model": self.model,
            "prompt": ids,
            "max_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": seed & _INT63,
            "logprobs": 0,
            "return_token_ids": True,
            "stop_token_ids": sorted(self.eos_ids),
            "skip_special_tokens": True,
        }
        if self.top_k:
            p["top_k"] = self.top_k
        return p

    def generate_rows(self, rows: list[Row]) -> list[Generation]:
        """One assistant turn per conversation; a failed request becomes that turn's error.

        Seeds are drawn in row order before any request goes out, so they do not depend on
        which request a thread picks up first."""
        seeds = [row_seed(self.seed, row.ctx, self._rng) for row in rows]
        return map_concurrently(
            lambda row: self._one(row.messages, row.tools, seeds[row.index]),
            rows,
            self.concurrency,
        )

    def _error(self, reason: str) -> Generation:
        return Generation.failed(self.name, reason)

    def _one(self, messages: Messages, tool_list: Tools, seed: int) -> Generation:
        try:
            ids, notes = self.encode(messages, tool_list)
        except Exception as e:  # a template that rejects this conversation
            return self._error(f"chat template failed: {type(e).__name__}: {e}")
        try:
            resp = self.client.completion(self.payload(ids, seed))
        except VLLMError as e:
            return self._error(str(e))
        try:
            out_ids, lp = parse_completion(
                resp, model=self.model, vocab_size=self.vocab_size, max_tokens=self.max_new_tokens
            )
        except VLLMError as e:
            return self._error(str(e))
        text = str(self.tokenizer.decode(out_ids, skip_special_tokens=True))
        return Generation.sampled(self.name, text, ids, out_ids, lp, notes)

    def close(self) -> None:
        """Close the HTTP client and stop the managed server, if any."""
        self.client.close()
        if self.server is not None:
            self.server.stop()
            self.server = None


def _eos_ids(tokenizer: PreTrainedTokenizerBase) -> set[int]:
    """The embedded policy's stop tokens, with the generation config next to the tokenizer."""
    from transformers import GenerationConfig  # heavy: only once a vllm: policy is made

    gen = None
    path = getattr(tokenizer, "name_or_path", "")
    if path and (Path(path) / "generation_config.json").is_file():
        gen = GenerationConfig.from_pretrained(path)
    return stop_token_ids(tokenizer, gen)


def _tokenizer_for(client: VLLMClient, name: str | None) -> tuple[PreTrainedTokenizerBase, str]:
    """The served model to use and a tokenizer loaded from its ``root`` path."""
    from transformers import AutoTokenizer

    models = client.models()
    if not models:
        raise UserError(f"vLLM server {client.base_url} serves no model")
    by_id = {m["id"]: m for m in models}
    if name is not None and name not in by_id:
        raise UserError(
            f"vLLM server {client.base_url} does not serve {name!r}; it serves {sorted(by_id)}"
        )
    entry = by_id[name] if name else models[0]
    root = entry.get("root") or ""
    if entry.get("parent"):  # a LoRA adapter: the tokenizer is the base model's
        root = by_id.get(entry["parent"], {}).get("root") or root
    if not Path(root).is_dir():
        raise UserError(
            f"vLLM model {entry['id']!r} lives at {root!r}, which is not a directory here; the "
            "vllm: policy tokenizes locally, so run it where the model files are readable"
        )
    return AutoTokenizer.from_pretrained(root), entry["id"]


def make_vllm_policy(spec: str, **sampling: Any) -> VLLMPolicy:
    """A :class:`VLLMPolicy` from a ``vllm:`` spec (see the module docstring)."""
    rest = spec[len("vllm:") :]
    server: ManagedServer | None = None
    name: str | None
    if rest == "serve" or rest.startswith("serve:"):
        model_dir = rest[len("serve:") :] if rest.startswith("serve:") else ""
        if not model_dir:
            model_dir = str(embedded_model_dir())
        if not Path(model_dir).is_dir():
            raise UserError(f"--policy {spec}: {model_dir!r} is not a model directory")
        server = ManagedServer(model_dir, served_name="base")
        url, name = server.start(), "base"
    elif rest.startswith(("http://", "https://")):
        scheme, tail = rest.split("://", 1)
        host, _, name_part = tail.partition("@")  # adapter names may hold "@" (run@step3)
        url, name = f"{scheme}://{host}", name_part or None
    else:
        raise UserError(
            f"--policy {spec}: use vllm:http://HOST:PORT[@MODEL] for a running server or "
            "vllm:serve[:MODEL_DIR] to start one"
        )
    client = VLLMClient(url)
    try:
        tok, model = _tokenizer_for(client, name)
    except Exception:
        client.close()
        if server is not None:
            server.stop()
        raise
    return VLLMPolicy(client, tok, model, name=spec, server=server, **sampling)
