"""``example/Reverse-v0``: reverse a word; the answer goes through the terminal tool ``submit``.

The smallest complete rankgym env package: tasks, two typed tools (one terminal), a verifier,
an oracle and the entry-point function that registers the id. Copy it to start a new env.
"""

from __future__ import annotations

from typing import Any

import gymnasium

from rankgym.envs import Env, EpisodeState, Task, tool
from rankgym.envs.toolcalls import assistant_call

ENV_ID = "example/Reverse-v0"
WORDS = [
    "planet", "garden", "rocket", "silver", "window", "pencil",
    "orange", "market", "bridge", "candle", "river", "forest",
]  # fmt: skip


def reverse(text: str) -> str:
    """Reverse the characters of a text.

    Args:
        text: The text to reverse.
    """
    return text[::-1]


@tool(terminal=True)
def submit(answer: str) -> str:
    """Submit your final answer; this ends the episode.

    Args:
        answer: The reversed word.
    """
    return "Submitted."


class ReverseEnv(Env):
    env_id = ENV_ID
    max_turns = 4
    system_prompt = "Reverse the word you are given, then submit it with the submit tool."
    tools = [reverse, submit]

    def tasks(self, split: str = "train") -> list[Task]:
        words = WORDS[:9] if split == "train" else WORDS[9:]
        return [
            Task(id=f"reverse-{w}", prompt=f"Reverse '{w}'.", answer=w[::-1], split=split)
            for w in words
        ]

    def verify(self, task: Task, answer: Any, state: EpisodeState) -> float:
        # `answer` is submit's arguments; a plain-text reply (a str) or no answer scores 0.
        if isinstance(answer, dict):
            return float(answer["answer"].strip().lower() == task.answer)
        return 0.0

    def oracle(self, task: Task) -> list[dict[str, Any]]:
        word = task.answer[::-1]
        return [
            assistant_call("reverse", {"text": word}, "call_reverse"),
            assistant_call("submit", {"answer": task.answer}, "call_submit"),
        ]


def register_envs() -> None:
    """Entry point (group ``rankgym.envs``): register ``example/Reverse-v0`` once."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="rankgym_reverse.env:ReverseEnv")
