"""Test helpers for the judge tests: hand-made groups and a scripted LiteLLM provider.

The provider is a real ``litellm.CustomLLM`` registered under ``fakejudge/``: the judge code
path (litellm.acompletion, exception mapping, usage) is the production one; only the model is
scripted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import litellm
from fakes import ScriptedLLM, register

from rankgym.judges.calling import RetryPolicy
from rankgym.types import Group, Message, ToolCall, Trajectory, assistant_call

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.002, timeout_s=5)

EMAIL_A = "From: alice@corp.example\nSubject: Q3 budget\n\nThe Q3 budget is 41,200 EUR, approved on 3 July."
EMAIL_B = "From: bob@corp.example\nSubject: Offsite\n\nThe offsite moves to Lisbon, 12-14 October."


def answer_traj(task: str, text: str, reward: float | None, truncated: bool = False) -> Trajectory:
    """One attempt at ``task`` of the fake env ``e/Env-v0``: the question, then ``text`` as its
    final reply (none of it when ``truncated``: the episode was cut off)."""
    return Trajectory(env_id="e/Env-v0", task_id=task, verifiable_reward=reward, truncated=truncated,
                      messages=[Message(role="system", content="Answer questions."),
                                Message(role="user", content=f"What is {task}?"),
                                Message(role="assistant", content=text)])  # fmt: skip


def tool_call(cid: str, name: str, args: dict[str, Any]) -> ToolCall:
    """One native tool call, as ``rankgym.types.assistant_call`` writes it."""
    return ToolCall.from_dict(assistant_call(name, args, cid)["tool_calls"][0])


def make_group(n: int = 3, final_answers: list[str] | None = None, gid: str = "grp-test") -> Group:
    """``n`` email-search-like trajectories sharing a prefix; the first two read EMAIL_A."""
    prefix = [
        Message(role="system", content="You answer questions about the user's inbox."),
        Message(role="user", content="What is the Q3 budget?"),
    ]
    answers = final_answers or [f"answer {i}" for i in range(n)]
    trajs = []
    for i in range(n):
        msgs = list(prefix)
        msgs.append(
            Message(
                role="assistant", tool_calls=[tool_call(f"c{i}a", "search_emails", {"q": "budget"})]
            )
        )
        msgs.append(Message(role="tool", tool_call_id=f"c{i}a", content='["m1", "m2"]'))
        email = EMAIL_A if i < 2 else EMAIL_B
        msgs.append(
            Message(role="assistant", tool_calls=[tool_call(f"c{i}b", "read_email", {"id": "m1"})])
        )
        msgs.append(Message(role="tool", tool_call_id=f"c{i}b", content=email))
        msgs.append(Message(role="assistant", content=answers[i]))
        trajs.append(
            Trajectory(
                id=f"traj-{i}", env_id="rankgym/EmailSearch-v0", task_id="q1", messages=msgs,
                verifiable_reward=1.0 if i == 0 else 0.0,
            )
        )  # fmt: skip
    return Group(id=gid, env_id="rankgym/EmailSearch-v0", task_id="q1", trajectories=trajs)


def rambling(n: int = 400) -> list[Message]:
    """``n`` assistant messages of ~40 tokens: an attempt far over the local judge's 8192-token
    context once rendered."""
    return [Message(role="assistant", content=f"step {i}: " + "word " * 30) for i in range(n)]


def labels_in(messages: list[dict[str, Any]]) -> list[str]:
    return re.findall(r'<trajectory id="(T\d+)">', messages[-1]["content"]) or re.findall(
        r'<trajectory id="(T\d+)">', messages[1]["content"]
    )


def answer(scores: dict[str, float], hack: set[str] | None = None) -> str:
    return json.dumps(
        {
            "scores": [
                {
                    "trajectory_id": k,
                    "score": v,
                    "rationale": f"r-{k}",
                    "hack_suspected": k in (hack or set()),
                }
                for k, v in scores.items()
            ]
        }
    )


Script = str | BaseException | Callable[[list[dict[str, Any]]], str]


class ScriptedJudge(ScriptedLLM):
    """Returns scripted replies in order (the last one repeats); records every request."""

    provider = "fakejudge"

    def __init__(self) -> None:
        super().__init__()
        self.script: list[Script] = []
        self.requests: list[list[dict[str, Any]]] = []

    def reply(self, messages: list[dict[str, Any]]) -> str:
        self.requests.append(messages)
        item = self.script[min(len(self.requests) - 1, len(self.script) - 1)]
        if isinstance(item, BaseException):
            raise item
        return item(messages) if callable(item) else item


def install_fake() -> ScriptedJudge:
    """Register a fresh :class:`ScriptedJudge` as the ``fakejudge/`` provider."""
    fake = ScriptedJudge()
    register(fake)
    return fake


def rate_limit() -> BaseException:
    return litellm.RateLimitError(message="429 slow down", llm_provider="fakejudge", model="m")


def timeout() -> BaseException:
    return litellm.Timeout(message="request timed out", model="m", llm_provider="fakejudge")
