"""Round trips of every core type, validation of outside input."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from rankgym.envs.toolcalls import assistant_call
from rankgym.types import Group, Judgement, JudgeSpec, Message, Trajectory, TrajectoryScore, Turn


def _trajectory(**kw) -> Trajectory:
    return Trajectory(
        env_id="rankgym/ToolUse-v0",
        task_id="t-1",
        seed=None,
        messages=[
            Message(role="system", content="Ünïcödé ✓ 中文 🚀"),
            Message(role="user", content="What is 2+2?"),
            Message.from_dict(assistant_call("add", {"a": 2, "b": 2}, "call_1")),
            Message(role="tool", content="4", tool_call_id="call_1", name="add"),
            Message(role="assistant", content="The answer is 4."),
        ],
        turns=[
            Turn(
                message_index=2,
                prompt_token_ids=[1, 2],
                completion_token_ids=[3],
                completion_logprobs=[-0.1],
            ),
            Turn(
                message_index=4,
                prompt_token_ids=[],
                completion_token_ids=[],
                completion_logprobs=[],
            ),
        ],
        verifiable_reward=None,
        metrics={"turns": 2, "wall_s": 0.5, "missing": None},
        hack_signals=["visible_pass_hidden_fail"],
        **kw,
    )


@pytest.mark.parametrize(
    "obj",
    [
        Message(role="user", content="héllo"),
        Message(role="assistant", content=None, tool_calls=None),
        Turn(message_index=0),
        _trajectory(),
        _trajectory(error="boom", truncated=True),
        JudgeSpec(model="local/smollm2", rubric="Prefer correct answers.", context_window=None),
        TrajectoryScore(trajectory_id="a", score=0.25, rationale="ok", hack_suspected=True),
        Judgement(group_id="g", spec_hash="abc", status="unjudged", error="timeout"),
    ],
    ids=lambda o: type(o).__name__,
)
def test_round_trip(obj):
    text = obj.to_json()
    back = type(obj).from_json(text)
    assert back == obj
    assert type(obj).from_dict(json.loads(text)) == obj


def test_group_round_trip_with_judgement():
    t1, t2 = _trajectory(), _trajectory()
    g = Group(env_id="e", task_id="t-1", trajectories=[t1, t2])
    g.judgement = Judgement(
        group_id=g.id,
        spec_hash="h",
        scores=[
            TrajectoryScore(trajectory_id=t1.id, score=1.0),
            TrajectoryScore(trajectory_id=t2.id, score=0.0),
        ],
        presentations=[{"order": [t2.id, t1.id], "scores": {t1.id: 1.0, t2.id: 0.0}}],
    )
    back = Group.from_json(g.to_json())
    assert back == g
    assert back.judgement.score_map() == {t1.id: 1.0, t2.id: 0.0}
    assert json.loads(g.to_json())["schema_version"] == 1


def test_content_hash_ignores_ids_but_not_content():
    a, b = _trajectory(), _trajectory()
    assert a.id != b.id and a.content_hash() == b.content_hash()
    c = _trajectory()
    c.messages[-1].content = "The answer is 5."
    assert c.content_hash() != a.content_hash()


def test_spec_hash_changes_with_rubric_only_when_content_changes():
    s1 = JudgeSpec(model="m", rubric="r")
    assert s1.spec_hash == JudgeSpec(model="m", rubric="r").spec_hash
    assert s1.spec_hash != JudgeSpec(model="m", rubric="r2").spec_hash
    assert s1.spec_hash != JudgeSpec(model="m", rubric="r", temperature=0.5).spec_hash


def test_validation_rejects_bad_outside_input():
    with pytest.raises(ValidationError):
        Message.from_dict({"role": "wizard", "content": "x"})
    with pytest.raises(ValidationError):
        TrajectoryScore(trajectory_id="a", score=1.5)
    with pytest.raises(ValidationError):
        Trajectory.from_dict({"env_id": "e", "task_id": "t", "messages": [], "surprise": 1})


@pytest.mark.parametrize(
    ("reward", "truncated", "error", "outcome"),
    [
        (1.0, False, None, 1.0),
        (0.25, True, None, 0.25),  # a reward given at the limit is the verifier's own label
        (None, True, None, 0.0),  # cut at the turn limit before answering: a failure
        (None, False, None, None),  # never scored: unlabelled
        (1.0, False, "env crashed", None),  # an error is no label, whatever the reward says
        (None, True, "timeout", None),
    ],
)
def test_verifier_outcome_labels_what_the_judge_data_and_cut_may_learn_from(reward, truncated, error, outcome):  # fmt: skip
    t = _trajectory().model_copy(update={"verifiable_reward": reward, "truncated": truncated, "error": error})  # fmt: skip
    assert t.verifier_outcome() == outcome
