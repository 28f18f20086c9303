"""Policies: what writes the assistant's next message for a batch of conversations.

A policy takes a batch of chat histories (OpenAI message dicts) and the tool schemas of each,
and returns one :class:`Generation` per conversation: the assistant message (text and/or
OpenAI ``tool_calls``) plus, for local models, the exact prompt and completion token ids and
the sampler's log-probabilities, which the GRPO trainer needs for its importance ratio.

Implementations (``make_policy(spec)``):

- ``embedded``: :class:`TransformersPolicy` over SmolLM2-135M-Instruct (bf16 weights on CPU).
- ``hf:PATH[@ADAPTER_DIR]``: any local causal LM directory, optionally with a peft adapter.
- ``litellm:MODEL``: any LiteLLM model (evaluation baselines; no token ids or logprobs).
- ``vllm:URL[@MODEL]`` / ``vllm:serve[:MODEL_DIR]``: rollouts through a vLLM server, with token
  ids and sampler logprobs (``vllm.py``; the trainer's per-step LoRA sync is in
  ``rankgym.trainer.adapter_sync``).
- ``random``: random text and random tool calls, no model (stress tests, a reward floor).
- ``oracle``: replays ``env.oracle(task)``, the env's scripted solution (proves tasks solvable).

Sampling in :class:`TransformersPolicy` is a plain KV-cached loop (not ``model.generate``):
every conversation waiting for the model goes into one left-padded batch, finished rows are
dropped from the batch as they stop, and each row samples with its own ``torch.Generator``
seeded from the episode seed and turn (one uniform per token, by inverse CDF: ``sampling.py``),
so a rollout's tokens do not depend on what else was in the batch (up to floating-point
differences between batch shapes). With ``reuse_kv`` (the embedded default) a turn continues
from the KV cache its conversation left (``kvreuse.py``) instead of re-encoding it.

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

What this module does not do: no streaming, no stop strings other than
the model's end-of-turn tokens, and the LiteLLM policy does not retry failed calls (a failure
becomes that episode's error).
"""

from rankgym.envs.policies.base import (
    BatchPolicy,
    Contexts,
    EpisodeContext,
    Generation,
    Messages,
    Policy,
    Row,
    Tools,
    assistant_message,
    derive_seed,
    render_calls,
    render_native,
    render_text_protocol,
)
from rankgym.envs.policies.litellm import LiteLLMPolicy
from rankgym.envs.policies.render import assistant_turns, chat_ids, pick_tool_mode, prompt_ids
from rankgym.envs.policies.scripted import OraclePolicy, RandomPolicy
from rankgym.envs.policies.specs import make_policy
from rankgym.envs.policies.transformers import TransformersPolicy

# kept for code written against the single-module version
_assistant_message = assistant_message

__all__ = [
    "BatchPolicy",
    "Contexts",
    "EpisodeContext",
    "Generation",
    "LiteLLMPolicy",
    "Messages",
    "OraclePolicy",
    "Policy",
    "RandomPolicy",
    "Row",
    "Tools",
    "TransformersPolicy",
    "assistant_message",
    "assistant_turns",
    "chat_ids",
    "derive_seed",
    "make_policy",
    "pick_tool_mode",
    "prompt_ids",
    "render_calls",
    "render_native",
    "render_text_protocol",
]
