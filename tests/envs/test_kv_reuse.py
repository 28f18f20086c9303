"""KV-cache reuse in TransformersPolicy: shared prompts prefilled once, caches extended across
turns, and the same tokens as a full prefill of every prompt."""

from __future__ import annotations

import pytest

from rankgym.envs.policies import TransformersPolicy
from rankgym.envs.policies.kvreuse import Entry, best_entry, common_prefix

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _policy(tiny, tokenizer, reuse: bool, **kw) -> TransformersPolicy:
    kw.setdefault("max_new_tokens", 6)
    kw.setdefault("temperature", 0.0)
    return TransformersPolicy(tiny, tokenizer, name="tiny", autocast=False, reuse_kv=reuse, **kw)


def _group(i: int) -> list[dict]:
    return [
        {"role": "system", "content": "You add numbers. Use the tools when you can." * 2},
        {"role": "user", "content": f"What is {i} + {i * 7}?"},
    ]


def _next_turn(conv: list[dict], gen) -> list[dict]:
    return conv + [
        {"role": "assistant", "content": gen.text},
        {"role": "user", "content": "Tool said: 42. Now answer."},
    ]


def _counting(policy: TransformersPolicy) -> list[int]:
    """Record how many new tokens each prefill feeds (rows x width of its input)."""
    fed: list[int] = []
    inner = policy._forward_prompts

    def wrapped(prompts, plan, *rest):
        fed.append(sum(len(p) - c for p, (_, c) in zip(prompts, plan, strict=True)))
        return inner(prompts, plan, *rest)

    policy._forward_prompts = wrapped
    return fed


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_three_turns_of_two_groups_give_the_same_tokens_with_and_without_reuse(
    tiny, tokenizer, temperature
):
    batch = [_group(1)] * 3 + [_group(2)] * 3  # two groups of three episodes
    tools = [[]] * len(batch)
    outs = {}
    for reuse in (False, True):
        p = _policy(tiny, tokenizer, reuse, temperature=temperature, seed=3)
        fed = _counting(p)
        convs, turns = list(batch), []
        for _ in range(3):
            gens = p.generate(convs, tools)
            turns.append([(g.prompt_token_ids, g.completion_token_ids) for g in gens])
            convs = [_next_turn(c, g) for c, g in zip(convs, gens, strict=True)]
        outs[reuse] = (turns, sum(fed))
    assert outs[True][0] == outs[False][0]  # same prompts, same sampled tokens, every turn
    assert outs[True][1] < outs[False][1] / 2  # and far fewer prompt tokens fed to the model


def test_caches_continued_in_small_batches_are_freed_as_they_are_copied_and_change_no_token(
    tiny, tokenizer
):
    batch = [_group(i) for i in range(5)]  # five conversations in batches of two
    tools = [[]] * len(batch)
    outs = {}
    for reuse in (False, True):
        p = _policy(tiny, tokenizer, reuse, temperature=1.0, seed=5, max_batch_size=2)
        convs, turns, freed = list(batch), [], []
        for _ in range(3):
            before = list(p._kv[1])
            gens = p.generate(convs, tools)
            freed.append(all(k is None for e in before for k in e.keys + e.values))
            turns.append([g.completion_token_ids for g in gens])
            convs = [_next_turn(c, g) for c, g in zip(convs, gens, strict=True)]
        outs[reuse] = turns
        if reuse:  # every kept cache was continued, so none is left whole after the next call
            assert freed == [True, True, True] and len(p._kv[1]) == 5
    assert outs[True] == outs[False]


def test_logprobs_with_reuse_equal_those_of_a_full_prefill(tiny, tokenizer):
    batch, tools = [_group(5)] * 4, [[]] * 4
    got = {}
    for reuse in (False, True):
        p = _policy(tiny, tokenizer, reuse)
        first = p.generate(batch, tools)
        second = p.generate([_next_turn(c, g) for c, g in zip(batch, first, strict=True)], tools)
        got[reuse] = [g.completion_logprobs for g in first + second]
    for a, b in zip(got[True], got[False], strict=True):
        assert a == pytest.approx(b, abs=1e-4)


def test_caches_are_not_reused_after_the_weights_or_the_name_change(tiny, tokenizer):
    import torch

    p = _policy(tiny, tokenizer, True)
    fed = _counting(p)
    batch, tools = [_group(3), _group(4)], [[]] * 2
    first = p.generate(batch, tools)
    nxt = [_next_turn(c, g) for c, g in zip(batch, first, strict=True)]

    def fed_by(call) -> int:
        start = len(fed)
        gens = call()
        return sum(fed[start:]), sum(len(g.prompt_token_ids) for g in gens)

    p.name = "tiny@step1"  # the trainer renames its policy after every update
    n, full = fed_by(lambda: p.generate(nxt, tools))
    assert n == full  # another name: nothing reused
    n, _ = fed_by(lambda: p.generate(nxt, tools))
    assert n == 2  # same name and weights: only each prompt's last token is fed
    with torch.no_grad():  # what an optimizer step does to the weights
        p.model.model.layers[0].mlp.up_proj.weight.requires_grad_(True)
        p.model.model.layers[0].mlp.up_proj.weight[0, 0] += 0.5
    try:
        n, full = fed_by(lambda: p.generate(nxt, tools))
        assert n == full
    finally:
        with torch.no_grad():
            p.model.model.layers[0].mlp.up_proj.weight[0, 0] -= 0.5
        p.model.model.layers[0].mlp.up_proj.weight.requires_grad_(False)
    p.drop_kv()
    assert p._kv[1] == []


def test_best_entry_takes_the_longest_common_prefix_and_leaves_the_last_token():
    a, b = Entry(list(range(20)), [], []), Entry(list(range(12)) + [99] * 8, [], [])
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert best_entry([b, a], list(range(30))) == (a, 20)
    assert best_entry([a], list(range(20))) == (a, 19)  # the last prompt token is always fed
    assert best_entry([a], [5] * 30) == (None, 0)  # below MIN_REUSE: a fresh prefill
