"""Reward ablation: the same env, seed and budget trained on judge-only, verifiable-only and
blended rewards; held-out success of each adapter vs the base model, with sample sizes.

Setup = `rankgym demo` (SmolLM2-135M + LoRA on easy ToolUse calculator tasks, embedded judge
``local/smollm2``). Every arm uses the same seed, so step k of every arm samples the same tasks
and episode seeds; only the reward (and hence the updates, and hence later rollouts) differ.
Evaluation: the same held-out tasks and seeds for the base model and every adapter (paired).

Run (CPU; 15 steps took 35 min on 2 cores):
    HF_HUB_OFFLINE=1 RANKGYM_CACHE=/tmp/rgcache .venv/bin/python bench/reward_ablation.py \
        --steps 15 --out /tmp/ablation

``--reuse`` keeps what an earlier run with the same ``--out`` trained (each arm resumes from its
last checkpoint, so a killed run continues) and only trains the missing steps; evaluation is
always redone. Besides each arm vs the base model, it prints paired bootstrap intervals for
every pair of arms (same held-out episodes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ARMS = ("judge", "verifiable", "judge+verifiable")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--eval-tasks", type=int, default=20)
    ap.add_argument("--eval-samples", type=int, default=4)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--out", default="runs/bench-ablation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reuse", action="store_true", help="resume arms already trained in --out")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from rankgym.config import validate_config
    from rankgym.envs.policies import TransformersPolicy
    from rankgym.trainer.commands import demo_config
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.evaluate import (
        AdapterOffPolicy,
        evaluate_policies,
        paired_bootstrap,
        successes,
    )
    from rankgym.trainer.loop import Trainer

    t0 = time.perf_counter()
    if not args.reuse:
        shutil.rmtree(args.out, ignore_errors=True)
    results: dict[str, dict] = {}
    tables: dict[str, dict] = {}
    for arm in args.arms.split(","):
        out = os.path.join(args.out, arm.replace("+", "_"))
        cfg = validate_config(demo_config(out, args.steps, arm, args.seed), TrainConfig)
        resume = args.reuse and os.path.isfile(os.path.join(out, "run.json"))
        tr = Trainer(cfg, resume=resume, progress=False, echo=print)
        tr.setup()
        for k in range(tr.start_step, cfg.steps):
            tr.step(k)
        hist = [row["metrics"] for row in tr.store.steps(tr.run_id)][: cfg.steps]
        pol = TransformersPolicy(
            tr.model, tr.tokenizer, name=arm, max_new_tokens=cfg.policy.max_new_tokens,
            temperature=0.7, seed=cfg.seed, autocast=tr.bf16,
        )  # fmt: skip
        policies = {arm: pol}
        if "base" not in results:
            policies = {"base": AdapterOffPolicy(pol, "base"), arm: pol}

        def keep(name, groups, cfg=cfg):
            tables[name] = successes(groups, 1.0)

        ev = evaluate_policies(
            tr.env, policies, split="test", n_tasks=args.eval_tasks, samples=args.eval_samples,
            seed=cfg.seed, on_groups=keep,
        )  # fmt: skip
        for name, p in ev["policies"].items():
            results[name] = {
                "success": p["success"], "successes": p["successes"], "n": p["n"],
                "ci95": [round(x, 3) for x in p["ci95"]],
            }  # fmt: skip
        results[arm]["train"] = {
            "steps": len(hist),
            "no_signal_steps": sum(bool(m["no_signal"]) for m in hist),
            "zero_variance_groups": sum(m["zero_variance_groups"] for m in hist),
            "groups": sum(m["groups"] for m in hist),
            "train_success_first_last": [hist[0]["success_rate"], hist[-1]["success_rate"]],
            "judge_score_mean_first_last": [
                hist[0]["judge_score_mean"],
                hist[-1]["judge_score_mean"],
            ],
        }
        print(json.dumps({arm: results[arm]}), flush=True)
        tr.store.close()
    arms = args.arms.split(",")
    for arm in arms:
        lo, hi = paired_bootstrap(tables["base"], tables[arm], seed=args.seed)
        results[arm]["minus_base"] = round(results[arm]["success"] - results["base"]["success"], 3)
        results[arm]["minus_base_ci95"] = [round(lo, 3), round(hi, 3)]
    pairs = {}
    for i, a in enumerate(arms):
        for b in arms[i + 1 :]:
            lo, hi = paired_bootstrap(tables[a], tables[b], seed=args.seed)
            diff = results[b]["success"] - results[a]["success"]
            pairs[f"{b} - {a}"] = {
                "difference": round(diff, 3),
                "ci95": [round(lo, 3), round(hi, 3)],
            }
    results["pairs"] = pairs
    print(json.dumps({"settings": vars(args), "results": results, "wall_min": round((time.perf_counter() - t0) / 60, 1)}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
