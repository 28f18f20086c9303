"""Conversations to token ids exactly as a local policy sees them: one rendering for rollout and SFT.

``prompt_ids`` is what :class:`TransformersPolicy` feeds the model before each turn (chat
template, tool rendering, truncation). ``assistant_turns`` renders a finished conversation (an
oracle episode, a stored trajectory, a JSONL example) as the Turns the policy would have
produced: for every assistant message, the prompt ids of the history before it and the
completion ids the model would have had to write — the template's rendering of that message up
to and including the end-of-turn token. Training on these (``rankgym sft``) teaches the exact
text the rollout parses back, in the exact context the rollout shows.

Part of ``rankgym.envs.policies``. Tool calls in a demonstration are rendered canonically
(``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` in the text protocol, or the
template's own format in native mode), so a model trained on them writes that form.

What it does not do: it does not check that a demonstration is *right* (that is the caller's
selection), and a conversation whose prompt the template renders differently once the answer
is appended (a template that rewrites history) yields no turn for that message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rankgym.envs.policies.base import Messages, Tools, render_native, render_text_protocol
from rankgym.types import Turn

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


__all__ = ["assistant_turns", "chat_ids", "pick_tool_mode", "prompt_ids"]


def pick_tool_mode(tokenizer: PreTrainedTokenizerBase, tool_mode: str = "auto") -> str:
    """``native`` when the chat template takes ``tools`` (and ``auto`` was asked), else ``text``."""
    if tool_mode not in ("auto", "native", "text"):
        raise ValueError(f"tool_mode must be auto, native or text, got {tool_mode!r}")
    if tool_mode == "auto":
        template = getattr(tokenizer, "chat_template", None) or ""
        return "native" if "tools" in template else "text"
    return tool_mode


def _for_template(
    messages: Messages, tools: Tools, tool_mode: str
) -> tuple[Messages, Tools | None]:
    if tool_mode == "native":
        return render_native(messages, tools), tools
    return render_text_protocol(messages, tools), None


def chat_ids(
    tokenizer: PreTrainedTokenizerBase,
    messages: Messages,
    tools: Tools | None,
    *,
    generation_prompt: bool,
) -> list[int]:
    """Token ids of already-rendered ``messages`` through the tokenizer's chat template."""
    text = tokenizer.apply_chat_template(
        messages,
        tools=[*tools] if tools else None,
        add_generation_prompt=generation_prompt,
        tokenize=False,
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def prompt_ids(
    tokenizer: PreTrainedTokenizerBase,
    messages: Messages,
    tools: Tools,
    tool_mode: str,
    max_prompt_tokens: int,
) -> tuple[list[int], list[str]]:
    """Prompt token ids for the next assistant turn, and notes (truncation).

    Prompts longer than ``max_prompt_tokens`` keep the system message's tokens (when they are
    under half the budget) and the most recent tokens.
    """
    msgs, template_tools = _for_template(messages, tools, tool_mode)
    ids = chat_ids(tokenizer, msgs, template_tools, generation_prompt=True)
    notes: list[str] = []
    limit = max_prompt_tokens
    if len(ids) > limit:
        prefix: list[int] = []
        if msgs and msgs[0]["role"] == "system":
            sys_ids = chat_ids(tokenizer, msgs[:1], template_tools, generation_prompt=False)
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


def assistant_turns(
    tokenizer: PreTrainedTokenizerBase,
    messages: Messages,
    tools: Tools,
    *,
    tool_mode: str,
    eos_ids: set[int],
    max_prompt_tokens: int = 2048,
    policy: str = "demonstration",
) -> list[Turn]:
    """One :class:`Turn` per assistant message of ``messages``, as the policy would produce it.

    ``prompt_token_ids`` are exactly ``prompt_ids(messages[:i])``; ``completion_token_ids`` are
    the template's tokens of message ``i`` after the generation prompt, cut after the first
    end-of-turn token (``eos_ids``). ``completion_logprobs`` are empty (nothing was sampled).
    """
    turns: list[Turn] = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        prompt, _ = prompt_ids(tokenizer, messages[:i], tools, tool_mode, max_prompt_tokens)
        full_msgs, template_tools = _for_template(messages[: i + 1], tools, tool_mode)
        full_prompt = chat_ids(
            tokenizer,
            _for_template(messages[:i], tools, tool_mode)[0],
            template_tools,
            generation_prompt=True,
        )
        full = chat_ids(tokenizer, full_msgs, template_tools, generation_prompt=False)
        if full[: len(full_prompt)] != full_prompt or len(full) <= len(full_prompt):
            continue
        completion = full[len(full_prompt) :]
        end = next((k for k, t in enumerate(completion) if t in eos_ids), None)
        if end is not None:
            completion = completion[: end + 1]
        turns.append(
            Turn(
                message_index=i,
                prompt_token_ids=prompt,
                completion_token_ids=completion,
                completion_logprobs=[],
                policy=policy,
            )
        )
    return turns
