"""One scripted LiteLLM provider for unit tests (judge tests, trainer tests).

:class:`ScriptedLLM` is a real ``litellm.CustomLLM``: code under test goes through
``litellm.completion`` / ``acompletion``, exception mapping and usage accounting as in
production; only the model's reply text is scripted (:meth:`ScriptedLLM.reply`). Usage is
fixed at 100 prompt and 10 completion tokens.

What it does not do: streaming, tool calls in the reply, or real token counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse, Usage

from rankgym.judges.method import GroupPlan, JudgeMethod, JudgePlan, make_plan
from rankgym.types import Group, Judgement, TrajectoryScore


class ScriptedLLM(CustomLLM):
    """A LiteLLM provider named :attr:`provider` whose reply text is :meth:`reply`."""

    provider = "scripted"

    def reply(self, messages: list[dict[str, Any]]) -> str:
        """The reply text to ``messages`` (subclasses say what)."""
        raise NotImplementedError

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:  # type: ignore[override]
        text = self.reply(messages)
        resp: ModelResponse = kwargs.get("model_response") or ModelResponse()
        resp.choices[0].message.content = text  # type: ignore[union-attr]
        resp.model = f"{self.provider}/{model}"
        resp.usage = Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)  # type: ignore[attr-defined]
        return resp

    async def acompletion(
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> ModelResponse:  # type: ignore[override]
        return self.completion(model, messages, *args, **kwargs)


def register(handler: ScriptedLLM) -> ScriptedLLM:
    """Register ``handler`` under its provider name, replacing an earlier one (idempotent)."""
    litellm.custom_provider_map = [
        p for p in litellm.custom_provider_map if p.get("provider") != handler.provider
    ] + [{"provider": handler.provider, "custom_handler": handler}]
    return handler


def unregister(provider: str) -> None:
    """Remove the provider named ``provider`` from LiteLLM's custom providers."""
    litellm.custom_provider_map = [
        p for p in litellm.custom_provider_map if p.get("provider") != provider
    ]


class LengthJudge(JudgeMethod):
    """A judge method without a model (the protocol's second method, for tests): each group's
    longest final message scores 1 and its shortest 0 (``shortest_wins`` turns it round); its
    plan sends nothing."""

    shortest_wins = False

    def plan(self, groups: Sequence[Group], permutations: int = 1) -> JudgePlan:
        plans = [GroupPlan(g.id, len(g.trajectories), note="no call") for g in groups]
        return make_plan(self.spec, self.spec_hash, plans, estimated_output_tokens=0)

    async def judge(
        self, group: Group, permutations: int = 1, orders: list[list[str]] | None = None
    ) -> Judgement:
        sizes = {t.id: len(t.messages[-1].content or "") for t in group.trajectories}
        lo, hi = min(sizes.values()), max(sizes.values())
        scores = {tid: (n - lo) / (hi - lo) if hi > lo else 0.5 for tid, n in sizes.items()}
        if self.shortest_wins:
            scores = {tid: 1.0 - s for tid, s in scores.items()}
        return Judgement(
            group_id=group.id,
            spec_hash=self.spec_hash,
            scores=[TrajectoryScore(trajectory_id=tid, score=s) for tid, s in scores.items()],
        )
