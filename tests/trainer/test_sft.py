"""SFT warm start: sources, rendering identical to the rollout, training, and GRPO continuing from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from trainer_helpers import install_fake_judge, save_tiny_model, tiny_config, tiny_model, to_toml

from rankgym.cli import main
from rankgym.config import validate_config
from rankgym.envs.policies import TransformersPolicy, assistant_message
from rankgym.envs.policies.scripted import OraclePolicy
from rankgym.envs.rollout import rollout_to_store
from rankgym.errors import UserError
from rankgym.store import Store
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.context import TrainingContext
from rankgym.trainer.setup import make_env_factory
from rankgym.trainer.sft import (
    jsonl_conversations,
    oracle_conversations,
    render_rows,
    sft_train,
    store_conversations,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
HARD = {"difficulty": "hard", "families": ["lookup"]}


def test_oracle_demonstrations_cover_train_and_judge_split_and_never_test():
    make_env = make_env_factory("rankgym/ToolUse-v0", HARD)
    train = {t.id for t in make_env().tasks("train")}
    judge = {t.id for t in make_env().tasks("judge")}
    test = {t.id for t in make_env().tasks("test")}
    assert judge and not judge & train
    convs = oracle_conversations(make_env, judge_split=True)
    assert {c.source.split(":", 1)[1] for c in convs} == train | judge  # every one succeeded
    assert len(convs) == len(train | judge) and not {c.source[7:] for c in convs} & test
    assert all(c.tools and c.messages[-1]["role"] == "assistant" for c in convs)
    # by default SFT, like GRPO, leaves the judge split out
    kept = oracle_conversations(make_env)
    assert {c.source.split(":", 1)[1] for c in kept} == train


def test_demonstrations_are_rendered_exactly_as_the_rollout_renders_them():
    model, tok = tiny_model()
    policy = TransformersPolicy(model, tok)
    (conv,) = oracle_conversations(make_env_factory("rankgym/ToolUse-v0", HARD), n_tasks=1)
    turns = policy.demonstration(conv.messages, conv.tools)
    assistant_at = [i for i, m in enumerate(conv.messages) if m["role"] == "assistant"]
    assert [t.message_index for t in turns] == assistant_at
    for t in turns:
        prompt, _ = policy.encode(conv.messages[: t.message_index], conv.tools)
        assert t.prompt_token_ids == prompt  # the very prompt the policy samples from
        assert t.completion_token_ids[-1] in policy.eos_ids  # the model learns to stop
        text = tok.decode(t.completion_token_ids, skip_special_tokens=True)
        parsed, want = assistant_message(text), conv.messages[t.message_index]
        if want.get("tool_calls"):  # parsed back into the same call by the rollout's parser
            got = parsed["tool_calls"][0]["function"]
            exp = want["tool_calls"][0]["function"]
            assert got["name"] == exp["name"]
            assert json.loads(got["arguments"]) == json.loads(exp["arguments"])
        else:
            assert parsed["content"] == want["content"]


def test_sft_lowers_the_loss_on_assistant_tokens():
    from peft import LoraConfig, get_peft_model

    model, tok = tiny_model(seed=2)
    convs = oracle_conversations(make_env_factory("rankgym/ToolUse-v0", HARD), n_tasks=4)
    rows = render_rows(TransformersPolicy(model, tok), convs)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM")  # fmt: skip
    peft_model = get_peft_model(model, lora)
    st = sft_train(peft_model, rows, pad_id=tok.pad_token_id, steps=12, lr=5e-3, batch_size=4)
    assert st.steps == 12 and st.loss_last < st.loss_first
    assert 0 < st.assistant_tokens < st.tokens and not peft_model.training


def test_store_selection_by_verifier_or_judge_never_uses_the_test_split(tmp_path: Path):
    make_env = make_env_factory("rankgym/ToolUse-v0", HARD)
    path = tmp_path / "s.db"
    with Store(path) as store:
        for split in ("train", "test"):
            rollout_to_store(store, make_env, OraclePolicy(), run_id=split, config={}, n_tasks=3, group_size=1, split=split)  # fmt: skip
    convs = store_conversations(path, make_env, select="verifier")
    test_ids = {t.id for t in make_env().tasks("test")}
    assert len(convs) == 3 and all(c.tools for c in convs)
    with Store(path, readonly=True) as store:
        tasks = {store.get_group(g).task_id for g in store.group_ids()}
    assert tasks & test_ids  # the store has test episodes, and they were skipped
    with pytest.raises(UserError, match="select = 'judge'"):
        store_conversations(path, make_env, select="judge")  # nothing judged yet


def test_jsonl_examples_in_art_format(tmp_path: Path):
    good = {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4"},
        ],
        "tools": [],
    }
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps(good) + "\n\n" + json.dumps({"messages": good["messages"]}) + "\n")
    assert len(jsonl_conversations(f)) == 2
    f.write_text(json.dumps(good) + "\n{oops\n")
    with pytest.raises(UserError, match=r"d.jsonl:2"):
        jsonl_conversations(f)
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(UserError, match="no assistant message"):
        jsonl_conversations(f)


def test_sft_command_writes_an_adapter_and_train_continues_from_its_sft_stage(
    tmp_path: Path, capsys
):
    model_dir = save_tiny_model(tmp_path / "tiny")
    install_fake_judge()
    cfg = tiny_config(model_dir, tmp_path / "ignored", steps=1)
    cfg["env"]["kwargs"] = HARD
    cfg["env"]["max_turns"] = 4
    cfg["sft"] = {"steps": 3, "batch_size": 2, "tasks": 4}
    toml = tmp_path / "t.toml"
    toml.write_text(to_toml(cfg))
    out = tmp_path / "sft"
    assert (
        main(["sft", "--config", str(toml), "--out", str(out), "--steps", "2", "--json", "-q"]) == 0
    )
    s = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert s["steps"] == 2 and s["conversations"] == 4 and (out / "adapter_config.json").is_file()
    assert json.loads((out / "meta.json").read_text())["env"]["kwargs"] == HARD

    from rankgym.trainer.loop import Trainer

    t = Trainer(validate_config(cfg, TrainConfig), out_dir=str(tmp_path / "run"), progress=False)
    t.setup()
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file

    saved = load_file(str(tmp_path / "run" / "sft" / "adapter_model.safetensors"))
    live = get_peft_model_state_dict(t.model)
    assert saved and all(torch.equal(live[k], v) for k, v in saved.items())  # GRPO starts here
    t.store.close()


def test_a_resumed_run_reuses_the_sft_adapter_instead_of_training_again(tmp_path: Path):
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict

    from rankgym.trainer.sft import warm_start

    def lora_model():
        model, tok = tiny_model(seed=3)
        cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")  # fmt: skip
        return get_peft_model(model, cfg), tok

    cfg = validate_config(
        {"env": {"kwargs": HARD}, "sft": {"steps": 2, "batch_size": 2, "tasks": 2}}, TrainConfig
    )
    model, tok = lora_model()
    first = warm_start(cfg, _context(model, tok), tmp_path / "sft", reuse=True, load=True)
    assert first["steps"] == 2
    again, tok = lora_model()  # a fresh process: LoRA B starts at zero
    second = warm_start(cfg, _context(again, tok), tmp_path / "sft", reuse=True, load=True)
    assert second == first
    a, b = get_peft_model_state_dict(model), get_peft_model_state_dict(again)
    assert all(torch.equal(a[k], b[k]) for k in a)


def _context(model: Any, tok: Any) -> TrainingContext:
    return TrainingContext(model, tok, "tiny", Path("tiny"), "cpu", "float32", bf16=False)
