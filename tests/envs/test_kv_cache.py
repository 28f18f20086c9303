"""The growing KV cache: the numbers of transformers' DynamicCache without a copy per step."""

from __future__ import annotations

import pytest

from rankgym.envs.policies.kvcache import GrowingLayer, growing_cache

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _decode(model, cache, ids, steps: int, drop_at: int | None = None):
    """Greedy: prefill ``ids``, then ``steps`` one-token steps; at ``drop_at`` keep rows 0 and 2."""
    import torch

    logits, toks = [], []
    with torch.no_grad():
        out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        for t in range(steps):
            last = out.logits[:, -1, :]
            logits.append(last)
            nxt = last.argmax(-1, keepdim=True)
            toks.append(nxt)
            if t == drop_at:
                idx = torch.tensor([0, 2])
                cache.batch_select_indices(idx)
                nxt = nxt[idx]
                toks = [x[idx] for x in toks]
                logits = [x[idx] for x in logits]
            out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
    return torch.cat(toks, 1), torch.stack(logits, 1)


@pytest.mark.parametrize("drop_at", [None, 3])
def test_the_growing_cache_gives_the_dynamic_caches_tokens_and_logits(tiny, drop_at):
    import torch
    from transformers import DynamicCache

    ids = torch.randint(0, 1000, (3, 11), generator=torch.Generator().manual_seed(0))
    want = _decode(tiny, DynamicCache(config=tiny.config), ids, 9, drop_at)
    got = _decode(tiny, growing_cache(tiny.config, headroom=4), ids, 9, drop_at)  # grows twice
    assert torch.equal(got[0], want[0])
    torch.testing.assert_close(got[1], want[1], rtol=0, atol=1e-6)


def test_a_decode_step_writes_into_the_buffer_instead_of_copying_the_cache(tiny):
    import torch

    cache = growing_cache(tiny.config, headroom=5)
    ids = torch.randint(0, 1000, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        tiny(input_ids=ids, past_key_values=cache, use_cache=True)
        layer = cache.layers[0]
        assert isinstance(layer, GrowingLayer) and layer._kbuf.shape[-2] == 7 + 5
        ptr = layer._kbuf.data_ptr()
        for _ in range(5):  # within the headroom: the same buffer, one position more each step
            tiny(input_ids=ids[:, :1], past_key_values=cache, use_cache=True)
            assert layer._kbuf.data_ptr() == ptr and layer.keys.data_ptr() == ptr
        assert cache.get_seq_length() == 12
        tiny(input_ids=ids[:, :1], past_key_values=cache, use_cache=True)  # past it: one regrowth
        assert layer._kbuf.data_ptr() != ptr and layer.keys.shape[-2] == 13


def test_a_cache_reassigned_from_outside_is_taken_over(tiny):
    import torch
    from transformers import DynamicCache

    ids = torch.randint(0, 1000, (2, 9), generator=torch.Generator().manual_seed(2))
    outs = []
    for cache in (DynamicCache(config=tiny.config), growing_cache(tiny.config, headroom=3)):
        with torch.no_grad():
            tiny(input_ids=ids, past_key_values=cache, use_cache=True)
            cache.crop(-3)  # DynamicLayer.crop slices ``keys`` itself: 9 -> 6 positions
            outs.append(tiny(input_ids=ids[:, 6:8], past_key_values=cache, use_cache=True).logits)
        assert cache.get_seq_length() == 8
    torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=1e-6)


def test_the_policy_samples_the_same_tokens_as_with_transformers_cache(tiny, tokenizer):
    from rankgym.envs.policies import TransformersPolicy

    conv = [{"role": "user", "content": "Add 2 and 3, then say the sum."}]
    got = {}
    for grow in (True, False):
        p = TransformersPolicy(tiny, tokenizer, name="tiny", autocast=False, max_new_tokens=8,
                               temperature=1.0, seed=4, grow_kv=grow)  # fmt: skip
        first = p.generate([conv] * 4, [[]] * 4)
        nxt = [conv + [{"role": "assistant", "content": g.text}, {"role": "user", "content": "ok"}]
               for g in first]  # fmt: skip
        second = p.generate(nxt, [[]] * 4)  # continues the kept caches
        got[grow] = [(g.completion_token_ids, g.completion_logprobs) for g in first + second]
    for (ta, la), (tb, lb) in zip(got[True], got[False], strict=True):
        assert ta == tb and la == pytest.approx(lb, abs=1e-5)
