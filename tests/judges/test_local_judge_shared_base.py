"""The local judge on the process-wide base model, beside a trainer's LoRA in the same layers
(issue 23: one base copy per process), with a tiny random Llama saved to disk (fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from judge_fakes import make_group
from model_helpers import random_lora

from rankgym import model as rg_model
from rankgym.judges.local_provider import CONTEXT_WINDOW, LocalJudgeLLM
from rankgym.judges.pair_judge import PAIR_FORMAT, model_scorer, score_pairs
from rankgym.judges.prompt import build_prompt

TARGETS = ["q_proj", "v_proj", "up_proj"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> tuple[Path, Path]:
    """(tiny base model folder, judge adapter folder with its judge_train.json)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    try:
        tok = AutoTokenizer.from_pretrained(rg_model.embedded_model_dir())
    except rg_model.EmbeddedModelMissing as e:
        pytest.skip(str(e))
    root = tmp_path_factory.mktemp("shared-base")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=CONTEXT_WINDOW)  # fmt: skip
    base = root / "base"
    LlamaForCausalLM(cfg).save_pretrained(base)
    tok.save_pretrained(base)
    judge = root / "judge"
    random_lora(LlamaForCausalLM.from_pretrained(base), 4, TARGETS, seed=1).save_pretrained(judge)
    meta = {"pair_format": PAIR_FORMAT, "base": str(base), "config": {"max_line_chars": 200}}
    (judge / "judge_train.json").write_text(json.dumps(meta))
    return base, judge


def _scores(text: str) -> dict[str, float]:
    return {s["trajectory_id"]: s["score"] for s in json.loads(text)["scores"]}


def test_a_named_judge_adapter_scores_as_the_merged_model_did_and_leaves_the_trainer_training(dirs):
    from peft import PeftModel

    base_dir, judge_dir = dirs
    msgs = build_prompt(make_group(3), "Prefer correct answers.").messages
    # today's reference: a fresh base with the adapter merged
    fresh, tok = rg_model.load_causal_lm(str(base_dir))
    merged = PeftModel.from_pretrained(fresh, str(judge_dir)).merge_and_unload().eval()
    want, _ = score_pairs(model_scorer(merged, tok), msgs, ["T1", "T2", "T3"], 200)
    # a trainer's LoRA in the shared base first, then the judge loads its adapter beside it
    shared, _, _ = rg_model.shared_policy_model(str(base_dir), "float32", "cpu")
    trainer = random_lora(shared, 8, TARGETS, seed=2)
    trainable = [n for n, p in trainer.named_parameters() if p.requires_grad]
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        before = trainer(input_ids=ids).logits
    text, _, _ = LocalJudgeLLM("float32").respond(f"smollm2@{judge_dir}", msgs, 256)
    got = _scores(text)
    assert set(got) == {"T1", "T2", "T3"}
    assert all(abs(got[k] - round(want[k], 4)) <= 1e-4 for k in got), (got, want)
    # the trainer's adapter is still the active one, still trainable, and computes as before
    assert [n for n, p in trainer.named_parameters() if p.requires_grad] == trainable
    with torch.no_grad():
        assert torch.equal(trainer(input_ids=ids).logits, before)
    assert not any("judge-" in n for n, p in trainer.named_parameters() if p.requires_grad)


def test_the_yes_no_reader_ignores_a_trainer_lora_in_its_base(dirs):
    base_dir, _ = dirs
    lm, tok = rg_model.load_causal_lm(str(base_dir))

    class OnBase(LocalJudgeLLM):
        def _model(self, model: str):
            return lm, tok

    msgs = build_prompt(make_group(3), "Prefer correct answers.").messages
    judge = OnBase("float32")
    plain = judge.respond("smollm2-yesno", msgs, 256)[0]
    trainer = random_lora(lm, 8, TARGETS, seed=3)
    trainer.train()  # as between two GRPO updates' forward passes: the judge must not care
    assert judge.respond("smollm2-yesno", msgs, 256)[0] == plain
    with torch.no_grad():  # the LoRA really changes the base's outputs when it is on
        on = lm(input_ids=torch.tensor([[5, 6, 7]])).logits
        with rg_model.using_adapter(lm, rg_model.OFF):
            off = lm(input_ids=torch.tensor([[5, 6, 7]])).logits
    assert not torch.allclose(on, off)


def test_a_trainer_takes_the_shared_base_once_and_a_fresh_copy_after(monkeypatch):
    calls: list[str] = []

    class Base(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_proj = torch.nn.Linear(4, 4)

    shared = Base()
    monkeypatch.setattr(rg_model, "shared_policy_model", lambda *a: (shared, "tok", "embedded"))
    monkeypatch.setattr(
        rg_model, "load_policy_model", lambda *a: (calls.append("fresh") or Base(), "tok", "x")
    )
    assert rg_model.training_base("embedded", "bfloat16", "cpu")[0] is shared
    _lora_on = __import__("peft").inject_adapter_in_model
    from peft import LoraConfig

    _lora_on(LoraConfig(r=2, target_modules=["q_proj"]), shared)
    assert rg_model.has_adapter_layers(shared)
    assert rg_model.training_base("embedded", "bfloat16", "cpu")[0] is not shared
    assert rg_model.training_base("/some/folder", "bfloat16", "cpu")[0] is not shared
    assert calls == ["fresh", "fresh"]
