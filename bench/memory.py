"""Peak memory and speed of the GRPO update: rankgym's `grpo_update` beside TRL 1.16 `GRPOTrainer`.

Every case runs in a fresh child process (so one case's freed-but-kept heap does not count for
the next): load SmolLM2-135M-Instruct (embedded) + LoRA r=16 on all 7 projections, build the
batch, let glibc return what loading freed (``malloc_trim``), read the resident size, reset the
kernel's peak counter (``/proc/self/clear_refs`` = 5), run the update ``--reps`` times and read
the peak (``VmHWM``). *Rise* = peak - resident size before the update: what the update adds over
the loaded model. Tokens/s = non-pad tokens of the batch / seconds of the last repetition;
also per CPU second (user + system time of the child), which the box's load does not inflate.

Batches (token rows built from real ToolUse renderings: the system prompt with its tool list,
the task, tool responses; the sampled completions are random ids of the demo's lengths):

- ``demo``: the demo's GRPO step, 3 hard tasks (lookup, units, dates) x 6 episodes, 1-4 turns of
  24-64 completion tokens with the tool response between turns, one row per trajectory
  (~600-900 tokens).
- ``issue``: issue 23's batch, 6 trajectories x 2 rows of ~1,100 tokens (300 completion tokens
  per row, in four turns).

Sides: ``rankgym`` (``grpo_update``: chunked log-probs, gradient checkpointing unless
``ckpt=0``), ``rankgym-old`` (the update as of 50999ae: logits of every position from the first
completion token, no checkpointing, glibc's default heap; kept here as the reference), ``trl`` (``GRPOTrainer``'s own
``compute_loss`` + backward on the same rows: prompt = the tokens before a row's first completion
token, completion = the rest with ``tool_mask`` 0 on tool/context tokens; its default gradient
checkpointing). All sides: bf16 autocast, AdamW, grad clip 1.0, dapo loss, beta 0.

Run (about 6-10 minutes on 2 cores; each child stays under ~5 GB; TRL is not run at micro-batch
6 on the issue batch unless asked: it was OOM-killed at 20 GB):
    HF_HUB_OFFLINE=1 RANKGYM_CACHE=/tmp/rgcache .venv/bin/python bench/memory.py
    .venv/bin/python bench/memory.py --case rankgym:issue:6 --case trl:demo:2:bfloat16
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
DEFAULT_CASES = [
    "rankgym-old:demo:2",
    "rankgym:demo:2",
    "trl:demo:2",
    "rankgym:demo:6",
    "rankgym-old:demo:2:bfloat16",
    "rankgym:demo:2:bfloat16",
    "trl:demo:2:bfloat16",
    "rankgym-old:issue:2",
    "rankgym:issue:2",
    "trl:issue:2",
    "rankgym:issue:6",
]


def proc_status(key: str) -> int:
    """A ``/proc/self/status`` field in bytes (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


# ------------------------------------------------------------------------------ batches


def _segments(tok: Any, task_seed: int) -> list[tuple[list[int], int]]:
    """(context ids, completion length) per turn of one real rendering of a hard ToolUse task."""
    from rankgym.envs.policies.render import assistant_turns, pick_tool_mode
    from rankgym.envs.registry import make
    from rankgym.trainer.sft import oracle_demonstrations

    env = make("rankgym/ToolUse-v0", difficulty="hard", families=["lookup", "units", "dates"])
    fam = ["lookup", "units", "dates"][task_seed % 3]
    task = [t for t in env.tasks("train") if t.family == fam][task_seed // 3]
    (conv,) = oracle_demonstrations(env, [task.id])
    mode = pick_tool_mode(tok, "auto")
    turns = assistant_turns(
        tok, conv.messages, conv.tools, tool_mode=mode, eos_ids={tok.eos_token_id}
    )
    out, seen = [], 0
    for t in turns:
        prompt = list(t.prompt_token_ids)
        out.append((prompt[seen:], len(t.completion_token_ids)))
        seen = len(prompt) + len(t.completion_token_ids)
    return out


def demo_batch(tok: Any, seed: int = 0) -> list[Any]:
    """3 tasks x 6 episodes, 1-4 turns of 24-64 completion tokens, advantages of both signs."""
    from rankgym.trainer.grpo import Sample

    r = random.Random(seed)
    out = []
    for task in range(3):
        segs = _segments(tok, task)
        for _ in range(6):
            ids: list[int] = []
            mask: list[int] = []
            for k, (ctx, _) in enumerate(segs[: r.randint(1, 4)]):
                if k and not ctx:
                    break
                n = r.randint(24, 64)
                ids += ctx + [r.randrange(100, 40_000) for _ in range(n)]
                mask += [0] * len(ctx) + [1] * n
            out.append(Sample([(ids, mask)], r.choice([-1.0, -0.5, 0.5, 1.0])))
    return out


def issue_batch(tok: Any, seed: int = 0) -> list[Any]:
    """6 trajectories x 2 rows of ~1,100 tokens, 300 completion tokens per row in four turns."""
    from rankgym.trainer.grpo import Sample

    r = random.Random(seed)
    segs = _segments(tok, 0)
    system = segs[0][0]
    filler = [t for ctx, _ in segs[1:] for t in ctx] or system[-100:]
    out = []
    for i in range(6):
        rows = []
        for _ in range(2):
            ids, mask = list(system), [0] * len(system)
            for k in range(4):
                comp = [r.randrange(100, 40_000) for _ in range(75)]
                ctx = (filler * 8)[: max(0, (800 - len(system)) // 3)] if k < 3 else []
                ids += comp + ctx
                mask += [1] * 75 + [0] * len(ctx)
            rows.append((ids, mask))
        out.append(Sample(rows, [1.0, -1.0][i % 2]))
    return out


# ------------------------------------------------------------------------------ sides


def old_token_logprobs(model: Any, mb: Any, temperature: float = 1.0, chunk: int = 0) -> Any:
    """``token_logprobs`` as of 50999ae: full logits of every position from the first completion
    token, a float log-softmax row by row (the reference this bench compares with;
    ``trainer.logprobs.full_logits_logprobs``)."""
    from rankgym.trainer.logprobs import full_logits_logprobs

    return full_logits_logprobs(model, mb, temperature)


def _resident(model: Any) -> None:
    """Read every weight once: fp32 weights can stay mmapped from the safetensors file, so
    their pages would otherwise be counted in the update's rise the first time it reads them."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            p.detach().float().sum()


def _lora_model(dtype: str, ckpt: bool) -> tuple[Any, Any]:
    import torch
    from peft import LoraConfig, get_peft_model

    from rankgym.model import enable_checkpointing, load_embedded

    model, tok = load_embedded(dtype)
    torch.manual_seed(0)
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS)
    model = get_peft_model(model, lora)
    with torch.no_grad():  # a trained-looking adapter (B = 0 would make the update trivial)
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.01)
    if ckpt:
        enable_checkpointing(model)
    model.eval()
    _resident(model)
    return model, tok


def run_rankgym(
    samples: list[Any], tok: Any, model: Any, micro: int, old: bool, heap: bool = True
) -> Any:
    import torch

    from rankgym.trainer import grpo
    from rankgym.trainer.grpo import LossSettings, UpdateSettings, grpo_update

    if old:  # the update as of 50999ae: full logits
        grpo.token_logprobs = old_token_logprobs
    if not heap:  # glibc's default heap behaviour (as before issue 23)
        grpo.bound_heap = grpo.release_freed_memory = lambda *a, **k: False
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    s = UpdateSettings(loss=LossSettings(loss_type="dapo"), micro_batch_size=micro, bf16=True)

    def step() -> None:
        grpo_update(model, opt, samples, s, pad_id=tok.pad_token_id)

    return step


def _trl_inputs(samples: list[Any], pad_id: int, n_items: int) -> list[dict[str, Any]]:
    """One TRL input dict per row: left-padded prompt, right-padded completion, tool_mask."""
    import torch

    rows = [(ids, m, s.advantage) for s in samples for ids, m in s.rows]
    first = [m.index(1) for _, m, _ in rows]
    P = max(first)
    C = max(len(ids) - f for (ids, _, _), f in zip(rows, first, strict=True))
    out = []
    for (ids, m, adv), f in zip(rows, first, strict=True):
        p_ids = torch.full((P,), pad_id)
        p_mask = torch.zeros(P, dtype=torch.long)
        p_ids[P - f :] = torch.tensor(ids[:f])
        p_mask[P - f :] = 1
        c = ids[f:]
        c_ids = torch.full((C,), pad_id)
        c_mask = torch.zeros(C, dtype=torch.long)
        tool = torch.zeros(C, dtype=torch.long)
        c_ids[: len(c)] = torch.tensor(c)
        c_mask[: len(c)] = 1
        tool[: len(c)] = torch.tensor(m[f:])
        out.append(
            {
                "prompt_ids": p_ids,
                "prompt_mask": p_mask,
                "completion_ids": c_ids,
                "completion_mask": c_mask,
                "tool_mask": tool,
                "advantages": torch.tensor(adv),
            }
        )
    return out


def run_trl(samples: list[Any], dtype: str, micro: int) -> tuple[Any, Any, Any]:
    import tempfile

    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from rankgym.model import load_embedded

    model, tok = load_embedded(dtype)
    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-mem-"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=300,
        loss_type="dapo",
        beta=0.0,
        epsilon=0.2,
        bf16=True,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        learning_rate=1e-5,
    )
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": "x"}]}] * 4)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                          args=cfg, train_dataset=ds, processing_class=tok, peft_config=lora)  # fmt: skip
    m = trainer.model
    _resident(m)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(), which we bypass
    if not getattr(m, "is_gradient_checkpointing", False):  # the Trainer turns it on in train()
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs=cfg.gradient_checkpointing_kwargs)  # fmt: skip
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.01)
    n_items = sum(s.completion_tokens for s in samples)
    rows = _trl_inputs(samples, tok.pad_token_id, n_items)
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    mbs = []
    for i in range(0, len(rows), micro):
        part = rows[i : i + micro]
        mb = {k: torch.stack([r[k] for r in part]) for k in part[0]}
        mb["num_items_in_batch"] = torch.tensor(float(n_items))
        mbs.append(mb)

    def step() -> None:
        m.train()
        for mb in mbs:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = trainer.compute_loss(m, mb)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        m.eval()

    info = {"trl_gradient_checkpointing": bool(getattr(m, "is_gradient_checkpointing", False))}
    return step, tok, info


def child(case: str, reps: int, threads: int) -> dict[str, Any]:
    import torch

    from rankgym.model import embedded_model_dir, release_freed_memory

    spec, _, heap_bytes = case.partition("@")  # @BYTES: the update's fixed mmap threshold
    if heap_bytes:
        os.environ["RANKGYM_MMAP_THRESHOLD"] = heap_bytes
    side, batch, micro_s, *rest = spec.split(":")
    dtype = rest[0] if rest else "float32"
    ckpt = (rest[1] != "0") if len(rest) > 1 else side == "rankgym"
    heap = (rest[2] != "0") if len(rest) > 2 else side != "rankgym-old"
    micro = int(micro_s)
    torch.set_num_threads(threads)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    if batch == "demo-file":
        samples = file_batch(os.environ["RANKGYM_BENCH_BATCH"])
    else:
        samples = (demo_batch if batch == "demo" else issue_batch)(tok)
    info: dict[str, Any] = {}
    if side == "trl":
        step, tok, info = run_trl(samples, dtype, micro)
    else:
        model, tok = _lora_model(dtype, ckpt)
        step = run_rankgym(samples, tok, model, micro, side == "rankgym-old", heap)
    release_freed_memory()
    before = proc_status("VmRSS")
    _reset_peak()
    seconds = cpu = 0.0
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        step()
        seconds, cpu = time.perf_counter() - t, time.process_time() - c
    peak = proc_status("VmHWM")
    tokens = sum(s.tokens for s in samples)
    return {
        "case": case,
        "side": side,
        "batch": batch,
        "micro": micro,
        "dtype": dtype,
        "checkpointing": ckpt if side != "trl" else info.get("trl_gradient_checkpointing"),
        "bound_heap": heap if side != "trl" else False,
        "trajectories": len(samples),
        "rows": sum(len(s.rows) for s in samples),
        "tokens": tokens,
        "completion_tokens": sum(s.completion_tokens for s in samples),
        "max_row": max(len(ids) for s in samples for ids, _ in s.rows),
        "rss_before_gb": round(before / 2**30, 3),
        "peak_gb": round(peak / 2**30, 3),
        "rise_gb": round((peak - before) / 2**30, 3),
        "seconds": round(seconds, 2),
        "tokens_per_s": round(tokens / seconds, 1),
        "cpu_seconds": round(cpu, 2),  # user + system CPU time: what load does not inflate
        "tokens_per_cpu_s": round(tokens / cpu, 1),
    }


def capture(path: str, threads: int, sft_steps: int) -> dict[str, Any]:
    """Run the demo's SFT stage and GRPO step 0 (``trainer/demo.py``'s config) and write the
    step's token rows and advantages to ``path`` (``--batch-file`` reads them); returns the peak
    RSS of each phase (kernel ``VmHWM``, reset at each phase start)."""
    import tempfile

    import torch

    from rankgym.config import validate_config
    from rankgym.model import release_freed_memory
    from rankgym.trainer import loop
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.demo import demo_config

    torch.set_num_threads(threads)
    out = tempfile.mkdtemp(prefix="mem-demo-")
    raw = demo_config(out, steps=1, reward="judge+verifiable", seed=0, sft_steps=sft_steps)
    cfg = validate_config(raw, TrainConfig)
    phases: dict[str, Any] = {}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **kw: Any) -> Any:
            release_freed_memory()
            start = proc_status("VmRSS")
            _reset_peak()
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                phases[name] = {
                    "seconds": round(time.perf_counter() - t, 1),
                    "rss_start_gb": round(start / 2**30, 3),
                    "peak_gb": round(proc_status("VmHWM") / 2**30, 3),
                }

        return wrapper

    def dump(model: Any, opt: Any, samples: Any, *a: Any, **kw: Any) -> Any:
        with open(path, "w") as fh:
            json.dump([{"rows": s.rows, "advantage": s.advantage} for s in samples], fh)
        return grpo_update(model, opt, samples, *a, **kw)

    grpo_update = loop.grpo_update
    loop.grpo_update = timed("grpo_update", dump)
    trainer = loop.Trainer(cfg, progress=False)
    trainer._warm_start = timed("sft", trainer._warm_start)
    trainer._rollout_and_judge_main = timed("rollout+judge", trainer._rollout_and_judge_main)
    timed("setup (load + sft)", trainer.setup)()
    trainer.step(0)
    return {"threads": threads, "micro_batch": cfg.optim.micro_batch_size,
            "gradient_checkpointing": cfg.optim.gradient_checkpointing, "phases": phases}  # fmt: skip


def file_batch(path: str) -> list[Any]:
    """The samples ``--capture`` wrote."""
    from rankgym.trainer.grpo import Sample

    with open(path) as fh:
        return [Sample([(list(i), list(m)) for i, m in x["rows"]], x["advantage"]) for x in json.load(fh)]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--case",
        action="append",
        help="SIDE:BATCH:MICRO[:DTYPE[:CKPT[:HEAP]]][@BYTES] with SIDE rankgym|rankgym-old|trl, BATCH "
        "demo|issue|demo-file, DTYPE float32|bfloat16 (base weights), CKPT 0|1 (rankgym sides; "
        "default: rankgym 1, rankgym-old 0), HEAP 0|1 (bound_heap + malloc_trim; default: "
        "rankgym 1, rankgym-old 0), BYTES the fixed mmap threshold (RANKGYM_MMAP_THRESHOLD); repeatable (default: the table in bench/RESULTS.md)",
    )
    ap.add_argument("--reps", type=int, default=2, help="updates per case (timed: the last)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument(
        "--capture",
        metavar="FILE",
        help="run the demo's SFT + GRPO step 0, write its batch to FILE, print phase peaks",
    )
    ap.add_argument("--sft-steps", type=int, default=16, help="with --capture")
    ap.add_argument(
        "--batch-file", metavar="FILE", help="the batch `demo-file` cases use (--capture writes it)"
    )
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    if args.capture:
        print(json.dumps(capture(args.capture, args.threads, args.sft_steps), indent=1))
        return
    if args.batch_file:
        os.environ["RANKGYM_BENCH_BATCH"] = args.batch_file
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.reps, args.threads)), flush=True)
        return
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    print(f"load average at start: {' '.join(load)}", flush=True)
    results = []
    for case in args.case or DEFAULT_CASES:
        cmd = [sys.executable, __file__, "--child", case, "--reps", str(args.reps)]
        cmd += ["--threads", str(args.threads)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode or not line:
            tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
            print(f"{case}: failed (exit {p.returncode}): {' | '.join(tail)}", flush=True)
            continue
        row = json.loads(line[0][7:])
        results.append(row)
        print(
            f"{case:30s} rows {row['rows']:3d} tokens {row['tokens']:6d} max_row {row['max_row']:5d}"
            f"  rss {row['rss_before_gb']:.2f} GB  peak {row['peak_gb']:.2f}  rise "
            f"{row['rise_gb']:.2f} GB  {row['seconds']:.1f} s  {row['tokens_per_s']:.0f} tok/s"
            f"  cpu {row['cpu_seconds']:.1f} s  {row['tokens_per_cpu_s']:.0f} tok/cpu-s",
            flush=True,
        )
    for r in results:  # each rankgym case against the other sides' runs of its batch and dtype
        for o in results:
            same = [o[k] == r[k] for k in ("batch", "micro", "dtype")]
            if r["side"] == "rankgym" and o["side"] != "rankgym" and all(same):
                print(
                    f"{r['case']} vs {o['case']}: peak rise {r['rise_gb'] / max(o['rise_gb'], 1e-9):.2f}x"
                    f", tokens/s {r['tokens_per_s'] / o['tokens_per_s']:.2f}x"
                    f", tokens/cpu-s {r['tokens_per_cpu_s'] / o['tokens_per_cpu_s']:.2f}x"
                )
    with open("/proc/loadavg") as fh:
        print(f"load average at end: {' '.join(fh.read().split()[:3])}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_start": load, "rows": results}, fh, indent=1)


if __name__ == "__main__":
    main()
