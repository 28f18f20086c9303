"""Policy basics: the ``Generation`` record, the ``Policy`` protocol, seeds and chat rendering.

Part of ``rankgym.envs.policies``. :class:`BatchPolicy` is the one ``generate`` every built-in
policy shares: it checks the batch, pairs each conversation with its tools and context as a
:class:`Row`, and hands the rows to the policy's ``generate_rows`` (or its ``one`` per row).
Rendering is shared by every backend that works from text:
``render_text_protocol`` (models without native tool calling) and ``render_native`` (templates
that take ``tools``); ``assistant_message`` turns generated text back into an OpenAI message.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rankgym.envs.base import Env, Task
from rankgym.envs.toolcalls import has_tool_call_markup, parse_text, protocol_prompt

log = logging.getLogger(__name__)

Messages = list[dict[str, Any]]
Tools = list[dict[str, Any]]


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

    @classmethod
    def sampled(
        cls,
        policy: str,
        text: str,
        prompt_ids: list[int],
        out_ids: list[int],
        logprobs: list[float],
        notes: list[str],
    ) -> Generation:
        """A turn a local model sampled: ``out_ids`` after ``prompt_ids``, decoded to ``text``
        (parsed into the assistant message, tool calls included)."""
        return cls(message=assistant_message(text), prompt_token_ids=prompt_ids,
                   completion_token_ids=out_ids, completion_logprobs=logprobs, policy=policy,
                   text=text, completion_tokens=len(out_ids), notes=notes)  # fmt: skip

    @classmethod
    def failed(cls, policy: str, reason: str) -> Generation:
        """A turn the policy could not produce: empty assistant message, ``error`` = ``reason``."""
        return cls(message={"role": "assistant", "content": ""}, policy=policy, error=reason)


@dataclass
class EpisodeContext:
    """What the rollout driver knows about a conversation, for policies that need it.

    ``seed`` and ``turn`` make sampling reproducible per episode; ``task`` and ``env`` let the
    oracle look up its script. Policies must work without a context where they can.
    """

    task: Task | None = None
    env: Env | None = None
    seed: int | None = None
    turn: int = 0
    index: int = 0
    """The episode's slot in its group (``MixedPolicy`` picks its policy by it)."""


Contexts = Sequence[EpisodeContext] | None
"""The driver's context of each conversation of a batch, or None when it passed none."""


@runtime_checkable
class Policy(Protocol):
    """Anything with a ``name`` and a batched ``generate``.

    ``name`` identifies the policy and its weights in every ``Turn`` it produces (the trainer
    sets it to e.g. ``embedded@step3`` after each update).
    """

    name: str

    def generate(
        self, batch: list[Messages], tools: list[Tools], contexts: Contexts = None
    ) -> list[Generation]: ...


@dataclass(frozen=True)
class Row:
    """One conversation of a batch: its slot in the batch, messages, tool schemas and context."""

    index: int
    messages: Messages
    tools: Tools
    ctx: EpisodeContext | None = None


def row_contexts(rows: Sequence[Row]) -> list[EpisodeContext] | None:
    """The rows' contexts as a ``generate`` argument: None unless every row has one."""
    ctxs = [r.ctx for r in rows if r.ctx is not None]
    return ctxs if len(ctxs) == len(rows) else None


class BatchPolicy:
    """The ``generate`` the built-in policies share; a subclass writes ``one`` or ``generate_rows``.

    ``generate`` raises ValueError when ``tools`` (or ``contexts``) does not hold one entry per
    conversation, and otherwise returns what ``generate_rows`` returns: by default ``one(row)``
    for each row, in order. A policy that batches (a local model) or calls out concurrently
    overrides ``generate_rows``. Exceptions from either propagate; the rollout driver records
    them per episode.
    """

    name: str

    def generate(
        self, batch: list[Messages], tools: list[Tools], contexts: Contexts = None
    ) -> list[Generation]:
        """One assistant turn per conversation of ``batch``."""
        if len(tools) != len(batch):
            raise ValueError(f"got {len(batch)} conversations but {len(tools)} tool lists")
        if contexts is not None and len(contexts) != len(batch):
            raise ValueError(f"got {len(batch)} conversations but {len(contexts)} contexts")
        ctxs = contexts if contexts is not None else [None] * len(batch)
        rows = [Row(i, *parts) for i, parts in enumerate(zip(batch, tools, ctxs, strict=True))]
        return self.generate_rows(rows)

    def generate_rows(self, rows: list[Row]) -> list[Generation]:
        """One generation per row, in row order (default: ``one`` for each)."""
        return [self.one(row) for row in rows]

    def one(self, row: Row) -> Generation:
        """One conversation's turn; subclasses that do not override ``generate_rows`` write it."""
        raise NotImplementedError(f"{type(self).__name__} implements neither one nor generate_rows")


def map_concurrently(
    fn: Callable[[Row], Generation], rows: Sequence[Row], concurrency: int
) -> list[Generation]:
    """``fn`` over ``rows`` with up to ``concurrency`` threads; results in row order."""
    with ThreadPoolExecutor(max_workers=min(max(1, concurrency), max(1, len(rows)))) as pool:
        return list(pool.map(fn, rows))


def derive_seed(*parts: Any) -> int:
    """A stable 63-bit seed from any printable parts (not Python's salted ``hash``)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def row_seed(policy_seed: int, ctx: EpisodeContext | None, rng: random.Random) -> int:
    """One conversation's sampling seed: from the episode seed and turn when the rollout driver
    passed them (reproducible per episode), else the next draw of the policy's own ``rng``."""
    if ctx is not None and ctx.seed is not None:
        return derive_seed(policy_seed, ctx.seed, ctx.turn)
    return rng.getrandbits(63)


def assistant_message(text: str) -> dict[str, Any]:
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


def render_calls(tool_calls: list[dict[str, Any]]) -> str:
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
            content = (content + "\n" if content else "") + render_calls(m["tool_calls"])
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


def render_native(messages: Messages, tools: Tools) -> Messages:
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
