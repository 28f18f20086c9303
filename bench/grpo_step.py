"""GRPO update throughput: rankgym's `grpo_update` vs TRL's `GRPOTrainer`, same model and batch.

Both sides train a LoRA (same rank, alpha, target modules) on SmolLM2-135M-Instruct (embedded)
with the same optimizer (AdamW, same lr), bf16 autocast, micro-batch size, accumulation,
loss type, epsilon and beta. TRL generates its own completions; we time its whole optimizer step
(callback ``on_step_begin`` -> ``on_step_end``) minus the time it spent generating and scoring,
and we record the exact token batches (prompt + completion ids, advantages) it trained on. Our
update then runs on those same batches. Throughput = non-pad tokens (prompt + completion) of the
step's batch / update seconds; the first step of each side is warm-up and not counted.

Run (about 4-6 minutes on 2 CPU cores):
    HF_HUB_OFFLINE=1 RANKGYM_CACHE=/tmp/rgcache .venv/bin/python bench/grpo_step.py --steps 4
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

AUTOCAST: dict[str, bool] = {}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
WORDS = (
    "river stone market window garden letter silver engine violin puzzle forest bridge candle "
    "planet rocket orange basket mirror ladder rabbit tunnel wallet anchor bottle cactus"
).split()


def prompts(n: int, words: int, seed: int) -> list[list[dict[str, str]]]:
    r = random.Random(seed)
    out = []
    for i in range(n):
        text = " ".join(r.choice(WORDS) for _ in range(words))
        out.append([{"role": "user", "content": f"Task {i}: summarise this list. {text}"}])
    return out


def run_trl(args: argparse.Namespace) -> tuple[list[float], list[int], list[dict]]:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rankgym.model import load_embedded

    model, tok = load_embedded(args.dtype)
    n_prompts = (args.steps + 1) * args.batch // args.group
    ds = Dataset.from_list([{"prompt": p} for p in prompts(n_prompts, args.prompt_words, 0)])
    gen = torch.Generator().manual_seed(0)

    def reward(completions, **kw):  # deterministic, non-constant: every group has signal
        return torch.rand(len(completions), generator=gen).tolist()

    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-bench-"),
        per_device_train_batch_size=args.micro,
        gradient_accumulation_steps=args.batch // args.micro,
        num_generations=args.group,
        max_completion_length=args.completion,
        max_steps=args.steps + 1,
        learning_rate=args.lr,
        loss_type=args.loss,
        beta=args.beta,
        epsilon=0.2,
        bf16=True,
        use_cpu=True,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        shuffle_dataset=False,
        seed=0,
        max_grad_norm=1.0,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        adam_beta2=0.99,
        generation_kwargs={"min_new_tokens": args.completion},
        dataloader_num_workers=0,
    )
    lora = LoraConfig(
        r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM"
    )
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=ds,
                          processing_class=tok, peft_config=lora)  # fmt: skip
    gen_time = [0.0]
    batches: list[dict] = []
    orig = trainer._generate_and_score_completions

    def timed(inputs):
        t = time.perf_counter()
        out = orig(inputs)
        gen_time[0] += time.perf_counter() - t
        batches.append({k: v.detach().clone() for k, v in out.items() if k in KEEP})
        return out

    KEEP = {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages"}
    trainer._generate_and_score_completions = timed
    update_s: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            gen_time[0] = 0.0
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            update_s.append(time.perf_counter() - self.t0 - gen_time[0])

    trainer.add_callback(Timer())
    seen_autocast: list[bool] = []
    hook = trainer.model.register_forward_pre_hook(
        lambda m, a: seen_autocast.append(
            torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled()
        )
    )
    trainer.train()
    hook.remove()
    AUTOCAST["trl"] = any(seen_autocast)
    tokens = []
    per_step = []
    for b in batches:  # one generation batch per optimizer step (steps_per_generation = GA)
        per_step.append(b)
        tokens.append(int(b["prompt_mask"].sum() + b["completion_mask"].sum()))
    return update_s, tokens, per_step


def run_ours(args: argparse.Namespace, batches: list[dict]) -> list[float]:
    from peft import LoraConfig, get_peft_model

    from rankgym.model import load_embedded
    from rankgym.trainer.grpo import LossSettings, Sample, UpdateSettings, grpo_update

    model, tok = load_embedded(args.dtype)
    torch.manual_seed(0)
    lora = LoraConfig(
        r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM"
    )
    model = get_peft_model(model, lora)
    opt = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=args.lr,
        betas=(0.9, 0.99),
        weight_decay=0.0,
    )
    s = UpdateSettings(
        loss=LossSettings(
            loss_type=args.loss, beta=args.beta, max_completion_length=args.completion
        ),
        micro_batch_size=args.micro,
        bf16=True,
    )
    times = []
    for b in batches:
        samples = []
        for i in range(b["prompt_ids"].shape[0]):
            p = b["prompt_ids"][i][b["prompt_mask"][i].bool()].tolist()
            c = b["completion_ids"][i][b["completion_mask"][i].bool()].tolist()
            samples.append(
                Sample(
                    rows=[(p + c, [0] * len(p) + [1] * len(c))], advantage=float(b["advantages"][i])
                )
            )
        st = grpo_update(model, opt, samples, s, pad_id=tok.pad_token_id)
        times.append(st.seconds)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=4, help="timed steps (plus one warm-up)")
    ap.add_argument("--batch", type=int, default=8, help="completions per optimizer step")
    ap.add_argument("--group", type=int, default=4, help="completions per prompt")
    ap.add_argument("--micro", type=int, default=4, help="micro-batch size")
    ap.add_argument("--completion", type=int, default=64)
    ap.add_argument("--prompt-words", type=int, default=120)
    ap.add_argument("--loss", default="dapo", choices=["grpo", "dr_grpo", "dapo"])
    ap.add_argument("--beta", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="base weights (both sides)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    trl_s, tokens, batches = run_trl(args)
    ours_s = run_ours(args, batches)
    n = min(len(trl_s), len(ours_s), len(tokens))
    trl_tps = [tokens[i] / trl_s[i] for i in range(1, n)]
    our_tps = [tokens[i] / ours_s[i] for i in range(1, n)]
    out = {
        "settings": vars(args),
        "tokens_per_step": tokens[1:n],
        "trl_saw_bf16_autocast": AUTOCAST.get("trl"),
        "trl_update_s": [round(x, 2) for x in trl_s[1:n]],
        "rankgym_update_s": [round(x, 2) for x in ours_s[1:n]],
        "trl_tokens_per_s": round(statistics.median(trl_tps), 1),
        "rankgym_tokens_per_s": round(statistics.median(our_tps), 1),
    }
    out["speedup"] = round(out["rankgym_tokens_per_s"] / out["trl_tokens_per_s"], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
