"""Held-out success curve after the demo's SFT warm start: GRPO, or the same minutes of more SFT.

Runs the `rankgym demo` setup (SmolLM2-135M + LoRA; SFT on oracle episodes of ToolUse
lookup/units/dates, then GRPO on the hard multi-step tasks, the embedded judge blended with the
verifiable reward by default) and evaluates on the held-out hard tasks: the base model (adapter
off) and the SFT checkpoint once, then the adapter every ``--eval-every`` steps; the same tasks
and seeds each time, so every point is paired. ``--arm sft-more`` spends the steps on more SFT
(``--sft-per-step`` batches per step) instead of GRPO: the peer that says whether RL on the
judge's scores beat more imitation. ``--reward judge|verifiable`` are the other arms. Stops early
when ``--minutes`` is used up (it says so in the output).

Run (CPU, <= 60 min per arm):
    HF_HUB_OFFLINE=1 .venv/bin/python bench/learning.py --steps 12 --eval-every 4 --minutes 55
    HF_HUB_OFFLINE=1 .venv/bin/python bench/learning.py --arm sft-more --steps 12 --eval-every 4
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


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--eval-every", type=int, default=4)
    ap.add_argument("--eval-tasks", type=int, default=18)
    ap.add_argument("--eval-samples", type=int, default=5)
    ap.add_argument("--arm", default="grpo", choices=["grpo", "sft-more"])
    ap.add_argument("--sft-steps", type=int, default=16, help="the warm start (as the demo)")
    ap.add_argument("--sft-per-step", type=int, default=3, help="sft-more: SFT batches per step")
    from rankgym.trainer.rewards import reward_names  # after the environment settings above

    ap.add_argument("--reward", default="judge+verifiable", choices=reward_names())
    ap.add_argument("--lr", type=float, default=None, help="override the demo learning rate")
    ap.add_argument("--judge", default=None, help="judge model (default: the demo's local/smollm2)")
    ap.add_argument("--sft-adapter", default=None, help="start from this adapter (skip the SFT)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one key of the demo config (VALUE is JSON if it parses), e.g. "
        'policy.temperature=0.7 or \'sft.env_kwargs={"difficulty": "hard"}\'',
    )
    ap.add_argument("--minutes", type=float, default=55.0, help="stop training after this long")
    ap.add_argument("--out", default="runs/bench-learning")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from rankgym.config import validate_config
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.demo import demo_config
    from rankgym.trainer.evaluate import AdapterOffPolicy, evaluate_policies, successes
    from rankgym.trainer.loop import Trainer

    shutil.rmtree(args.out, ignore_errors=True)
    raw = demo_config(args.out, args.steps, args.reward, args.seed, args.sft_steps)
    raw["eval"].update(tasks=args.eval_tasks, samples=args.eval_samples)
    if args.lr:
        raw["optim"]["lr"] = args.lr
    if args.judge:
        raw["judge"]["model"] = args.judge
    for item in args.set:
        _override(raw, item)
    cfg = validate_config(raw, TrainConfig)
    t0 = time.perf_counter()
    tr = Trainer(cfg, progress=False, echo=print, init_adapter=args.sft_adapter)
    tr.setup()

    def evaluate(policy, name):
        cur = tr.ctx.eval_policy(name, cfg.eval.temperature)
        pol = AdapterOffPolicy(cur, name) if policy == "base" else cur
        table: dict[str, list[int]] = {}
        res = evaluate_policies(
            tr.env, {name: pol}, split="test", n_tasks=args.eval_tasks,
            samples=args.eval_samples, seed=cfg.seed,
            on_groups=lambda _n, groups: table.update(successes(groups, 1.0)),
        )  # fmt: skip
        # per task: one 0/1 digit per seeded sample, e.g. "10110" (which tasks moved, and how)
        per_task = {t.removeprefix("tooluse-"): "".join(map(str, v)) for t, v in table.items()}
        return res["policies"][name] | {"per_task": per_task}

    base = evaluate("base", "base")
    print(f"base: {base['success']:.3f} {base['ci95']} n={base['n']}", flush=True)
    sft = evaluate("trained", "sft")
    print(f"sft: {sft['success']:.3f} {sft['ci95']} n={sft['n']} {sft['per_task']}", flush=True)
    curve = [{"step": 0, **_pick(sft)}]
    more = None
    if args.arm == "sft-more":
        from rankgym.trainer.sft import conversations_for, render_rows, sft_train

        more = render_rows(tr.ctx.policy("sft"), conversations_for(cfg))
    history = []
    stopped_early = False
    for k in range(cfg.steps):
        if (time.perf_counter() - t0) / 60 > args.minutes:
            stopped_early = True
            break
        if more is not None:
            st = sft_train(
                tr.model, more, pad_id=tr.tokenizer.pad_token_id, steps=args.sft_per_step,
                lr=cfg.sft.lr, batch_size=cfg.sft.batch_size, warmup_steps=0, bf16=tr.bf16,
                seed=cfg.seed + k + 1,
            )  # fmt: skip
            history.append({"sft_loss": st.loss_last, "time_step_s": st.seconds})
            m = None
        else:
            m = tr.step(k)
        if m is not None:
            history.append({key: getattr(m, key) for key in ("reward_mean", "verifiable_mean", "success_rate", "zero_variance_groups", "time_step_s")})  # fmt: skip
        if (k + 1) % args.eval_every == 0 or k + 1 == cfg.steps:
            ev = evaluate("trained", f"step{k + 1}")
            curve.append({"step": k + 1, **_pick(ev)})
            print(
                f"step {k + 1}: held-out {ev['success']:.3f} {ev['ci95']} {ev['per_task']}",
                flush=True,
            )
    best = max(curve[1:], key=lambda c: c["success"]) if len(curve) > 1 else curve[0]
    out = {
        "settings": vars(args),
        "arm": args.arm,
        "reward": args.reward,
        "steps_done": len(history),
        "stopped_early_for_time": stopped_early,
        "base": _pick(base),
        "sft": curve[0],
        "curve": curve,
        "final_minus_sft_points": round(100 * (curve[-1]["success"] - curve[0]["success"]), 1),
        "best_minus_sft_points": round(100 * (best["success"] - curve[0]["success"]), 1),
        "train_history": history,
        "store": cfg.store_path,
        "wall_min": round((time.perf_counter() - t0) / 60, 1),
    }
    print(json.dumps(out, indent=1))


def _override(raw: dict, item: str) -> None:
    key, sep, value = item.partition("=")
    if not sep or "." not in key:
        raise SystemExit(f"--set {item!r}: expected SECTION.KEY=VALUE")
    *path, last = key.split(".")
    node = raw
    for part in path:
        node = node.setdefault(part, {})
    try:
        node[last] = json.loads(value)
    except ValueError:
        node[last] = value


def _pick(p: dict) -> dict:
    return {"success": p["success"], "ci95": [round(x, 3) for x in p["ci95"]], "n": p["n"]}


if __name__ == "__main__":
    main()
