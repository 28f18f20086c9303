"""What the rankgym judge costs per ``trl.GRPOTrainer`` step, against a per-completion judge.

Three arms train the same LoRA on the embedded SmolLM2-135M-Instruct policy with the same
prompts (``rankgym/ToolUse-v0`` tasks through ``trl_dataset``), seeds and GRPOConfig; only the
reward function differs:

- ``none``: a free reward (seeded random numbers): the step without any judge;
- ``group``: ``GroupJudgeReward(JUDGE, store=...)``: one judge call per prompt's
  ``num_generations`` completions, identical completions shown once, groups and scores written
  to a rankgym store;
- ``per-completion``: a plain TRL reward function that calls the *same judge model* once per
  completion (rankgym's judge prompt on a group of one, no store, no cache): what a user writes
  when they wrap an LLM judge as a per-sample reward.

Per timed step: step wall time (callback ``on_step_begin`` -> ``on_step_end``), seconds inside
the reward function, judge calls and judge input tokens. Overhead = step time minus the
``none`` arm's. The first step of each arm is warm-up (model load, first judge load) and is
not counted.

Run (about 6-10 minutes on 2 CPU cores):
    HF_HUB_OFFLINE=1 RANKGYM_CACHE=/tmp/rgcache .venv/bin/python bench/trl_judge_overhead.py
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ENV_ID = "rankgym/ToolUse-v0"


class PerCompletionJudge:
    """One judge call per completion (the same judge model, a group of one each)."""

    __name__ = "per_completion_judge"

    def __init__(self, model: str) -> None:
        from rankgym.judges import default_spec

        self.spec = default_spec(model)
        self.calls = 0
        self.input_tokens = 0
        self.seconds = 0.0

    def __call__(self, prompts: list[Any], completions: list[Any], **kw: Any) -> list[float | None]:
        from rankgym.integrations.groups import make_group, to_messages
        from rankgym.judges import judge_groups_sync

        t0 = time.perf_counter()
        groups = [
            make_group([to_messages(p) + to_messages(c, "assistant")], env_id=ENV_ID,
                       task_id=f"t{i}", run_id="bench", step=0, key=str(time.time()))
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]  # fmt: skip
        js = judge_groups_sync(groups, self.spec, None, concurrency=1)
        self.calls += sum(j.calls for j in js)
        self.input_tokens += sum(j.input_tokens for j in js)
        self.seconds += time.perf_counter() - t0
        return [j.scores[0].score if j.status == "ok" else None for j in js]


class Timed:
    """Wraps a reward function and adds up the seconds spent in it."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "reward")
        self.seconds = 0.0

    def __call__(self, **kw: Any) -> list[float | None]:
        t0 = time.perf_counter()
        out = self.fn(**kw)
        self.seconds += time.perf_counter() - t0
        return out


def run_arm(arm: str, args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rankgym.integrations.trl import GroupJudgeReward, trl_dataset
    from rankgym.model import load_embedded

    torch.manual_seed(0)
    model, tok = load_embedded("float32")
    ds = trl_dataset(ENV_ID, limit=(args.steps + 1) * args.batch // args.group)
    store = Path(tempfile.mkdtemp(prefix="trl-overhead-")) / "store.db"
    judge: Any
    if arm == "none":
        rng = random.Random(0)
        judge = lambda prompts, completions, **kw: [rng.random() for _ in completions]  # noqa: E731
        judge.__name__ = "free"
    elif arm == "group":
        judge = GroupJudgeReward(args.judge, store=store, run_id="bench", num_generations=args.group)  # fmt: skip
    else:
        judge = PerCompletionJudge(args.judge)
    timed = Timed(judge)
    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-overhead-out-"),
        per_device_train_batch_size=args.batch, num_generations=args.group,
        max_completion_length=args.completion, max_steps=args.steps + 1, learning_rate=1e-5,
        logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, bf16=True, seed=0,
        shuffle_dataset=False, generation_kwargs={"min_new_tokens": args.completion},
    )  # fmt: skip
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM")  # fmt: skip
    trainer = GRPOTrainer(model=model, reward_funcs=timed, args=cfg, train_dataset=ds,
                          processing_class=tok, peft_config=lora)  # fmt: skip
    steps: list[dict[str, float]] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):  # noqa: ANN001
            self.t0, self.r0 = time.perf_counter(), timed.seconds
            self.c0 = _calls(judge)

        def on_step_end(self, a, state, control, **kw):  # noqa: ANN001
            calls, tokens = _calls(judge)
            steps.append({"step_s": time.perf_counter() - self.t0,
                          "reward_s": timed.seconds - self.r0,
                          "judge_calls": calls - self.c0[0],
                          "judge_input_tokens": tokens - self.c0[1]})  # fmt: skip

    trainer.add_callback(Timer())
    trainer.train()
    timed_steps = steps[1:]
    out = {k: statistics.fmean(s[k] for s in timed_steps) for k in timed_steps[0]}
    out["steps"] = len(timed_steps)
    if arm == "group":
        from rankgym.store import Store

        with Store(store, readonly=True) as s:
            out["stored_groups"] = len(s.group_ids("bench"))
    return out


def _calls(judge: Any) -> tuple[int, int]:
    if isinstance(judge, PerCompletionJudge):
        return judge.calls, judge.input_tokens
    store = getattr(getattr(judge, "runner", None), "store", None)
    if store is None:
        return 0, 0
    rows = store.steps("bench")
    return (sum(r["metrics"]["judge_calls"] for r in rows),
            sum(r["metrics"]["judge_input_tokens"] for r in rows))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--judge", default="local/smollm2-yesno", help="the judge model (both arms)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps (plus one warm-up)")
    ap.add_argument("--batch", type=int, default=8, help="completions per step")
    ap.add_argument("--group", type=int, default=4, help="num_generations")
    ap.add_argument("--completion", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--arms", default="none,group,per-completion")
    ap.add_argument("--arm", help=argparse.SUPPRESS)  # one arm in this process (internal)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    if args.arm:
        print(json.dumps(run_arm(args.arm, args)))
        return
    import subprocess

    results: dict[str, Any] = {}
    for arm in args.arms.split(","):  # each arm in a fresh process: no warm caches shared
        cmd = [sys.executable, __file__, *sys.argv[1:], "--arm", arm]
        t0 = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            sys.exit(f"arm {arm} failed:\n{run.stderr[-3000:]}")
        results[arm] = json.loads(run.stdout.strip().splitlines()[-1])
        results[arm]["wall_s"] = round(time.perf_counter() - t0, 1)
        print(arm, json.dumps(results[arm]), file=sys.stderr, flush=True)
    base = results.get("none", {}).get("step_s")
    for arm, r in results.items():
        if base is not None and arm != "none":
            r["overhead_s"] = r["step_s"] - base
    print(json.dumps({"judge": args.judge, "batch": args.batch, "group": args.group,
                      "completion": args.completion, "threads": args.threads,
                      "load_avg": os.getloadavg()[0], "arms": results}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
