"""``example/Reverse-v0``: reverse a word; the answer goes through the terminal tool ``submit``."""

import json

import gymnasium

from rankgym.envs import Env, Task, tool

ENV_ID = "example/Reverse-v0"
WORDS = [
    "planet",
    "garden",
    "rocket",
    "silver",
    "window",
    "pencil",
    "orange",
    "market",
    "bridge",
    "candle",
    "river",
    "forest",
]


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

    def tasks(self, split="train"):
        words = WORDS[:9] if split == "train" else WORDS[9:]
        return [
            Task(id=f"reverse-{w}", prompt=f"Reverse '{w}'.", answer=w[::-1], split=split)
            for w in words
        ]

    def verify(self, task, answer, state):
        # `answer` is submit's arguments; a plain-text reply (a str) or no answer scores 0.
        if isinstance(answer, dict):
            return float(answer["answer"].strip().lower() == task.answer)
        return 0.0

    def oracle(self, task):
        word = task.answer[::-1]
        return [
            _call("reverse", {"text": word}),
            _call("submit", {"answer": task.answer}),
        ]


def _call(name, arguments):
    fn = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"call_{name}", "type": "function", "function": fn}],
    }


def register_envs():
    """Entry point (group ``rankgym.envs``): register ``example/Reverse-v0`` once."""
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="rankgym_reverse.env:ReverseEnv")
