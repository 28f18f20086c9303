"""Policies without a model: random text/tool calls (a reward floor) and the env's oracle.

Part of ``rankgym.envs.policies``. The oracle replays ``env.oracle(task)`` turn by turn; it
does not adapt to what the env answered (a script that goes wrong stays wrong).
"""

from __future__ import annotations

import copy
import json
import random
import string
from typing import Any

from rankgym.envs.base import Env
from rankgym.envs.policies.base import (
    BatchPolicy,
    Generation,
    Row,
    Tools,
    derive_seed,
    render_calls,
)


class RandomPolicy(BatchPolicy):
    """Random text or random tool calls; no model. A floor for rewards and a stress test.

    Half the turns (``p_tool``) call a random tool of the episode with random arguments of
    roughly the right JSON types (sometimes unknown tools or unparsable arguments); the others
    answer with random words and a random number. Seeded per episode and turn when the driver
    passes a context.
    """

    def __init__(self, seed: int = 0, p_tool: float = 0.5, name: str = "random") -> None:
        self.name = name
        self.seed = seed
        self.p_tool = p_tool
        self._rng = random.Random(seed)

    def one(self, row: Row) -> Generation:
        """A random tool call or random text, seeded from the episode seed and turn if known."""
        ctx = row.ctx
        if ctx is not None and ctx.seed is not None:
            rng = random.Random(derive_seed("random", self.seed, ctx.seed, ctx.turn))
        else:
            rng = random.Random(self._rng.getrandbits(63))
        return self._draw(rng, row.tools)

    def _draw(self, rng: random.Random, tool_list: Tools) -> Generation:
        if tool_list and rng.random() < self.p_tool:
            fn = rng.choice(tool_list).get("function", {})
            name = fn.get("name", "tool") if rng.random() < 0.9 else _word(rng)
            props = fn.get("parameters", {}).get("properties", {})
            if rng.random() < 0.1:
                arguments = "{" + _word(rng)  # not JSON
            else:
                arguments = json.dumps({k: _random_value(rng, v) for k, v in props.items()})
            call = {
                "id": "call_0",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            text = render_calls([call])
        else:
            words = [_word(rng) for _ in range(rng.randint(1, 8))]
            text = " ".join(words) + f" {rng.randint(0, 10**6)}"
            message = {"role": "assistant", "content": text}
        return Generation(message=message, policy=self.name, text=text)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))


def _random_value(rng: random.Random, schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind is None and "anyOf" in schema:
        kind = rng.choice(schema["anyOf"]).get("type")
    if kind == "integer":
        return rng.randint(-100, 1000)
    if kind == "number":
        return round(rng.uniform(-100, 1000), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [_random_value(rng, schema.get("items", {})) for _ in range(rng.randint(0, 3))]
    if kind == "null":
        return None
    return " ".join(_word(rng) for _ in range(rng.randint(1, 3)))


def _script_step(script: list[dict[str, Any]], k: int, policy: str) -> Generation:
    """The script's ``k``-th message as this turn's assistant message (a copy)."""
    msg = copy.deepcopy(dict(script[k]))
    msg["role"] = "assistant"
    return Generation(message=msg, policy=policy, text=msg.get("content") or "")


class OraclePolicy(BatchPolicy):
    """Replays ``env.oracle(task)``: the k-th assistant turn of an episode is the script's k-th.

    Needs the episode's task (and env) through ``EpisodeContext``, which the rollout driver
    passes; without one it reports an error per conversation. When the script runs out or the
    env has no oracle, the turn is an error (the episode ends with it recorded).
    """

    def __init__(self, env: Env | None = None, name: str = "oracle") -> None:
        self.env = env
        self.name = name

    def one(self, row: Row) -> Generation:
        """The script's next step, or an error when there is no script or it has run out."""
        ctx = row.ctx
        env = (ctx.env if ctx is not None else None) or self.env
        task = ctx.task if ctx is not None else None
        if env is None or task is None:
            reason = "the oracle policy needs the episode's env and task (run it via rollout)"
            return Generation.failed(self.name, reason)
        k = sum(m.get("role") == "assistant" for m in row.messages)
        script = env.oracle(task)
        if not script:
            return Generation.failed(self.name, f"env {env.env_id} has no oracle")
        if k >= len(script):
            reason = (
                f"oracle script for task {task.id} has {len(script)} turns, asked for turn {k + 1}"
            )
            return Generation.failed(self.name, reason)
        return _script_step(script, k, self.name)


class NoisyOraclePolicy(BatchPolicy):
    """The env's oracle with noise: spec ``oracle~P`` (``0 <= P <= 1``).

    Each turn, with probability ``noise``, a random tool call (random tool, random arguments)
    instead of the oracle's next step; the oracle's script resumes where it left off at the
    next clean turn. ``oracle~0`` is the oracle, ``oracle~1`` the random policy (random calls or
    random text, which ends the episode). Draws are seeded per episode and turn, so a rollout
    is reproducible. Graded noise gives groups of known quality order (``rankgym judge-check``)
    and mixed groups for agreement checks.
    """

    def __init__(self, noise: float, seed: int = 0, name: str | None = None) -> None:
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"oracle noise must be between 0 and 1, got {noise}")
        self.noise = noise
        self.seed = seed
        self.name = name or f"oracle~{noise:g}"
        self.random = RandomPolicy(seed=seed, p_tool=1.0 if noise < 1 else 0.5, name=self.name)
        self.steps: dict[Any, int] = {}  # oracle steps taken, per episode

    def one(self, row: Row) -> Generation:
        """The oracle's next step, or with probability ``noise`` a random turn instead."""
        ctx, i = row.ctx, row.index
        env, task = (ctx.env, ctx.task) if ctx is not None else (None, None)
        script = (env.oracle(task) or []) if env is not None and task is not None else []
        rng = random.Random(
            derive_seed("noise", self.seed, ctx.seed if ctx else i, ctx.turn if ctx else 0)
        )
        if not script or rng.random() < self.noise:
            return self.random.one(row)
        key = (ctx.seed, getattr(task, "id", None)) if ctx is not None else i
        if ctx is not None and ctx.turn == 0:
            self.steps[key] = 0  # a new episode (the policy may be reused)
        k = min(self.steps.get(key, 0), len(script) - 1)
        self.steps[key] = k + 1
        return _script_step(script, k, self.name)


def noisy_oracle(spec: str, seed: int = 0) -> NoisyOraclePolicy:
    """``oracle~P`` -> :class:`NoisyOraclePolicy`; ``ValueError`` naming the spec otherwise."""
    try:
        noise = float(spec.split("~", 1)[1])
    except (IndexError, ValueError):
        raise ValueError(f"{spec!r}: write oracle~P with P a number from 0 to 1") from None
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"{spec!r}: the noise P must be from 0 to 1")
    return NoisyOraclePolicy(noise, seed=seed)
