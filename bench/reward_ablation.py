"""Reward ablation after the demo's SFT warm start: judge-only (one arm per judge),
verifiable-only and blended GRPO, and the same minutes spent on more SFT instead.

Setup = `rankgym demo` (SmolLM2-135M + LoRA; SFT on oracle episodes of ToolUse
lookup/units/dates, then GRPO on their hard multi-step tasks). Every arm starts from the *same*
SFT adapter (``--sft-adapter``, or the one the first arm's ``[sft]`` stage writes), uses the
same seed (step k of every GRPO arm samples the same tasks and episode seeds) and the same
number of steps; only the reward differs. ``sft-more`` trains the SFT adapter further on the
same demonstrations for as many minutes as the GRPO arms' mean training time (the peer that
says whether RL beat more imitation). Evaluation: the same held-out episodes for the base model,
the SFT adapter and every arm (paired); bootstrap intervals resample tasks.

Arms: ``KIND[:JUDGE]`` with KIND in judge, verifiable, judge+verifiable (JUDGE defaults to the
demo's ``local/smollm2-yesno``, the embedded yes/no reader; ``local/smollm2`` is the shipped
judge; ``local/smollm2@runs/judge/adapter`` a judge that ``rankgym judge-train`` wrote, e.g. the
off-policy one of issue 14), ``judge:on-policy`` (the ``[judge_train]`` stage trains a judge on
the SFT start's own judge-split groups, labelled by the verifier, and GRPO is judged by it
alone; settings: ``rankgym.trainer.demo.JUDGE_TRAIN`` updated with ``--judge-train JSON``,
which can also turn on online refreshes: ``refresh_every``, ``refresh_data``), ``sft-more``,
or ``simulated-<accuracy>`` (bench/simulated_judge.py: the verifier's pass/fail through random
ranking errors, a calibration of how accurate a judge must be, not a judge).
Every arm records the judge monitor's numbers per step (judge vs verifier on the arm's own GRPO
groups).

Run (CPU, 2 cores; about 12 min per arm when idle):
    HF_HUB_OFFLINE=1 .venv/bin/python bench/reward_ablation.py --out /tmp/ablation \
        --arms judge+verifiable,verifiable,judge,judge:local/smollm2@/tmp/F/run3/adapter,sft-more
    # the issue-22 arms, trained one at a time (--train-only), then evaluated together:
    A="verifiable,judge:on-policy,judge:local/smollm2"
    .venv/bin/python bench/reward_ablation.py --out /tmp/abl --sft-adapter SFT --arms $A \
        --reuse --train-only
    .venv/bin/python bench/reward_ablation.py --out /tmp/abl --sft-adapter SFT --arms $A --reuse

``--reuse`` keeps arms an earlier run with the same ``--out`` finished (their adapters) and
only trains the missing ones; evaluation is always redone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_ARMS = "judge+verifiable,verifiable,judge,sft-more"
ON_POLICY = "on-policy"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the demo's)")
    ap.add_argument("--eval-tasks", type=int, default=18)
    ap.add_argument("--eval-samples", type=int, default=5)
    ap.add_argument("--arms", default=DEFAULT_ARMS)
    ap.add_argument("--sft-adapter", default=None, help="start every arm from this adapter")
    ap.add_argument(
        "--trained",
        action="append",
        default=[],
        metavar="ARM=DIR",
        help="an arm already trained elsewhere from the same SFT adapter (e.g. the demo's "
        "judge+verifiable adapter): evaluated with the others, not retrained",
    )
    ap.add_argument("--out", default="runs/bench-ablation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--scale-rewards",
        choices=("group", "batch", "none"),
        default=None,
        help="[reward] scale_rewards of every GRPO arm (default: the demo's, batch): how a "
        "group's reward deviations are divided before the update (its std, the batch's std, "
        "or not at all)",
    )
    ap.add_argument(
        "--judge-threshold",
        type=_cut,
        default=None,
        metavar="CUT|fit",
        help="[reward] judge_threshold of every judged arm: train on the judge's verdict "
        "(score >= it counts 1, below 0) instead of its graded score; 'fit' fits the cut of "
        "the on-policy arm's judge after its stage and every refresh (trainer/judge_cut.py)",
    )
    ap.add_argument(
        "--judge-train",
        type=json.loads,
        default={},
        metavar="JSON",
        help="settings of the judge:on-policy arm's [judge_train] stage over the demo's "
        '(JUDGE_TRAIN), e.g. \'{"objective": "pointwise", "refresh_every": 1, '
        '"refresh_data": "judge_split"}\'',
    )
    ap.add_argument("--reuse", action="store_true", help="keep arms already trained in --out")
    ap.add_argument(
        "--train-only",
        action="store_true",
        help="train the missing arms and stop (a later --reuse run evaluates them all)",
    )
    ap.add_argument(
        "--no-base",
        action="store_true",
        help="leave the base model (adapter off) out of the evaluation (a quarter less time "
        "with one arm; its row is the same for every arm of one SFT start and seed)",
    )
    args = ap.parse_args()

    from simulated_judge import PREFIX, simulated_kind

    from rankgym.config import validate_config
    from rankgym.threads import set_torch_threads
    from rankgym.trainer.checkpoint import training_adapters
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.demo import DEFAULT_STEPS, JUDGE_TRAIN, demo_config, policy_from_adapter
    from rankgym.trainer.evaluate import (
        AdapterOffPolicy,
        evaluate_policies,
        paired_bootstrap,
        successes,
    )
    from rankgym.trainer.judge_refresh import maybe_refresh, refreshes
    from rankgym.trainer.loop import Trainer
    from rankgym.trainer.setup import make_env_factory
    from rankgym.trainer.step_report import step_line

    steps = args.steps or DEFAULT_STEPS
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    t0 = time.perf_counter()
    if not args.reuse:
        shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    sft_dir = args.sft_adapter
    train_minutes: list[float] = []
    trained: dict[str, str] = {}  # arm -> adapter dir
    history: dict[str, dict] = {}
    for spec in args.trained:
        arm, _, adapter = spec.partition("=")
        trained[arm] = adapter
    for arm in arms:
        out = os.path.join(args.out, _slug(arm))
        done = os.path.join(out, "done.json")
        if args.reuse and os.path.isfile(done):
            with open(done) as f:
                rec = json.load(f)
            trained[arm], history[arm] = rec["adapter"], rec["train"]
            train_minutes += [rec["train"]["minutes"]] if arm != "sft-more" else []
            sft_dir = sft_dir or rec.get("sft_adapter")
            continue
        shutil.rmtree(out, ignore_errors=True)
        kind, _, judge = arm.partition(":")
        if kind.startswith(PREFIX):  # the verifier's pass/fail through random ranking errors
            simulated_kind(kind)
        # every arm on the carved train tasks, the on-policy judge arm's (its judge's tasks
        # are the judge split, which no arm's GRPO draws)
        raw = demo_config(out, steps, "verifiable" if kind == "sft-more" else kind, args.seed,
                          judge_split=True)  # fmt: skip
        if judge == ON_POLICY:  # the [judge_train] stage: a judge trained on this SFT policy
            # `rankgym demo --judge-train`'s settings, updated with --judge-train
            raw["judge_train"] = {**JUDGE_TRAIN, **args.judge_train}
        elif judge:
            raw["judge"]["model"] = judge
        raw["monitor"] = {"guard": "off"}  # every arm runs its steps; the monitor still measures
        if args.scale_rewards:
            raw["reward"]["scale_rewards"] = args.scale_rewards
        if args.judge_threshold is not None and raw["reward"]["kind"] != "verifiable":
            raw["reward"]["judge_threshold"] = args.judge_threshold
        cfg = validate_config(raw, TrainConfig)
        set_torch_threads()
        t_arm = time.perf_counter()
        # force: the judge-only arm with a judge that cannot judge is the point of the ablation
        tr = Trainer(
            cfg, progress=False, echo=print, init_adapter=sft_dir, force=True, adapt_threads=True
        )
        tr.setup()
        if sft_dir is None:  # the first arm ran the [sft] stage: every later arm starts there
            sft_dir = str(tr.out / "sft")
            t_arm = time.perf_counter()
        if kind == "sft-more":
            minutes = statistics.mean(train_minutes) if train_minutes else 5.0
            rec_train = _more_sft(tr, cfg, minutes)
        else:
            hist = []
            for k in range(cfg.steps):
                hist.append(tr.step(k))
                print(f"{arm}: {step_line(hist[-1], k, cfg.steps)}", flush=True)
                if cfg.judge_train is not None:  # online refreshes, as `rankgym train` does
                    maybe_refresh(tr, k)
            rec_train = {
                "steps": len(hist),
                "no_signal_steps": sum(bool(m.no_signal) for m in hist),
                "zero_variance_groups": sum(m.zero_variance_groups for m in hist),
                "groups": sum(m.groups for m in hist),
                "train_success": [m.success_rate for m in hist],
                "judge_score_mean": [m.judge_score_mean for m in hist],
                "monitor": [_monitor_row(m) for m in hist],
                "monitor_run": tr.monitor.summary() if tr.monitor is not None else None,
                "judge_train": _judge_train_record(tr),
                "refreshes": refreshes(tr.out),
                "simulated": tr.reward.calibration() if kind.startswith(PREFIX) else None,
                "minutes": round((time.perf_counter() - t_arm) / 60, 2),
            }
            train_minutes.append(rec_train["minutes"])
        adapter = os.path.join(out, "adapter")
        # the policy's adapter only (not the judge's, loaded into the same base)
        tr.model.save_pretrained(adapter, selected_adapters=training_adapters(tr.model))
        tr.store.close()
        trained[arm], history[arm] = adapter, rec_train
        with open(done, "w") as f:
            json.dump({"adapter": adapter, "train": rec_train, "sft_adapter": sft_dir}, f)
        print(json.dumps({arm: rec_train}), flush=True)
    if args.train_only:
        return

    # Evaluation: base, SFT and every arm on the same held-out episodes.
    set_torch_threads()
    cfg = validate_config(demo_config(args.out, steps, "verifiable", args.seed, judge_split=True), TrainConfig)  # fmt: skip
    sft_policy = policy_from_adapter(sft_dir, "sft", cfg)
    policies = {"sft": sft_policy} if args.no_base else {"base": AdapterOffPolicy(sft_policy, "base"), "sft": sft_policy}  # fmt: skip
    for arm, adapter in trained.items():
        policies[arm] = policy_from_adapter(adapter, arm, cfg)
    tables: dict[str, dict] = {}
    ev = evaluate_policies(
        make_env_factory(cfg.env.id, cfg.env.kwargs, cfg.env.max_turns),
        policies,
        split="test",
        n_tasks=args.eval_tasks,
        samples=args.eval_samples,
        seed=args.seed,
        on_groups=lambda name, groups: tables.__setitem__(name, successes(groups, 1.0)),
    )
    results: dict[str, dict] = {}
    for name, p in ev["policies"].items():
        results[name] = {
            "success": round(p["success"], 3),
            "successes": p["successes"],
            "n": p["n"],
            "ci95": [round(x, 3) for x in p["ci95"]],
            "tool_call_rate": p["tool_call_rate"],
            "mean_turns": p["mean_turns"],
        }
        if name in history:
            results[name]["train"] = history[name]
    names = list(policies)
    pairs = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            lo, hi = paired_bootstrap(tables[a], tables[b], seed=args.seed)
            pairs[f"{b} - {a}"] = {
                "points": round(100 * (results[b]["success"] - results[a]["success"]), 1),
                "ci95_points": [round(100 * lo, 1), round(100 * hi, 1)],
            }
    out = {
        "settings": vars(args) | {"steps": steps},
        "sft_adapter": sft_dir,
        "results": results,
        "pairs": pairs,
        "wall_min": round((time.perf_counter() - t0) / 60, 1),
        "tables": tables,  # per held-out task, each episode's success: bench/pool_ablation.py
    }
    with open(os.path.join(args.out, f"eval-seed{args.seed}.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k != "tables"}, indent=1))


def _monitor_row(m) -> dict:  # type: ignore[no-untyped-def]
    """The judge monitor's numbers of one step (this step and running over the run)."""
    keys = ("monitor_pairs", "judge_pairwise", "judge_tau", "judge_top_fail_rate",
            "monitor_pairs_run", "judge_pairwise_run", "judge_pairwise_run_low",
            "judge_pairwise_run_high", "judge_tau_run", "judge_top_fail_rate_run",
            "monitor_tied_pairs", "judge_tied_shorter", "judge_tied_shorter_run")  # fmt: skip
    return {k: getattr(m, k, None) for k in keys} | {"success_rate": m.success_rate}


def _judge_train_record(tr) -> dict | None:  # type: ignore[no-untyped-def]
    """The ``[judge_train]`` stage's judge, held-out check and rollout (None without one)."""
    jt = getattr(tr, "judge_train", None)
    if not jt:
        return None
    summary = jt.get("summary") or {}
    keep = ("train_pairs", "heldout_pairs", "data", "train_seconds", "stopped_on_time_cap")
    return {"judge": jt.get("judge"), "check": jt.get("check"), "rollout": jt.get("rollout"),
            "cut": jt.get("cut"), "summary": {k: summary.get(k) for k in keep if k in summary}}  # fmt: skip


def _cut(value: str) -> str | float:
    """``--judge-threshold``: ``fit`` or a number in [0, 1]."""
    if value == "fit":
        return value
    try:
        cut = float(value)
    except ValueError:
        cut = float("nan")
    if not 0.0 <= cut <= 1.0:
        raise argparse.ArgumentTypeError(f"{value!r}: give a number in [0, 1] or 'fit'")
    return cut


def _slug(arm: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in arm)[:80]


def _more_sft(tr, cfg, minutes: float) -> dict:  # type: ignore[no-untyped-def]
    """Continue SFT on the demo's demonstrations for ``minutes`` (the GRPO arms' budget)."""
    from rankgym.trainer.sft import conversations_for, render_rows, sft_train

    t = time.perf_counter()
    rows = render_rows(tr.ctx.policy("sft"), conversations_for(cfg))
    left = max(0.1, minutes - (time.perf_counter() - t) / 60)
    st = sft_train(
        tr.model, rows, pad_id=tr.tokenizer.pad_token_id, steps=100_000, lr=cfg.sft.lr,
        batch_size=cfg.sft.batch_size, max_minutes=left, warmup_steps=0, bf16=tr.bf16,
        seed=cfg.seed + 1,
    )  # fmt: skip
    return {
        "sft_steps": st.steps,
        "loss_last": st.loss_last,
        "minutes": round((time.perf_counter() - t) / 60, 2),
        "matched_to_minutes": round(minutes, 2),
    }


if __name__ == "__main__":
    main()
