"""The evaluation's cap on episodes in flight (issue 23: the demo's 90 episodes held ~1.8 GB of
KV caches): it bounds the rows sampled at once and leaves the episodes, their seeds and (in
fp32) their tokens as they were with every episode in flight."""

from __future__ import annotations

import re
from typing import Any

import pytest
from trainer_helpers import tiny_model

from rankgym.envs import Env, Task
from rankgym.envs.policies import TransformersPolicy
from rankgym.trainer.evaluate import EVAL_IN_FLIGHT, evaluate_policies
from rankgym.types import Group

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def double(x: int) -> int:
    """Twice a number.

    Args:
        x: The number.
    """
    return 2 * x


class ChainEnv(Env):
    """Every turn is answered with a tool result and the episode never ends by itself (the
    driver stops it), so each episode continues its KV cache across turns (what the cap
    bounds)."""

    env_id = "test/Chain-v0"
    max_turns = 3
    tools = [double]
    system_prompt = "Add numbers with the tool."
    success_threshold = 1.0

    def tasks(self, split: str = "train") -> list[Task]:
        return [
            Task(id=f"c-{i}", prompt=f"What is {i} + {2 * i}?", answer=3 * i, split=split)
            for i in range(4)
        ]

    def step(self, action: Any) -> Any:
        call = '<tool_call>{"name": "double", "arguments": {"x": 4}}</tool_call>'
        new, r, _, _, info = super().step(call)
        self.state.done = False  # the driver stops the episode at max_turns
        return new, r, False, False, info

    def verify(self, task: Task, answer: str | None, state: Any) -> float:
        nums = re.findall(r"\d+", answer or "")
        return float(bool(nums) and int(nums[-1]) % 2 == 0)


class Counting(TransformersPolicy):
    """Records the rows of each ``generate`` call."""

    rows: list[int]

    def generate(self, batch: Any, tools: Any, contexts: Any = None) -> Any:
        self.rows.append(len(batch))
        return super().generate(batch, tools, contexts)


def _policy() -> Counting:
    model, tok = tiny_model(seed=1)
    p = Counting(model, tok, name="tiny", autocast=False, max_new_tokens=5, temperature=1.0, seed=7)
    p.rows = []
    return p


def _run(max_in_flight: int | None) -> tuple[dict[str, Any], list[list[list[int]]], list[int]]:
    policy = _policy()
    seen: list[Group] = []
    res = evaluate_policies(
        ChainEnv,
        {"tiny": policy},
        split="test",
        samples=3,
        seed=5,
        on_groups=lambda _name, groups: seen.extend(groups),
        max_in_flight=max_in_flight,
    )
    tokens = [
        [turn.completion_token_ids for turn in t.turns]
        for g in seen
        for t in sorted(g.trajectories, key=lambda t: t.seed or 0)
    ]
    return res, tokens, policy.rows


def test_capped_evaluation_samples_at_most_the_cap_and_the_same_episodes_as_all_at_once():
    res_all, tokens_all, rows_all = _run(None)
    res_cap, tokens_cap, rows_cap = _run(4)
    assert max(rows_all) == 12 and max(rows_cap) <= 4  # 4 tasks x 3 samples
    assert tokens_cap == tokens_all  # same seeds, same tokens (fp32)
    assert all(len(turns) >= ChainEnv.max_turns for turns in tokens_all)  # caches continued
    assert res_cap == res_all


def test_a_cap_below_one_is_refused_by_name():
    with pytest.raises(ValueError, match="max_in_flight"):
        evaluate_policies(ChainEnv, {"tiny": _policy()}, split="test", max_in_flight=0)
    assert EVAL_IN_FLIGHT >= 1
