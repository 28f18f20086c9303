"""A local judge's adapter loaded beside the policy's LoRA: a checkpoint and a vLLM step hold
the policy's adapter only, and a judge adapter on some layers runs beside a LoRA on all."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_checkpoint_saves_the_policys_adapter_not_a_local_judges_loaded_beside_it(tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from trainer_helpers import tiny_model

    from rankgym.trainer import checkpoint as ckpt

    model, _ = tiny_model()
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    peft = get_peft_model(model, lora)
    peft.add_adapter("judge-abc123", lora)  # what the local judge loads into the shared base
    peft.add_adapter(
        "adapter-0123abcd", lora
    )  # the SFT policy the stage rolls out (adapter_on_base)
    peft.add_adapter("scratch", lora)  # any other adapter without a trainable weight
    for n, p in peft.named_parameters():
        p.requires_grad_(".default." in n)
    opt = torch.optim.AdamW([p for p in peft.parameters() if p.requires_grad], lr=1e-3)
    path = ckpt.save_checkpoint(tmp_path, 1, peft, opt, None, {})
    assert (path / "adapter_config.json").is_file()
    assert [p.name for p in path.iterdir() if p.is_dir()] == []
    assert ckpt.training_adapters(peft) == ["default"]


def test_a_step_published_to_vllm_holds_the_policys_adapter_not_a_judges_beside_it(tmp_path):
    from types import SimpleNamespace

    from peft import LoraConfig, get_peft_model
    from trainer_helpers import tiny_model

    from rankgym.trainer.adapter_sync import AdapterSync

    model, _ = tiny_model()
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    peft = get_peft_model(model, lora)
    peft.add_adapter("judge-abc123", lora)  # a local judge in the shared base
    for n, p in peft.named_parameters():
        p.requires_grad_(".default." in n)
    loaded: list[tuple[str, Path]] = []
    sync = AdapterSync.__new__(AdapterSync)  # no server: only the save and the load request
    sync.run_id, sync.dir, sync.model = "run", tmp_path, peft
    sync.current = sync.current_dir = None
    sync.section = SimpleNamespace(verify=False)
    sync.policy = SimpleNamespace(model=None)
    sync.client = SimpleNamespace(load_lora=lambda name, path: loaded.append((name, path)))
    sync.publish(1)
    ((name, path),) = loaded
    assert name == "run@step1" and (path / "adapter_model.safetensors").is_file()
    assert [p.name for p in path.iterdir() if p.is_dir()] == []  # no judge-abc123/ beside it


def test_a_judge_adapter_on_some_layers_runs_beside_a_trainers_lora_on_all_of_them():
    from peft import LoraConfig, get_peft_model
    from peft.tuners.tuners_utils import BaseTunerLayer
    from trainer_helpers import tiny_model

    from rankgym.model import using_adapter

    model, _ = tiny_model()
    peft = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    judge = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], layers_to_transform=[1])
    peft.add_adapter("judge-abc", judge)  # a judge LoRA on the last layer only (--lora-layers)
    layers = [m for m in peft.modules() if isinstance(m, BaseTunerLayer)]
    with using_adapter(peft, "judge-abc"):  # used to raise "not loaded into this model"
        on = [(m.disable_adapters, list(m.active_adapters)) for m in layers]
    assert on == [(True, ["default"]), (False, ["judge-abc"])]  # layer 0: base weights only
    assert [(m.disable_adapters, list(m.active_adapters)) for m in layers] == [(False, ["default"])] * 2  # fmt: skip
    with pytest.raises(KeyError, match="not loaded"), using_adapter(peft, "judge-missing"):
        pass
