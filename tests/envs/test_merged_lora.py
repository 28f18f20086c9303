"""Sampling with the active LoRA merged into the base weights (``envs/policies/merged.py``): the
unmerged path's numbers, the base weights restored bit for bit, merged again after an update."""

from __future__ import annotations

import copy

import pytest

from rankgym.envs.policies import TransformersPolicy

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONV = [
    {"role": "system", "content": "You add numbers."},
    {"role": "user", "content": "What is 2 + 40?"},
]


def _lora(tiny, seed: int = 1):
    """A fresh copy of ``tiny`` with a LoRA on every projection whose B is not zero."""
    import torch
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(copy.deepcopy(tiny), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "gate_proj", "down_proj"]))  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def _sample(model, tokenizer, merge: bool, temperature: float = 0.0, **kw):
    policy = TransformersPolicy(model, tokenizer, name="p", autocast=False, merge_lora=merge,
                                max_new_tokens=8, temperature=temperature, seed=5, **kw)  # fmt: skip
    (gen,) = policy.generate([CONV], [[]])
    return policy, gen


def _state(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_merged_sampling_gives_the_lora_paths_tokens_and_logprobs(tiny, tokenizer, temperature):
    model = _lora(tiny)
    _, want = _sample(model, tokenizer, merge=False, temperature=temperature)
    _, got = _sample(model, tokenizer, merge=True, temperature=temperature)
    assert got.completion_token_ids == want.completion_token_ids
    assert got.completion_logprobs == pytest.approx(want.completion_logprobs, abs=1e-4)
    _, base = _sample(copy.deepcopy(tiny), tokenizer, merge=True, temperature=temperature)
    assert base.completion_token_ids != want.completion_token_ids  # the LoRA does change them


def test_the_base_weights_are_restored_bit_for_bit_and_the_lora_path_is_back(tiny, tokenizer):
    import torch

    model = _lora(tiny)
    ids = torch.tensor([[1, 2, 3, 4]])
    before, out_before = _state(model), model(input_ids=ids).logits
    policy, _ = _sample(model, tokenizer, merge=True)
    assert policy._merged._merged  # it did run merged (and keeps the copies for the next turn)
    after = _state(model)
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(model(input_ids=ids).logits, out_before)  # LoRA on again, same numbers
    policy.drop_kv()
    assert not policy._merged._merged  # dropped with the KV caches


def test_a_changed_lora_is_merged_again(tiny, tokenizer):
    import torch

    model = _lora(tiny)
    policy, first = _sample(model, tokenizer, merge=True)
    with torch.no_grad():  # what an optimizer step does to the LoRA
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.mul_(-3.0)
    (again,) = policy.generate([CONV], [[]])
    _, want = _sample(model, tokenizer, merge=False)
    assert again.completion_token_ids == want.completion_token_ids != first.completion_token_ids


def test_a_named_adapter_is_merged_and_disabled_adapters_merge_nothing(tiny, tokenizer):
    from peft import LoraConfig

    from rankgym.trainer.evaluate import AdapterOffPolicy

    model = _lora(tiny)
    model.add_adapter("other", LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"]))
    _, want = _sample(model, tokenizer, merge=False)  # "default" is the active one
    _, got = _sample(model, tokenizer, merge=True, adapter="default")
    assert got.completion_token_ids == want.completion_token_ids
    policy = TransformersPolicy(model, tokenizer, name="p", autocast=False, max_new_tokens=8,
                                temperature=0.0, seed=5)  # fmt: skip
    (off,) = AdapterOffPolicy(policy).generate([CONV], [[]])
    _, plain = _sample(copy.deepcopy(tiny), tokenizer, merge=False)
    assert off.completion_token_ids == plain.completion_token_ids  # the base model, unmerged
    assert policy._merged._merged == []


def test_merging_is_on_by_default_for_a_model_on_the_cpu(tiny, tokenizer):
    assert TransformersPolicy(tiny, tokenizer).merge_lora is True
    assert TransformersPolicy(tiny, tokenizer, merge_lora=False).merge_lora is False


def test_each_merged_weight_is_its_float64_sum_rounded_once_at_any_thread_count(tiny, tokenizer):
    import torch

    model = _lora(tiny)
    policy, _ = _sample(model, tokenizer, merge=True)
    merged = dict(policy._merged._merged)
    assert merged
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):  # float32's B @ A rounds by thread count; the merge must not
            torch.set_num_threads(n)
            built = dict(policy._merged._build(model))
            for layer, weight in merged.items():
                a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight
                want = layer.base_layer.weight.double() + (b.double() @ a.double()) * layer.scaling["default"]  # fmt: skip
                assert torch.equal(weight, want.to(weight.dtype))
                assert torch.equal(built[layer], weight)
    finally:
        torch.set_num_threads(threads)
