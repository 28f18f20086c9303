"""TRL's GRPOTrainer on a rankgym env, the rankgym group judge as reward (docs/integrations.md).

CPU, offline, the embedded SmolLM2-135M as both policy and judge (weak: this shows the
plumbing, not a good judge; pass --judge openai/gpt-4.1-mini or any LiteLLM model):

    .venv/bin/python samples/integrations/trl_grpo.py --steps 2 --store /tmp/trl.db
    accelerate launch --config_file samples/accelerate-cpu-2proc.yaml \\
        samples/integrations/trl_grpo.py --steps 2 --store /tmp/trl2.db
    rankgym dashboard --store /tmp/trl.db
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--env", default="rankgym/ToolUse-v0")
    ap.add_argument("--judge", default="local/smollm2")
    ap.add_argument("--store", default="trl.db")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--verifier-weight", type=float, default=0.5)
    ap.add_argument("--out", default="trl-out")
    args = ap.parse_args()

    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from rankgym.integrations.trl import (
        EnvVerifierReward,
        GroupJudgeReward,
        tool_chat_template,
        trl_dataset,
        trl_environment,
    )
    from rankgym.model import load_embedded

    model, tok = load_embedded("float32")
    tok = tool_chat_template(tok)  # SmolLM2's own template cannot render tool calls
    kwargs = {"difficulty": "easy"}
    judge = GroupJudgeReward(args.judge, store=args.store, num_generations=args.generations,
                             verifier_weight=args.verifier_weight)  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        processing_class=tok,
        reward_funcs=[judge, EnvVerifierReward()],
        train_dataset=trl_dataset(args.env, **kwargs),
        environment_factory=trl_environment(args.env, **kwargs),
        peft_config=LoraConfig(
            r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"
        ),  # fmt: skip
        args=GRPOConfig(
            output_dir=args.out,
            max_steps=args.steps,
            num_generations=args.generations,
            per_device_train_batch_size=args.generations,
            max_completion_length=96,
            max_tool_calling_iterations=3,
            use_cpu=True,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            reward_weights=[1.0, 0.0],  # the verifier column is logged only
        ),  # fmt: skip
    )
    trainer.train()
    judge.close()
    print(f"run {judge.run_id}: groups and scores in {args.store}; rankgym dashboard --store {args.store}")  # fmt: skip


if __name__ == "__main__":
    main()
