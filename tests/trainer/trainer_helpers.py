"""Helpers for the trainer tests: a tiny random Llama and a deterministic LiteLLM judge.

The judge is a real ``litellm.CustomLLM`` under the provider name ``trainerfake``: the judge
code path (prompt, litellm.acompletion, parsing, store) is the production one; only the model
is replaced by a deterministic function of each trajectory's text.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

TINY = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
}


def tiny_model(seed: int = 0) -> tuple[Any, Any]:
    """A randomly initialised 2-layer Llama with the embedded model's tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from rankgym.model import embedded_model_dir

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    cfg = LlamaConfig(
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        **TINY,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    model.eval()
    return model, tok


def save_tiny_model(path: Path, seed: int = 0) -> Path:
    model, tok = tiny_model(seed)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


_BLOCK = re.compile(r'<trajectory id="(T\d+)">(.*?)</trajectory>', re.DOTALL)


def fake_scores(text: str) -> dict[str, float]:
    """Deterministic scores in [0, 1] from each trajectory block's content."""
    out = {}
    for label, body in _BLOCK.findall(text):
        h = hashlib.sha256(body.encode()).digest()
        out[label] = h[0] / 255
    return out


def install_fake_judge() -> None:
    """Register the ``trainerfake/`` LiteLLM provider (idempotent)."""
    from fakes import ScriptedLLM, register

    from rankgym.judges.prompt import parse_ids_line

    class FakeJudge(ScriptedLLM):
        provider = "trainerfake"

        def reply(self, messages: list[dict[str, Any]]) -> str:
            text = "\n".join(str(m.get("content") or "") for m in messages)
            labels = parse_ids_line(text) or []
            found = fake_scores(text)
            scores = [
                {"trajectory_id": lab, "score": found.get(lab, 0.5), "rationale": "fake"}
                for lab in labels
            ]
            return json.dumps({"scores": scores})

    register(FakeJudge())


def tiny_config(model_dir: Path, out_dir: Path, steps: int = 3, **over: Any) -> dict[str, Any]:
    """A train config dict for the tiny model on easy calc tasks with the fake judge."""
    cfg: dict[str, Any] = {
        "name": "tiny",
        "seed": 7,
        "steps": steps,
        "out_dir": str(out_dir),
        "env": {
            "id": "rankgym/ToolUse-v0",
            "kwargs": {"difficulty": "easy", "families": ["calc"]},
            "tasks_per_step": 2,
            "group_size": 3,
            "max_turns": 2,
        },
        "policy": {"model": str(model_dir), "max_new_tokens": 6},
        "lora": {"r": 4, "alpha": 8},
        "judge": {"model": "trainerfake/hash", "check_groups": 0},  # no preflight judge-check
        "optim": {"lr": 5e-3, "micro_batch_size": 2, "bf16": "off"},
    }
    for k, v in over.items():
        if isinstance(v, dict):
            cfg.setdefault(k, {}).update(v)
        else:
            cfg[k] = v
    return cfg


def to_toml(d: dict[str, Any]) -> str:
    """Minimal TOML writer for the config dicts above (tables one level deep)."""

    def val(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + "}"
        return repr(v)

    top = [f"{k} = {val(v)}" for k, v in d.items() if not isinstance(v, dict)]
    tables = [
        f"\n[{k}]\n" + "\n".join(f"{kk} = {val(vv)}" for kk, vv in v.items())
        for k, v in d.items()
        if isinstance(v, dict)
    ]
    return "\n".join(top) + "\n" + "\n".join(tables) + "\n"


def tie_pair() -> Any:
    """A verifier-tied pair of two different answers to one task (a ``PairItem`` with
    ``tie=True``): a long hedged reply against a bare wrong one, both reward 0."""
    from rankgym.judges.judge_data import PairItem
    from rankgym.types import Message, Trajectory

    def traj(text: str) -> Trajectory:
        return Trajectory(env_id="e/Env-v0", task_id="q", verifiable_reward=0.0, messages=[
            Message(role="user", content="What is 2+2?"), Message(role="assistant", content=text)])  # fmt: skip

    return PairItem("e/Env-v0", "q", traj("it is 4, I checked twice"), traj("5"), "verifier", "s",
                    0.0, tie=True)  # fmt: skip


def labelled_store(path: Path, n: int = 12) -> Path:
    """Tasks whose verifier tells a right answer from a wrong one (the tiny policy solves none),
    for a ``[judge_train]`` stage's ``stores``: it then has pairs to train and check on."""
    from rankgym.store import Store
    from rankgym.types import Group, Message, Trajectory

    def traj(task: str, text: str, reward: float) -> Trajectory:
        return Trajectory(env_id="e/Env-v0", task_id=task, verifiable_reward=reward, messages=[
            Message(role="user", content=f"What is {task}?"),
            Message(role="assistant", content=text)])  # fmt: skip

    with Store(path) as s:
        for k in range(n):
            bad = "no" if k % 2 else "a long wrong and rambling answer"  # length says nothing
            s.put_group(Group(env_id="e/Env-v0", task_id=f"q{k}", trajectories=[
                traj(f"q{k}", f"the answer is {k}", 1.0), traj(f"q{k}", bad, 0.0)]))  # fmt: skip
    return path


def runs_page(store: Path, monkeypatch: Any) -> Any:
    """The dashboard's app run once (``AppTest``) on ``store``, which has one run: its Runs page,
    checked to have raised nothing."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RANKGYM_STORE", str(store))
    app = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
    at = AppTest.from_file(str(app), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at
