"""One base model, several adapters: rankgym.model.load_named_adapter / using_adapter."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from peft import PeftModel

sys.path.insert(0, str(Path(__file__).parents[1] / "trainer"))
from model_helpers import random_lora  # noqa: E402
from trainer_helpers import tiny_model  # noqa: E402

from rankgym.envs.policies import TransformersPolicy  # noqa: E402
from rankgym.model import OFF, load_named_adapter, using_adapter  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")
IDS = torch.tensor([[5, 17, 300, 42, 9, 1000, 77]])


def _save_adapter(path: Path, seed: int) -> Path:
    model, _ = tiny_model()
    random_lora(model, 4, ["q_proj", "v_proj"], seed=seed).save_pretrained(path)
    return path


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


def _alone(adapter: Path | None) -> torch.Tensor:
    model, _ = tiny_model()
    return _logits(PeftModel.from_pretrained(model, str(adapter)) if adapter else model)


def test_named_adapters_on_one_base_give_the_outputs_of_separately_loaded_models(tmp_path):
    a, b = _save_adapter(tmp_path / "a", 1), _save_adapter(tmp_path / "b", 2)
    base, _ = tiny_model()
    model = load_named_adapter(base, a, "a")
    assert load_named_adapter(model, b, "b") is model  # the same model, no second base copy
    assert model.active_adapter == "a"  # loading does not switch
    for name, want in (("a", _alone(a)), ("b", _alone(b)), (OFF, _alone(None))):
        with using_adapter(model, name):
            assert torch.allclose(_logits(model), want, atol=1e-6), name
    assert torch.allclose(_logits(model), _alone(a), atol=1e-6)  # restored after the block
    with using_adapter(base, OFF):  # the bare base (peft layers injected into it) as well
        assert torch.allclose(_logits(base), _alone(None), atol=1e-6)
    with pytest.raises(KeyError, match="'c' is not loaded"), using_adapter(model, "c"):
        pass
    assert torch.allclose(_logits(model), _alone(a), atol=1e-6)
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        load_named_adapter(model, tmp_path, "none")


def test_a_policy_with_a_named_adapter_samples_what_a_separate_model_samples(tmp_path):
    a, b = _save_adapter(tmp_path / "a", 1), _save_adapter(tmp_path / "b", 2)
    base, tok = tiny_model()
    model = load_named_adapter(load_named_adapter(base, a, "a"), b, "b")
    msgs = [[{"role": "user", "content": "What is 2 + 3?"}]] * 2
    kw = {"max_new_tokens": 8, "temperature": 0.0, "seed": 0}
    for name, path in (("b", b), ("a", a)):
        shared = TransformersPolicy(model, tok, adapter=name, **kw).generate(msgs, [[], []])
        m2, _ = tiny_model()
        alone = TransformersPolicy(PeftModel.from_pretrained(m2, str(path)), tok, **kw)
        want = alone.generate(msgs, [[], []])
        assert [g.completion_token_ids for g in shared] == [g.completion_token_ids for g in want]
    assert model.active_adapter == "a"


def test_a_named_adapter_policy_inside_disable_adapter_samples_the_base_model(tmp_path):
    from rankgym.trainer.evaluate import AdapterOffPolicy

    a = _save_adapter(tmp_path / "a", 1)
    base, tok = tiny_model()
    model = load_named_adapter(base, a, "a")
    msgs = [[{"role": "user", "content": "What is 2 + 3?"}]] * 2
    kw = {"max_new_tokens": 8, "temperature": 0.0, "seed": 0}
    policy = TransformersPolicy(model, tok, adapter="a", **kw)
    off = AdapterOffPolicy(policy, "base").generate(msgs, [[], []])
    plain, _ = tiny_model()
    want = TransformersPolicy(plain, tok, **kw).generate(msgs, [[], []])
    assert [g.completion_token_ids for g in off] == [g.completion_token_ids for g in want]
    on = policy.generate(msgs, [[], []])
    assert [g.completion_token_ids for g in on] != [g.completion_token_ids for g in off]


def test_loading_an_adapter_into_a_checkpointed_trainer_model_says_nothing_deprecated(tmp_path):
    import warnings

    from rankgym.model import enable_checkpointing

    a = _save_adapter(tmp_path / "a", 1)
    base, _ = tiny_model()  # the process-wide base a trainer wraps and a judge shares
    enable_checkpointing(random_lora(base, 4, ["q_proj", "v_proj"], seed=3))  # `rankgym train`
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        model = load_named_adapter(base, a, "judge")
    assert "judge" in model.peft_config
