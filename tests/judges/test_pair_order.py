"""The pairwise judge's scores do not depend on the order a group is presented in.

``score_pairs`` asks every pair in both orders and the pair prompt holds only the two attempts
(and the group's context), so the scores are a permutation-equivariant function of the group.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.judges.pair_judge import PairScorer, model_scorer, pair_messages, score_pairs
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.types import Group, Message, ToolCall, ToolCallFunction, Trajectory

OUTPUTS = [f"record {k}: " + "the value is " + str(k) * 12 for k in range(4)]  # >= 24 chars


def trajectory(calls: list[int], answer: str) -> Trajectory:
    msgs = [
        Message(role="system", content="Use the lookup tool, then answer."),
        Message(role="user", content="What is the value of record 2?"),
    ]
    for k, out in enumerate(calls):
        fn = ToolCallFunction(name="lookup", arguments=f'{{"id": {out}}}')
        msgs.append(Message(role="assistant", content="", tool_calls=[ToolCall(id=f"c{k}", function=fn)]))  # fmt: skip
        msgs.append(Message(role="tool", tool_call_id=f"c{k}", name="lookup", content=OUTPUTS[out]))
    msgs.append(Message(role="assistant", content=answer))
    return Trajectory(env_id="e/Env-v0", task_id="t", messages=msgs)


def scripted_scorer(prompts: list[list[dict[str, str]]]) -> tuple[list[float], int]:
    """A judge that reads the two attempts and has a strong bias for whatever is shown first."""
    out = []
    for msgs in prompts:
        user = msgs[1]["content"]
        a = user[user.index("Attempt A:") : user.index("Attempt B:")].removeprefix("Attempt A:")
        b = user[user.index("Attempt B:") :].removeprefix("Attempt B:")
        h = [int(hashlib.sha256(x.encode()).hexdigest()[:6], 16) / 16**6 for x in (a, b)]
        out.append(min(0.99, max(0.01, 0.5 + 0.6 * (h[0] - h[1]) + 0.25)))  # +0.25: A bias
    return out, sum(len(m[1]["content"]) for m in prompts)


def three_attempts() -> Group:
    """Three attempts: one lookup and the right answer, two and a wrong one, none and no answer."""
    return Group(env_id="e/Env-v0", task_id="t", trajectories=[
        trajectory([2], "42"), trajectory([1, 2], "7"), trajectory([], "none")])  # fmt: skip


def counting_scorer() -> tuple[list[int], PairScorer]:
    """:func:`scripted_scorer` that records how many prompts each call asked."""
    asked: list[int] = []

    def counting(prompts: list[list[dict[str, str]]]) -> tuple[list[float], int]:
        asked.append(len(prompts))
        return scripted_scorer(prompts)

    return asked, counting


def by_id(group: Group, order: list[str], orders: int = 2) -> dict[str, float]:
    p = build_prompt(group, default_rubric(), order=order)
    scores, _ = score_pairs(scripted_scorer, p.messages, list(p.labels), orders=orders)
    return {p.labels[label]: s for label, s in scores.items()}


trajectories = st.lists(
    st.tuples(st.lists(st.integers(0, 3), max_size=3), st.sampled_from(["42", "7", "none"])),
    min_size=2,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(trajectories, st.randoms(use_true_random=False))
def test_scores_are_a_permutation_equivariant_function_of_the_group(spec, rnd):
    group = Group(env_id="e/Env-v0", task_id="t", trajectories=[trajectory(c, a) for c, a in spec])
    ids = [t.id for t in group.trajectories]
    shuffled = list(ids)
    rnd.shuffle(shuffled)
    first, second = by_id(group, ids), by_id(group, shuffled)
    assert first.keys() == second.keys() == set(ids)
    for tid in ids:
        assert first[tid] == pytest.approx(second[tid], abs=1e-12)


def test_one_order_halves_the_prompts_and_lets_the_first_shown_win():
    group = three_attempts()
    ids = [t.id for t in group.trajectories]
    asked, counting = counting_scorer()
    p = build_prompt(group, default_rubric())
    score_pairs(counting, p.messages, list(p.labels), batch_size=100, orders=1)
    score_pairs(counting, p.messages, list(p.labels), batch_size=100, orders=2)
    assert asked == [3, 6]  # N(N-1)/2 prompts, then N(N-1)
    # the scripted bias for A moves one-order scores when the order is reversed
    one, reversed_one = by_id(group, ids, orders=1), by_id(group, ids[::-1], orders=1)
    assert any(abs(one[t] - reversed_one[t]) > 0.05 for t in ids)
    with pytest.raises(ValueError, match="orders must be 1 or 2"):
        score_pairs(scripted_scorer, p.messages, list(p.labels), orders=3)


def test_a_pair_prompt_holds_only_the_outputs_its_two_attempts_share():
    # outputs 0 and 1 are shared in the group (T3 has both), but T1 and T2 share only output 1
    group = Group(env_id="e/Env-v0", task_id="t", trajectories=[
        trajectory([0, 1], "42"), trajectory([1], "7"), trajectory([0, 1], "none")])  # fmt: skip
    msgs = build_prompt(group, default_rubric()).messages
    user = pair_messages(msgs, "T2", "T1")[1]["content"]
    assert "[O1] " in user and "[O2]" not in user
    assert user.count(OUTPUTS[1][:20]) == 1  # shared once, referenced by both attempts
    assert user.count(OUTPUTS[0][:20]) == 1  # T1 alone has it: quoted in place
    assert user.index("Attempt A:") < user.index("see [O1]")  # T2 (A) references it first


def test_a_tiny_model_gives_the_same_scores_in_any_presentation_order(one_torch_thread):
    from test_local_provider import TinyLocal  # the 2-layer random Llama, same tokenizer

    scorer = model_scorer(*TinyLocal().tiny)
    group = three_attempts()
    ids = [t.id for t in group.trajectories]
    results = []
    for order in (ids, ids[::-1], [ids[1], ids[2], ids[0]]):
        p = build_prompt(group, default_rubric(), order=order)
        scores, n_tokens = score_pairs(scorer, p.messages, list(p.labels), batch_size=2)
        results.append(({p.labels[k]: v for k, v in scores.items()}, n_tokens))
    for scores, n_tokens in results[1:]:
        assert n_tokens == results[0][1]
        for tid in ids:
            assert scores[tid] == pytest.approx(results[0][0][tid], abs=1e-4)
    _, one_order_tokens = score_pairs(scorer, p.messages, list(p.labels), orders=1)
    assert 2 * one_order_tokens == results[0][1]


def test_a_cache_asks_no_pair_prompt_twice_and_keeps_the_scores():
    group = three_attempts()
    ids = [t.id for t in group.trajectories]
    asked, counting = counting_scorer()
    cache: dict[str, float] = {}
    results = []
    for order in (ids, ids[::-1]):
        p = build_prompt(group, default_rubric(), order=order)
        scores, n_tokens = score_pairs(counting, p.messages, list(p.labels), cache=cache)
        results.append(({p.labels[k]: v for k, v in scores.items()}, n_tokens))
    assert sum(asked) == 6 and len(cache) == 6  # the reversed order found every prompt cached
    assert results[1][1] == 0 and results[0][0] == pytest.approx(results[1][0])
