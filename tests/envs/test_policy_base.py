"""The plumbing every built-in policy shares: BatchPolicy rows, Generation.failed, stop tokens."""

from __future__ import annotations

import pytest

from rankgym.envs.policies import BatchPolicy, EpisodeContext, Generation, Policy, Row
from rankgym.envs.policies.local import stop_token_ids
from rankgym.envs.policies.mixed import MixedPolicy
from rankgym.envs.rollout import rollout_groups


class Echo(BatchPolicy):
    """Answers each conversation with what it saw: its row index, turn and tool count."""

    name = "echo"

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def one(self, row: Row) -> Generation:
        self.rows.append(row)
        turn = row.ctx.turn if row.ctx is not None else None
        text = f"{row.index} {turn} {len(row.tools)}"
        return Generation(message={"role": "assistant", "content": text}, policy=self.name)


def convo(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_generation_failed_is_an_empty_assistant_turn_that_carries_the_reason():
    g = Generation.failed("embedded@step2", "chat template failed: ValueError: bad role")
    assert g.message == {"role": "assistant", "content": ""}
    assert g.policy == "embedded@step2" and g.error == "chat template failed: ValueError: bad role"
    assert g.completion_token_ids == [] and g.text == ""


def test_a_policy_written_one_row_at_a_time_gets_every_conversation_in_order():
    p = Echo()
    assert isinstance(p, Policy)
    ctxs = [EpisodeContext(seed=7, turn=t) for t in (0, 3)]
    gens = p.generate([convo("a"), convo("b")], [[], [{"type": "function"}]], ctxs)
    assert [g.message["content"] for g in gens] == ["0 0 0", "1 3 1"]
    assert [r.messages for r in p.rows] == [convo("a"), convo("b")]
    assert [g.message["content"] for g in p.generate([convo("c")], [[]])] == ["0 None 0"]


@pytest.mark.parametrize(
    ("n_tools", "n_contexts", "what"), [(1, None, "1 tool lists"), (2, 1, "1 contexts")]
)
def test_a_batch_without_one_tool_list_and_context_per_conversation_is_refused(
    n_tools, n_contexts, what
):
    contexts = None if n_contexts is None else [EpisodeContext()] * n_contexts
    with pytest.raises(ValueError, match=f"got 2 conversations but {what}"):
        Echo().generate([convo("a"), convo("b")], [[]] * n_tools, contexts)


def test_a_one_row_policy_rolls_out_and_mixes_with_others():
    groups = rollout_groups(
        "rankgym/ToolUse-v0", MixedPolicy([Echo(), Echo()]), n_tasks=2, group_size=2, progress=False
    )
    trajectories = [t for g in groups for t in g.trajectories]
    assert len(trajectories) == 4 and all(t.error is None for t in trajectories)
    assert {t.turns[0].policy for t in trajectories} == {"echo"}


def test_stop_tokens_are_the_tokenizers_the_configs_and_im_end(tokenizer):
    class Config:
        eos_token_id = [7, 8]

    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert stop_token_ids(tokenizer) == {tokenizer.eos_token_id, im_end}
    assert stop_token_ids(tokenizer, Config()) == {tokenizer.eos_token_id, im_end, 7, 8}
