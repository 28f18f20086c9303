"""A rankgym env as a TRL multi-turn tool environment (``GRPOTrainer(environment_factory=...)``).

TRL 1.16 documents one mechanism for multi-turn tool use: ``environment_factory``, a class
whose instance is made once per concurrent rollout, with a ``reset(**row)`` method called at
the start of every rollout (the dataset row's columns as keyword arguments) and public methods
that TRL exposes to the model as tools (schema from their signature and Google docstring,
``transformers.utils.get_json_schema``). TRL parses the model's tool calls with the
tokenizer's response template, calls the method, appends the result as a ``tool`` message and
generates again, until the model answers without a tool call.

:func:`trl_environment` builds such a class for any registered rankgym env: one method per
tool of the env (same name, parameters, types and descriptions), each running the call
through the env's own ``step`` (validation, errors as messages, hack signals, max turns).
``reset(task_id=...)`` starts the episode on that task; :func:`trl_dataset` gives the rows
(``prompt`` = the env's system prompt and task, ``task_id``), so the ``num_generations``
rollouts of a prompt play the same task. TRL never shows the env the model's last reply, so
the final answer reaches the env through ``RankgymToolEnv._verify`` (private: TRL exposes every public method as a tool), which the rankgym
reward functions call (``EnvVerifierReward``, ``GroupJudgeReward(verifier_weight=...)``).

:func:`tool_chat_template` gives a ChatML tokenizer without tool support (SmolLM2) the
Qwen2.5 template TRL ships, so TRL can render tools and parse ``<tool_call>`` replies.

What it does not do: restrict the tools per task (TRL exposes one tool list per env class:
the env's ``tools``; a task whose episode lacks a tool answers "unknown tool"), count a turn
per assistant message (each tool call is one env ``step``, so ``max_turns`` counts calls), or
use the env's text tool protocol (TRL's native tool calls replace it).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from rankgym.errors import UserError

__all__ = ["RankgymToolEnv", "tool_chat_template", "trl_dataset", "trl_environment"]

_RESERVED = {"reset", "get_reward"}


def require(package: str, extra: str, note: str = "") -> Any:
    """Import ``package`` or raise a one-line UserError with the install command (+ ``note``)."""
    import importlib

    try:
        return importlib.import_module(package)
    except ImportError as e:
        raise UserError(
            f"{package} is not installed ({e}); install it with: pip install 'rankgym[{extra}]'"
            + (f" ({note})" if note else "")
        ) from None


class RankgymToolEnv:
    """Base of the classes :func:`trl_environment` builds; one instance plays one rollout at
    a time. Public attributes TRL reads: ``reset`` and the tool methods only."""

    env_id: ClassVar[str] = ""
    env_kwargs: ClassVar[dict[str, Any]] = {}
    split: ClassVar[str] = "train"

    def __init__(self) -> None:
        from rankgym.envs.registry import make

        self.env = make(self.env_id, split=self.split, **self.env_kwargs)
        self.task_id: str | None = None
        self.seed = 0
        self._final: tuple[str, float | None] | None = None
        self._ended: float | None = None  # the verifier's reward when a tool call ended the episode

    def reset(self, task_id: str | None = None, **row: Any) -> str | None:
        """Start an episode on ``task_id`` (from the dataset row) and return None: the row's
        ``prompt`` is the prompt. Without a task id, draw a task and return its prompt."""
        opts = {"task_id": task_id} if task_id is not None else {}
        self.seed += 1
        _, info = self.env.reset(seed=self.seed, options=opts)
        self.task_id = info["task_id"]
        self._final = None
        self._ended = None
        return None if task_id is not None else info["task"].prompt

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool call through the env's ``step``; the tool message's text."""
        st = self.env.state
        if st.done:
            return "Error: the episode is over (max turns reached); reply with your final answer."
        call = {"id": f"call_{st.turn}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments, default=str)}}  # fmt: skip
        new, _, terminated, truncated, info = self.env.step(
            {"role": "assistant", "content": "", "tool_calls": [call]}
        )
        if terminated or truncated:
            self._ended = info.get("verifiable_reward")
        return "\n".join(str(m.get("content") or "") for m in new)

    def _verify(self, final_answer: str) -> float | None:
        """End the episode with the model's last reply (idempotent); the verifiable reward."""
        if self._final is not None and self._final[0] == final_answer:
            return self._final[1]
        if self.env.state.done:  # a terminal tool or max_turns ended it: already verified
            vr = self._ended
        else:
            info = self.env.step({"role": "assistant", "content": final_answer})[4]
            vr = info.get("verifiable_reward")
        self._final = (final_answer, vr)
        return vr

    def _hack_signals(self) -> list[str]:
        """The env's hack signals of the current episode."""
        return list(self.env.state.hack_signals)


def _doc(description: str, params: dict[str, Any]) -> str:
    lines = [description.strip() or "A tool.", "", "Args:"]
    for name, p in params.get("properties", {}).items():
        lines.append(f"    {name}: {(p.get('description') or name).strip()}")
    return "\n".join(lines) if params.get("properties") else lines[0]


def _method(tool: Any) -> Callable[..., str]:
    name = tool.name

    def method(self: RankgymToolEnv, **kwargs: Any) -> str:
        return self._call(name, kwargs)

    sig = inspect.signature(tool.fn)
    try:
        hints = typing.get_type_hints(tool.fn)
    except Exception:
        hints = {}
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    ann: dict[str, Any] = {}
    for p in sig.parameters.values():
        t = hints.get(p.name, p.annotation)
        params.append(p.replace(annotation=t, kind=inspect.Parameter.POSITIONAL_OR_KEYWORD))
        ann[p.name] = t
    ann["return"] = str
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = ann
    method.__doc__ = _doc(tool.description, tool.parameters)
    return method


def trl_environment(env_id: str, split: str = "train", **env_kwargs: Any) -> type[RankgymToolEnv]:
    """A TRL ``environment_factory`` class for the rankgym env ``env_id`` (made with
    ``split`` and ``env_kwargs``). Raises ``UserError`` for an unknown env, and ValueError
    naming the tool when a tool's name or types cannot be a TRL tool."""
    from rankgym.envs.registry import make
    from rankgym.envs.tools import ToolBox

    try:
        probe = make(env_id, split=split, **env_kwargs)
    except KeyError as e:
        raise UserError(f"unknown env {env_id!r}: {e}; `rankgym envs` lists them") from None
    tools = list(probe.tools)
    if not tools:
        first = probe.tasks(split)[:1]
        tools = list(probe.tools_for(first[0])) if first else []
    box = ToolBox(tools)
    attrs: dict[str, Any] = {"env_id": env_id, "env_kwargs": dict(env_kwargs), "split": split}
    for name, t in box.tools.items():
        if name in _RESERVED or name.startswith("_") or not name.isidentifier():
            raise ValueError(f"{env_id}: tool {name!r} cannot be a TRL tool method (reserved or not an identifier)")  # fmt: skip
        attrs[name] = _method(t)
    cls_name = "".join(ch for ch in env_id.split("/")[-1] if ch.isalnum()) + "TRLEnv"
    cls = type(cls_name, (RankgymToolEnv,), attrs)
    from transformers.utils import get_json_schema

    for name in box.tools:
        try:
            get_json_schema(getattr(cls, name))
        except Exception as e:
            raise ValueError(
                f"{env_id}: tool {name!r} has a type TRL cannot describe: {e}"
            ) from None
    return cls


def trl_dataset(
    env_id: str, split: str = "train", limit: int | None = None, **env_kwargs: Any
) -> Any:
    """A ``datasets.Dataset`` of the env's tasks: ``prompt`` (the env's system prompt without
    the text tool protocol, then the task) and ``task_id`` (read by ``reset``)."""
    datasets = require("datasets", "trl")
    from rankgym.envs.registry import make

    env = make(env_id, split=split, **env_kwargs)
    tasks = env.tasks(split)[:limit] if limit else env.tasks(split)
    if not tasks:
        raise UserError(
            f"{env_id} has no tasks in split {split!r} with {env_kwargs or 'no kwargs'}"
        )
    rows = [{"prompt": env.initial_messages(t, []), "task_id": t.id} for t in tasks]
    return datasets.Dataset.from_list(rows)


def tool_chat_template(tokenizer: Any) -> Any:
    """``tokenizer``, given TRL's Qwen2.5 tool template when its own cannot render tool calls.

    Only for ChatML tokenizers (``<|im_start|>``/``<|im_end|>`` tokens, e.g. SmolLM2); raises
    ``UserError`` for others (pick a model whose template supports tools). A tokenizer whose
    template already supports tools is returned unchanged.
    """
    trl = require("trl", "trl")
    from trl.chat_template_utils import supports_tool_calling

    if supports_tool_calling(tokenizer):
        return tokenizer
    vocab = tokenizer.get_vocab()
    if "<|im_start|>" not in vocab or "<|im_end|>" not in vocab:
        raise UserError(
            "the tokenizer's chat template cannot render tool calls and it is not ChatML; use a "
            "model whose chat template supports tools (e.g. Qwen2.5/Qwen3)"
        )
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()  # fmt: skip
    return tokenizer
