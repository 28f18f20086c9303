"""The base class of every rankgym environment: a multi-turn chat agent as a ``gymnasium.Env``.

An episode: ``reset`` picks a task and returns the opening messages (system + user) with the
tool schemas in ``info["tools"]``; each ``step`` takes one assistant message (an OpenAI dict
with text and/or ``tool_calls``, or a plain string), runs its tool calls and returns the tool
results as new messages. The episode ends (``terminated``) when the assistant replies without a
tool call (that reply is the final answer) or calls a terminal tool; it is ``truncated`` after
``max_turns`` assistant turns. Only the last step carries a reward: ``verify(task, answer,
state)``, also in ``info["verifiable_reward"]``.

``step``'s info: ``turn``; ``tool_calls`` and ``tool_errors`` (this step); ``parse_errors``;
``assistant_message`` (the message as executed, text-protocol calls attached as ``tool_calls``
with ids ``call_0``...); ``verifiable_reward`` (None before the last step, and when the env has
no verifier); ``hack_signals`` (all names raised so far in the episode); ``final_answer`` (last
step only); ``env_error`` (only when the env's own code raised during the turn, e.g. in
``verify``: the text of the exception). An empty reply with no tool call is a final answer too
(an empty one).

Tool calls are taken from native ``tool_calls`` when the message has any, otherwise from the
text protocol (``rankgym.envs.toolcalls``). Unreadable ``<tool_call>`` markup gets a user
message saying what went wrong and the episode goes on. Tools are run strictly: only the tools
of this episode, with arguments validated against their signature; every failure is a message
to the agent, never an exception out of ``step``: a turn that raises anywhere (a parser, a
tool's validator, the env's own code) is undone and replaced by the assistant's text plus a
user message naming the error; an exception in ``verify`` or ``hack_signals_for`` leaves the
reward None. At most ``MAX_CALLS_PER_TURN`` calls run per turn.

A new env subclasses ``Env`` and provides ``tasks(split)`` and usually ``tools`` and
``verify``; see docs/envs.md. What this class does not do: it keeps no token ids or logprobs
(the rollout driver does), it does not render chat templates, and it does not time out tools.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, NotRequired, TypedDict

import gymnasium
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeVar

from rankgym.envs.actions import assistant_with_bad_calls, brief, normalise, nudge, text_of
from rankgym.envs.spaces import AssistantActionSpace, MessagesSpace, is_assistant_action
from rankgym.envs.toolcalls import parse_text, protocol_prompt
from rankgym.envs.tools import Tool, ToolBox, ToolResult, require_type_hints
from rankgym.errors import UserError

__all__ = ["Env", "Task", "EpisodeState", "StepInfo", "ResetInfo", "MAX_CALLS_PER_TURN"]

log = logging.getLogger(__name__)

MAX_CALLS_PER_TURN = 32
"""Tool calls run per assistant turn; the rest get an "Error: not run" result."""


class Task(BaseModel):
    """One task of an env. Extra fields are allowed (``Task(id=..., prompt=..., unit="km")``)."""

    model_config = ConfigDict(extra="allow")

    id: str
    prompt: str = ""
    """The user message that opens the episode."""
    answer: Any = None
    """The reference answer, if the env has one (what ``verify`` compares against)."""
    split: str = "train"
    difficulty: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


TaskT = TypeVar("TaskT", bound=Task, default=Task)
"""The task type of an env (``class MyEnv(Env[MyTask])``); ``Task`` when not given."""


class ResetInfo(TypedDict):
    """``reset``'s info: the task drawn (a deep copy), its id and split, the tool schemas."""

    task_id: str
    task: Task
    tools: list[dict[str, Any]]
    split: str


class StepInfo(TypedDict):
    """``step``'s info (every key is in the module docstring); a plain dict at run time."""

    turn: int
    tool_calls: int
    """Tool calls of this step."""
    tool_errors: int
    """Failed tool calls of this step."""
    parse_errors: list[str]
    assistant_message: dict[str, Any]
    """The message as executed (text-protocol calls attached as ``tool_calls``)."""
    verifiable_reward: float | None
    hack_signals: list[str]
    """Every signal raised so far in the episode."""
    final_answer: NotRequired[Any]
    """Last step only: the final text, a terminal tool's arguments, or None (truncated)."""
    env_error: NotRequired[str]
    """Only when the env's own code raised during the turn."""


StepResult = tuple[list[dict[str, Any]], float, bool, bool, StepInfo]
"""What ``step`` returns: new messages, reward, terminated, truncated, info."""


@dataclass
class EpisodeState(Generic[TaskT]):
    """Everything the env knows about the current episode (``env.state``)."""

    task: TaskT
    messages: list[dict[str, Any]]
    """The whole conversation so far, including the assistant messages as executed."""
    tools: ToolBox
    turn: int = 0
    tool_results: list[ToolResult] = field(default_factory=list)
    parse_errors: int = 0
    answer: Any = None
    """The final answer: the last assistant text, or a terminal tool's validated arguments."""
    done: bool = False
    hack_signals: list[str] = field(default_factory=list)
    scratch: dict[str, Any] = field(default_factory=dict)
    """Free space for subclasses (e.g. which documents the agent has read)."""

    @property
    def tool_errors(self) -> int:
        return sum(not r.ok for r in self.tool_results)

    @property
    def tool_successes(self) -> int:
        return sum(r.ok for r in self.tool_results)


class Env(gymnasium.Env[list[dict[str, Any]], dict[str, Any] | str], Generic[TaskT]):
    """A multi-turn, tool-using chat environment (subclass it; see the module docstring).

    Subclasses set ``env_id`` and implement ``tasks``; they usually set ``tools`` (functions,
    or override ``tools_for``), ``system_prompt`` and ``verify``, and optionally ``oracle`` and
    ``hack_signals_for``. An env with its own task model names it: ``class MyEnv(Env[MyTask])``
    types ``tasks``, ``verify``, ``oracle`` and ``state.task`` with it (nothing is checked at
    run time).
    """

    metadata: dict[str, Any] = {"render_modes": []}
    env_id: str = ""
    """The env's id where no Gymnasium spec names it: what a rollout records as the trajectory's
    ``env_id`` when the env object is passed directly, and the name in error messages. Set it to
    the id you register (``"myenv/MyEnv-v0"``); left empty, an instance uses its class name."""
    max_turns: int = 10
    split: str = "train"
    """The split ``reset`` draws from when ``options`` names none (set by ``__init__``)."""
    success_threshold: float = 1.0
    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    system_prompt: str = "You are a helpful assistant."
    tools: Sequence[Callable[..., Any] | Tool] = ()
    text_protocol_in_prompt: bool = True
    """Append the text tool-call protocol and tool list to the system prompt (see docs)."""
    strict_splits: ClassVar[bool] = False
    """``reset`` by ``task_id`` only finds tasks of the split asked for (``options["split"]``,
    else the env's own); a task of another split is refused (``UserError``) instead of being
    searched for in every split."""

    def __init__(self, split: str = "train", max_turns: int | None = None) -> None:
        """Raises TypeError, naming the function, if a class-level tool lacks type hints."""
        for t in type(self).tools:
            if not isinstance(t, Tool):
                require_type_hints(t)
        if not self.env_id:  # never empty, so messages name the env ("env MyEnv has no oracle")
            self.env_id = type(self).__name__
        self.split = split
        if max_turns is not None:
            if max_turns < 1:
                raise ValueError(f"max_turns must be >= 1, got {max_turns}")
            self.max_turns = max_turns

    # ---- to override ----------------------------------------------------------------------

    def tasks(self, split: str = "train") -> list[TaskT]:
        """All tasks of a split, in a fixed order. Must be deterministic."""
        raise NotImplementedError(f"{type(self).__name__} must implement tasks(split)")

    def tools_for(self, task: TaskT) -> Sequence[Callable[..., Any] | Tool]:
        """The tools available in an episode of ``task`` (default: the class's ``tools``)."""
        return self.tools

    def initial_messages(
        self, task: TaskT, tool_schemas: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The opening messages: system prompt (+ text protocol) and the task's prompt."""
        system = self.system_prompt.strip()
        if self.text_protocol_in_prompt and tool_schemas:
            system = (system + "\n\n" + protocol_prompt(tool_schemas)).strip()
        msgs = [{"role": "system", "content": system}] if system else []
        return msgs + [{"role": "user", "content": task.prompt}]

    def verify(self, task: TaskT, answer: Any, state: EpisodeState[TaskT]) -> float | None:
        """The verifiable reward of a finished episode, or None if the env has no verifier.

        ``answer`` is the final assistant text, a terminal tool's arguments dict, or None when
        the episode was truncated before an answer.
        """
        return None

    def hack_signals_for(self, task: TaskT, state: EpisodeState[TaskT]) -> list[str]:
        """Names of reward-hack signals seen in a finished episode (default: none)."""
        return []

    def oracle(self, task: TaskT) -> list[dict[str, Any]] | None:
        """Scripted assistant messages that solve ``task`` (None if the env has no oracle)."""
        return None

    # ---- gymnasium API --------------------------------------------------------------------

    # gymnasium declares the spaces as plain attributes; a property (built on first use) that
    # returns a narrower space is an override mypy refuses for a settable attribute.
    @property  # type: ignore[override]
    def observation_space(self) -> MessagesSpace:
        if getattr(self, "_observation_space", None) is None:
            self._observation_space = MessagesSpace()
        return self._observation_space

    @observation_space.setter
    def observation_space(self, space: Any) -> None:
        self._observation_space = space

    @property  # type: ignore[override]
    def action_space(self) -> AssistantActionSpace:
        if getattr(self, "_action_space", None) is None:
            names = [t.name for t in ToolBox(self.tools).tools.values()] if self.tools else []
            self._action_space = AssistantActionSpace(tool_names=names)
        return self._action_space

    @action_space.setter
    def action_space(self, space: Any) -> None:
        self._action_space = space

    @property
    def state(self) -> EpisodeState[TaskT]:
        """The current episode; raises RuntimeError before the first ``reset``."""
        st = getattr(self, "_state", None)
        if st is None:
            raise RuntimeError("call reset() before using the episode state")
        return st

    # reset and step narrow gymnasium's ``dict[str, Any]`` info to a TypedDict (a plain dict at
    # run time), which mypy does not count as a dict subtype: the overrides are deliberate.
    def reset(  # type: ignore[override]
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], ResetInfo]:
        """Start an episode. ``options``: ``task_id`` (pick that task), ``split``.

        Without ``task_id`` the task is drawn with the env's seeded RNG from the split
        (``options["split"]``, else the ``split`` the env was made with).
        """
        super().reset(seed=seed)
        options = options or {}
        split: str = options.get("split") or self.split
        if options.get("task_id") is not None and self.strict_splits:
            task = self._task_in_split(str(options["task_id"]), split)
        elif options.get("task_id") is not None:
            task = self.get_task(str(options["task_id"]), split)
        else:
            pool = self._tasks_cached(split)
            if not pool:
                raise ValueError(f"{self._name()} has no tasks in split {split!r}")
            task = pool[int(self.np_random.integers(0, len(pool)))]
        box = ToolBox(self.tools_for(task))
        schemas = box.schemas()
        messages = self.initial_messages(task, box.schemas())
        self._state = EpisodeState(task=task, messages=copy.deepcopy(messages), tools=box)
        info: ResetInfo = {
            "task_id": task.id,
            "task": task.model_copy(deep=True),
            "tools": schemas,
            "split": task.split,
        }
        return messages, info

    def step(self, action: dict[str, Any] | str) -> StepResult:  # type: ignore[override]
        """Play one assistant turn; see the module docstring for what ends the episode.

        Raises only for a caller's mistake (no episode, the episode is over, or ``action`` is
        not an assistant message at all). Anything the agent wrote, and any exception in the
        env's own code during the turn, comes back as a message: see ``_failed_turn``.
        """
        st = self.state
        if st.done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        if not (is_assistant_action(action) or assistant_with_bad_calls(action)):
            raise TypeError(
                "step() takes a string or an assistant message dict "
                f"({{'role': 'assistant', 'content': ..., 'tool_calls': [...]}}), got "
                f"{type(action).__name__}"
            )
        mark = (st.turn, len(st.messages), len(st.tool_results))
        try:
            return self._play(st, action)
        except Exception as e:  # env code or hostile content: the agent is told, step returns
            return self._failed_turn(st, mark, text_of(action), e)

    def _play(self, st: EpisodeState[TaskT], action: dict[str, Any] | str) -> StepResult:
        msg = normalise(action)
        st.turn += 1
        parse_errors: list[str] = []
        calls = msg.get("tool_calls") or []
        if not calls and msg.get("content"):
            parsed = parse_text(msg["content"])
            calls, parse_errors = parsed.tool_calls, parsed.errors
            if calls:
                msg["tool_calls"] = calls
        for i, tc in enumerate(calls):
            if not isinstance(tc.get("id"), str) or not tc["id"]:
                tc["id"] = f"call_{st.turn}_{i}"
        st.messages.append(copy.deepcopy(msg))

        new: list[dict[str, Any]] = []
        results: list[ToolResult] = []
        terminated = False
        for i, tc in enumerate(calls):
            name = tc["function"].get("name", "")
            if terminated:
                result = ToolResult("Error: not run, the episode already ended.", False, name)
            elif i >= MAX_CALLS_PER_TURN:
                text = f"Error: not run, at most {MAX_CALLS_PER_TURN} tool calls per turn."
                result = ToolResult(text, False, name)
            else:
                result = st.tools.call(tc)
            results.append(result)
            new.append(
                {"role": "tool", "tool_call_id": tc["id"], "name": name, "content": result.content}
            )
            if result.terminal and not terminated:
                terminated, st.answer = True, result.arguments
        if not calls:
            if parse_errors:
                st.parse_errors += 1
                new.append({"role": "user", "content": nudge(parse_errors)})
            else:
                terminated, st.answer = True, msg.get("content") or ""
        truncated = not terminated and st.turn >= self.max_turns
        st.messages.extend(copy.deepcopy(new))
        st.tool_results.extend(results)

        info: StepInfo = {
            "turn": st.turn,
            "tool_calls": len(calls),
            "tool_errors": sum(not r.ok for r in results),
            "parse_errors": list(parse_errors),
            "assistant_message": copy.deepcopy(msg),
            "verifiable_reward": None,
            "hack_signals": list(st.hack_signals),
        }
        reward = 0.0
        if terminated or truncated:
            st.done = True
            answer = st.answer if terminated else None
            vr = self._finish(st, answer, info)
            info["final_answer"] = copy.deepcopy(answer)
            reward = 0.0 if vr is None else vr
        return new, reward, terminated, truncated, info

    def _finish(self, st: EpisodeState[TaskT], answer: Any, info: StepInfo) -> float | None:
        """Verify and collect hack signals; an exception in either is ``info["env_error"]``."""
        vr: float | None = None
        try:
            raw = self.verify(st.task, answer, st)
            vr = None if raw is None else float(raw)
            for name in self.hack_signals_for(st.task, st):
                if name not in st.hack_signals:
                    st.hack_signals.append(name)
        except Exception as e:
            log.warning("%s: verifying task %s raised %s", self._name(), st.task.id, brief(e))
            info["env_error"] = f"verify failed: {brief(e)}"
            vr = None
        info["verifiable_reward"] = vr
        info["hack_signals"] = list(st.hack_signals)
        return vr

    def _failed_turn(
        self, st: EpisodeState[TaskT], mark: tuple[int, int, int], text: str, error: Exception
    ) -> StepResult:
        """The turn could not be played: tell the agent, count the turn, keep the episode sane.

        Whatever the failed turn had added is dropped; the assistant message is recorded as
        its plain text (without calls that could not be run), so the conversation stays
        well-formed. The error is in ``info["env_error"]``.
        """
        log.warning("%s: a turn of task %s raised %s", self._name(), st.task.id, brief(error))
        turn, n_messages, n_results = mark
        st.turn = turn + 1
        del st.messages[n_messages:]
        del st.tool_results[n_results:]
        st.messages.append({"role": "assistant", "content": text})
        note = {
            "role": "user",
            "content": f"Error: this turn could not be processed ({brief(error)}). "
            "Try again in a simpler form, or reply without a tool call to give your answer.",
        }
        st.messages.append(note)
        st.parse_errors += 1
        already_done = st.done  # it failed after the episode had ended: end it here too
        truncated = already_done or st.turn >= self.max_turns
        info: StepInfo = {
            "turn": st.turn,
            "tool_calls": 0,
            "tool_errors": 0,
            "parse_errors": [note["content"]],
            "assistant_message": copy.deepcopy(st.messages[-2]),
            "verifiable_reward": None,
            "hack_signals": list(st.hack_signals),
            "env_error": brief(error),
        }
        if truncated:
            st.done = True
            info["final_answer"] = None
            if not already_done:
                self._finish(st, None, info)
        return [note], 0.0, False, truncated, info

    # ---- helpers --------------------------------------------------------------------------

    def get_task(self, task_id: str, split: str | None = None) -> TaskT:
        """The task with this id (searched in ``split`` first, then every split)."""
        order = [split] if split else []
        order += [s for s in self.splits if s not in order]
        for s in order:
            for t in self._tasks_cached(s):
                if t.id == task_id:
                    return t
        raise KeyError(f"{self._name()} has no task {task_id!r}")

    def _task_in_split(self, task_id: str, split: str) -> TaskT:
        """The task ``task_id`` of ``split``; a ``UserError`` naming the split it is in."""
        found = next((t for t in self._tasks_cached(split) if t.id == task_id), None)
        if found is not None:
            return found
        other = next(
            (
                s
                for s in self.splits
                if s != split and any(t.id == task_id for t in self._tasks_cached(s))
            ),
            None,
        )
        if other is None:
            raise KeyError(f"{self._name()} has no task {task_id!r}")
        raise UserError(
            f"{self._name()}: task {task_id!r} is in split {other!r}, not {split!r}; make the "
            f"env with split={other!r} or pass options={{'task_id': ..., 'split': {other!r}}}"
        )

    def _tasks_cached(self, split: str) -> list[TaskT]:
        cache: dict[str, list[TaskT]] = self.__dict__.setdefault("_task_cache", {})
        if split not in cache:  # a task listed under a split belongs to it
            cache[split] = [
                t if t.split == split else t.model_copy(update={"split": split})
                for t in self.tasks(split)
            ]
        return cache[split]

    def _name(self) -> str:
        return self.env_id or type(self).__name__
