"""A 2-step ``trl.GRPOTrainer`` run on a tiny random model with the rankgym judge as reward.

Used by tests/integrations/test_integrations.py, in process and under ``accelerate launch``
(``python trl_run.py MODEL_DIR STORE OUT_DIR [--per-device N]``). The judge is the tests'
scripted LiteLLM provider ``trainerfake/hash`` (a real ``litellm.CustomLLM``); the trainer,
env, reward function and store are the real ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "trainer"), str(HERE.parent)]  # trainer_helpers, fakes


def hide_tests_vllm() -> None:
    """tests/vllm (a folder on sys.path here) looks like a namespace package ``vllm`` to TRL's
    ``is_vllm_available``, which then fails on its version; no real vLLM is in this venv."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin in (None, "namespace"):
        sys.modules["vllm"] = None  # type: ignore[assignment]


hide_tests_vllm()

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ENV_ID = "rankgym/ToolUse-v0"
ENV_KWARGS = {"difficulty": "easy", "families": ["calc"]}


def run(model_dir: str, store: str, out: str, per_device: int = 4, steps: int = 2) -> dict:
    """Train ``steps`` GRPO steps; returns what the reward saw (rank 0 writes the store)."""
    import torch
    from trainer_helpers import install_fake_judge
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rankgym.integrations.trl import (
        EnvVerifierReward,
        GroupJudgeReward,
        tool_chat_template,
        trl_dataset,
        trl_environment,
    )

    torch.manual_seed(0)
    install_fake_judge()
    tok = tool_chat_template(AutoTokenizer.from_pretrained(model_dir))
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    judge = GroupJudgeReward("trainerfake/hash", store=store, run_id="trl-tiny",
                             num_generations=4, permutations=2, verifier_weight=0.5)  # fmt: skip
    cfg = GRPOConfig(
        output_dir=out, per_device_train_batch_size=per_device, num_generations=4,
        max_completion_length=12, max_steps=steps, learning_rate=1e-4, logging_steps=1,
        report_to=[], save_strategy="no", use_cpu=True, bf16=False, seed=0,
        max_tool_calling_iterations=2, temperature=1.0, reward_weights=[1.0, 0.0],
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, processing_class=tok, args=cfg,
        train_dataset=trl_dataset(ENV_ID, limit=8, **ENV_KWARGS),
        reward_funcs=[judge, EnvVerifierReward()],
        environment_factory=trl_environment(ENV_ID, **ENV_KWARGS),
    )  # fmt: skip
    trainer.train()
    judge.close()
    return {"calls": judge.calls, "global_step": trainer.state.global_step}


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("store")
    p.add_argument("out")
    p.add_argument("--per-device", type=int, default=4)
    a = p.parse_args()
    result = run(a.model_dir, a.store, a.out, a.per_device)
    rank = int(os.environ.get("RANK", "0"))
    Path(a.out, f"result{rank}.json").write_text(json.dumps(result))
    import torch.distributed as td

    if td.is_initialized():  # a gloo group alive at interpreter teardown can SIGABRT the rank
        td.destroy_process_group()
