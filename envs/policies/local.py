"""What the policies that tokenize locally share: sampling settings, prompt ids, stop tokens.

Part of ``rankgym.envs.policies``. :class:`TransformersPolicy` (sampling in this process) and
:class:`VLLMPolicy` (sampling on a vLLM server) both render and tokenize each conversation here
with the same chat template, tool protocol and truncation, and stop on the same tokens; only
where the tokens are sampled differs. :class:`LocalTokensPolicy` holds that common part once.

What it does not do: load a tokenizer or a model (``rankgym.model`` does), or sample.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, TypedDict

from rankgym.envs.policies.base import BatchPolicy, Messages, Tools
from rankgym.envs.policies.render import pick_tool_mode, prompt_ids

if TYPE_CHECKING:
    from transformers import GenerationConfig, PreTrainedTokenizerBase


__all__ = ["LocalTokensPolicy", "Sampling", "stop_token_ids"]


class Sampling(TypedDict, total=False):
    """The sampling settings a local-tokenizer policy takes as keywords (defaults in brackets)."""

    max_new_tokens: int
    """Completion tokens per turn at most [96]."""
    temperature: float
    """0 = greedy [1.0]."""
    top_p: float
    """Nucleus sampling, in (0, 1] [1.0]."""
    top_k: int
    """0 = off [0]."""
    seed: int
    """Seeds the per-row samplers when the driver passes no episode seed [0]."""
    max_prompt_tokens: int
    """Longer prompts keep the system message and the most recent tokens [2048]."""
    tool_mode: str
    """``auto``, ``native`` or ``text`` (see ``render.pick_tool_mode``) [auto]."""


def stop_token_ids(
    tokenizer: PreTrainedTokenizerBase, generation_config: GenerationConfig | None = None
) -> set[int]:
    """The end-of-turn tokens: the tokenizer's and the generation config's EOS, ``<|im_end|>``."""
    ids: set[int] = set()
    for source in (
        tokenizer.eos_token_id,
        getattr(generation_config, "eos_token_id", None),
    ):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, list | tuple):
            ids.update(int(x) for x in source)
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(end, int) and end != getattr(tokenizer, "unk_token_id", None):
        ids.add(end)
    return ids


class LocalTokensPolicy(BatchPolicy):
    """Settings, checks and ``encode`` of a policy whose prompt ids are made in this process.

    Raises ValueError for ``max_new_tokens < 1``, a negative ``temperature``, ``top_p``
    outside (0, 1] or an unknown ``tool_mode``. Subclasses set ``eos_ids`` and sample.
    """

    eos_ids: set[int]

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        name: str,
        max_new_tokens: int = 96,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        seed: int = 0,
        max_prompt_tokens: int = 2048,
        tool_mode: str = "auto",
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.tokenizer, self.name = tokenizer, name
        self.max_new_tokens, self.max_prompt_tokens = max_new_tokens, max_prompt_tokens
        self.temperature, self.top_p, self.top_k, self.seed = temperature, top_p, top_k, seed
        self._rng = random.Random(seed)
        self.tool_mode = pick_tool_mode(tokenizer, tool_mode)

    def encode(self, messages: Messages, tools: Tools) -> tuple[list[int], list[str]]:
        """Prompt token ids and notes for a conversation (``render.prompt_ids``: template,
        tools, truncation)."""
        return prompt_ids(self.tokenizer, messages, tools, self.tool_mode, self.max_prompt_tokens)
