"""Evaluation contexts over the embedded model share the process-wide base copy (issue 23) and
are the same model as a fresh copy with the adapter: the same greedy tokens, log-probs to 1e-2
(tiny model standing in for it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from model_helpers import random_lora
from trainer_helpers import save_tiny_model

from rankgym import model as rg_model
from rankgym.envs.policies import TransformersPolicy
from rankgym.trainer.context import TrainingContext

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _adapter(base: Path, out: Path, seed: int) -> Path:
    model, _ = rg_model.load_causal_lm(str(base))
    random_lora(model, 4, ["q_proj", "v_proj"], seed=seed).save_pretrained(out)
    return out


def _generate(policy: TransformersPolicy) -> tuple[list[list[int]], list[list[float]]]:
    msgs = [[{"role": "user", "content": f"Say something about {w}."}] for w in ("cats", "tea")]
    gens = policy.generate(msgs, [[], []])
    return [g.completion_token_ids for g in gens], [g.completion_logprobs for g in gens]


def _sample(policy: TransformersPolicy) -> list[list[int]]:
    return _generate(policy)[0]  # the token ids, at whatever temperature the policy samples


def test_two_adapters_over_the_embedded_base_share_it_and_sample_as_fresh_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from peft import PeftModel

    base = save_tiny_model(tmp_path / "base")
    a1, a2 = _adapter(base, tmp_path / "a1", 1), _adapter(base, tmp_path / "a2", 2)
    shared = rg_model.load_causal_lm(str(base))
    monkeypatch.setattr(rg_model, "embedded_model_dir", lambda: base)
    monkeypatch.setattr(rg_model, "shared_embedded", lambda dtype="bfloat16": shared)
    # greedy: the tiny random model's next-token distribution is nearly flat over 49,152 tokens,
    # so a seeded inverse-CDF draw moves to a neighbouring token on a 1e-7 difference in the
    # probabilities, and the two paths round differently (log-probs up to 2e-3 apart); what is
    # compared is the model: its greedy tokens, and its log-probs to 1e-2
    ctx1 = TrainingContext.from_adapter(a1, max_new_tokens=6, temperature=0.0, seed=3)
    ctx2 = TrainingContext.from_adapter(a2, max_new_tokens=6, temperature=0.0, seed=3)
    assert ctx1.model.get_base_model() is ctx2.model.get_base_model() is shared[0]
    assert ctx1.adapter_name and ctx2.adapter_name and ctx1.adapter_name != ctx2.adapter_name
    got1, got2 = _generate(ctx1.policy("p1")), _generate(ctx2.policy("p2"))
    for adapter, (ids, logprobs) in ((a1, got1), (a2, got2)):  # the same model as before sharing
        fresh, tok = rg_model.load_causal_lm(str(base))
        own = PeftModel.from_pretrained(fresh, str(adapter)).eval()
        alone = TransformersPolicy(own, tok, max_new_tokens=6, temperature=0.0, seed=3)
        want_ids, want_logprobs = _generate(alone)
        assert want_ids == ids
        for want_row, row in zip(want_logprobs, logprobs, strict=True):  # measured: <= 2e-3
            assert want_row == pytest.approx(row, abs=1e-2)
    assert got1[0] != got2[0]  # the two adapters really differ


def test_the_embedded_policy_samples_the_base_alone_after_adapters_were_loaded_into_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from rankgym.envs.policies import make_policy

    base = save_tiny_model(tmp_path / "base")
    shared = rg_model.load_causal_lm(str(base))
    fresh, tok = rg_model.load_causal_lm(str(base))
    want = _sample(TransformersPolicy(fresh, tok, max_new_tokens=6, temperature=0.7, seed=3))
    monkeypatch.setattr(rg_model, "embedded_model_dir", lambda: base)
    monkeypatch.setattr(rg_model, "shared_embedded", lambda dtype="bfloat16": shared)
    monkeypatch.setattr("rankgym.envs.policies.specs.shared_embedded", lambda dtype: shared)
    ctx = TrainingContext.from_adapter(_adapter(base, tmp_path / "a", 1), max_new_tokens=6,
                                       temperature=0.7, seed=3)  # fmt: skip
    assert ctx.model.get_base_model() is shared[0]  # its adapter now lives in the shared base
    got = _sample(make_policy("embedded", max_new_tokens=6, temperature=0.7, seed=3))
    assert got == want
    assert _sample(ctx.policy("p")) != want  # the adapter loaded into that base really differs
