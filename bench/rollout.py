"""Rollout throughput: batched generation across episodes vs one episode at a time.

Same model (the embedded SmolLM2-135M policy, loaded once), same tasks, same seeds, same
process: ``rollout_groups`` with every episode in flight (one batched ``generate`` per round)
against ``max_concurrent=1`` (each episode runs alone). Because sampling is seeded per episode,
both modes produce (nearly) the same tokens, so the comparison is of the same work; the script
reports how many trajectories came out token-identical.

    RANKGYM_CACHE=/tmp/rgcache HF_HUB_OFFLINE=1 .venv/bin/python bench/rollout.py \\
        --tasks 2 --group-size 8 --max-new-tokens 48 --repeats 2

The demo's workload (3 hard tasks x 6 episodes, up to 4 turns of 64 tokens at T 0.7) through an
SFT adapter (the demo writes one to OUT/sft), KV reuse against the batched path before it and
against transformers' ``generate``, in one run with the same seeds:

    .venv/bin/python bench/rollout.py --demo --adapter OUT/sft --modes kv-reuse,batched,hf-generate
    # the growing KV cache against transformers' DynamicCache (a copy of every layer per step)
    .venv/bin/python bench/rollout.py --demo --adapter OUT/sft --modes kv-reuse,kv-reuse-concat --repeats 2
    # the inverse-CDF sampler against torch.multinomial per row (same distribution, other draws)
    .venv/bin/python bench/rollout.py --demo --adapter OUT/sft --modes kv-reuse,kv-reuse-multinomial --repeats 2
    # the LoRA merged into the weights while sampling against peft's LoRA layers
    .venv/bin/python bench/rollout.py --demo --adapter OUT/sft --modes kv-reuse,kv-reuse-unmerged,batched --repeats 2

``--vllm URL`` (a running server for the same model, LoRA enabled, rank >= 16) or ``--vllm
serve`` (start one; see ``rankgym.envs.vllm_server``) adds the vLLM modes: the same episodes
through the server's base model and through a LoRA adapter (r=16 on all projections, random
non-zero weights, loaded at run time), each against the embedded batched path and the embedded
default (KV reuse) measured in the same run. The vLLM modes need ``make vllm-venv``; with
``--vllm`` the sequential mode is skipped unless ``--sequential`` is given:

    RANKGYM_CACHE=/tmp/rgcache .venv/bin/python bench/rollout.py --vllm serve \\
        --tasks 8 --group-size 8 --max-new-tokens 48

The machine is shared: the 1-minute load average before and after each mode is printed, and
``--repeats`` alternates the modes so that load drift hits both. ``--threads`` defaults to 1:
with other busy processes on 2 cores, 2 OpenMP threads stall each other (measured 10-20x
slower decode steps), which would measure the scheduler, not the rollout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


DEMO = {  # trainer/demo.py's GRPO rollout: 3 hard tasks (one per family) x 6 episodes, 4 turns
    "env_kwargs": '{"difficulty": "hard", "families": ["lookup", "units", "dates"]}',
    "tasks": 3,
    "group_size": 6,
    "max_new_tokens": 64,
    "temperature": 0.7,
    "max_turns": 4,
    "stratify": "family",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="rankgym/ToolUse-v0")
    ap.add_argument("--env-kwargs", default="{}", help="JSON env kwargs")
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-turns", type=int, default=None)
    ap.add_argument("--stratify", default=None, help="balance tasks over this task field")
    ap.add_argument("--demo", action="store_true", help="the demo's GRPO rollout settings (DEMO)")
    ap.add_argument("--adapter", metavar="DIR", help="sample through this LoRA (e.g. an SFT one)")
    ap.add_argument(
        "--modes",
        default="sequential,batched",
        help="comma list of: kv-reuse (prefill shared prompts once, extend caches across turns, "
        "the batch cache grows in place, the LoRA merged into the weights while sampling: "
        "today's path), kv-reuse-multinomial (the same with torch.multinomial per row: the sampler "
        "before the inverse-CDF one), kv-reuse-unmerged (the same through peft's LoRA layers: the path before "
        "the merge), kv-reuse-concat (kv-reuse-unmerged with transformers' "
        "DynamicCache, which copies the cache at every step: the path before the growing cache), "
        "batched (one full prefill per turn, DynamicCache: the path before KV reuse), hf-generate "
        "(transformers' generate on the same batches), sequential (batched, one episode at a "
        "time); default: sequential,batched",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: see module doc)")
    ap.add_argument("--vllm", metavar="URL|serve", help="also measure a vLLM server (module doc)")
    ap.add_argument(
        "--sequential", action="store_true", help="keep the sequential mode with --vllm"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.demo:
        for k, v in DEMO.items():
            setattr(args, k, v)

    import torch

    from rankgym.envs.policies import TransformersPolicy
    from rankgym.envs.rollout import rollout_groups, summarize
    from rankgym.model import auto_dtype, shared_embedded

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model, tok = shared_embedded(auto_dtype("cpu"))
    if args.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, args.adapter)
        model.eval()
    sampling = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed)  # fmt: skip
    name = "embedded" + ("+adapter" if args.adapter else "")
    policy = TransformersPolicy(model, tok, name=name, reuse_kv=False, grow_kv=False, merge_lora=False, **sampling)  # fmt: skip
    load_s = time.perf_counter() - t0
    env_kwargs = json.loads(args.env_kwargs)
    from rankgym.envs.registry import make

    def env() -> Any:
        return make(args.env, **env_kwargs)

    common = dict(n_tasks=args.tasks, group_size=args.group_size, seed=args.seed, progress=False,
                  max_turns=args.max_turns, stratify=args.stratify)  # fmt: skip
    # warm-up: one short episode so that lazy initialisation is not timed
    rollout_groups(env, policy, n_tasks=1, group_size=1, seed=args.seed + 1, progress=False)

    policies: dict[str, Any] = {"batched": policy, "sequential": policy}
    policies["kv-reuse"] = TransformersPolicy(model, tok, name=name, **sampling)
    policies["kv-reuse-multinomial"] = MultinomialPolicy(model, tok, name=name, **sampling)
    policies["kv-reuse-unmerged"] = TransformersPolicy(model, tok, name=name, merge_lora=False, **sampling)  # fmt: skip
    policies["kv-reuse-concat"] = TransformersPolicy(model, tok, name=name, grow_kv=False, merge_lora=False, **sampling)  # fmt: skip
    policies["hf-generate"] = HFGeneratePolicy(model, tok, name=name, reuse_kv=False, merge_lora=False, **sampling)  # fmt: skip
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    vllm = None
    if args.vllm:
        vllm = VLLMModes(args.vllm, args)
        policies.update(vllm.policies)
        # the batched path the vLLM rows were first measured against, and today's default (KV reuse)
        modes = ["batched", "kv-reuse", *vllm.policies] + (
            ["sequential"] if args.sequential else []
        )
    results: dict[str, list[dict]] = {m: [] for m in modes}
    tokens: dict[str, list] = {}
    for rep in range(args.repeats):
        order = modes if rep % 2 == 0 else modes[::-1]
        for mode in order:
            load_before = os.getloadavg()[0]
            start = time.perf_counter()
            groups = rollout_groups(
                env,
                policies[mode],
                max_concurrent=1 if mode == "sequential" else None,
                **common,
            )
            wall = time.perf_counter() - start
            s = summarize(groups, wall)
            s["load_before"], s["load_after"] = round(load_before, 2), round(os.getloadavg()[0], 2)
            results[mode].append(s)
            tokens[mode] = [
                [turn.completion_token_ids for turn in t.turns]
                for g in groups
                for t in g.trajectories
            ]
            print(
                f"[{mode:11s}] {s['trajectories']} episodes in {wall:6.1f} s = "
                f"{s['episodes_per_min']:6.1f} episodes/min, {s['tokens_per_s']:6.1f} tok/s, "
                f"{s['completion_tokens']} tokens, mean turns {s['mean_turns']:.2f}, "
                f"load {s['load_before']}->{s['load_after']}",
                flush=True,
            )

    def best(mode: str) -> dict:
        return max(results[mode], key=lambda s: s["episodes_per_min"])

    if vllm is not None:
        out = vllm.report(results, best, args)
        vllm.close()
        print(json.dumps(out) if args.json else _vllm_lines(out))
        return
    out = {
        "env": args.env,
        "env_kwargs": env_kwargs,
        "policy": name,
        "tasks": args.tasks,
        "group_size": args.group_size,
        "episodes": args.tasks * args.group_size,
        "max_new_tokens": args.max_new_tokens,
        "max_turns": args.max_turns,
        "temperature": args.temperature,
        "threads": args.threads,
        "model_load_s": round(load_s, 2),
        "runs": results,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, torch {torch.__version__}",
    }
    for m in modes:
        out[f"{m}_tokens_per_s"] = best(m)["tokens_per_s"]
        out[f"{m}_episodes_per_min"] = best(m)["episodes_per_min"]
    lines = []
    ref = modes[0]
    for m in modes[1:]:
        same = sum(a == b for a, b in zip(tokens[ref], tokens[m], strict=True))
        ratio = best(ref)["tokens_per_s"] / max(best(m)["tokens_per_s"], 1e-9)
        out[f"{ref}_vs_{m}"] = round(ratio, 2)
        out[f"token_identical_{ref}_vs_{m}"] = f"{same}/{len(tokens[ref])}"
        lines.append(f"{ref} vs {m}: {ratio:.2f}x tok/s (token-identical trajectories: {same}/{len(tokens[ref])})")  # fmt: skip
    print(json.dumps(out) if args.json else "\n".join(lines))


class MultinomialPolicy:
    """``TransformersPolicy`` (KV reuse, the default path) drawing each row's token with
    ``torch.multinomial`` on its generator: the sampler before the inverse-CDF one (one
    exponential per vocabulary entry per row per token; same distribution, other draws)."""

    def __new__(cls, *a: Any, **kw: Any) -> Any:
        from rankgym.envs.policies import TransformersPolicy

        class _Multinomial(TransformersPolicy):
            def _draw(self, probs: Any, gens: list[Any]) -> Any:
                import torch

                return torch.stack(
                    [torch.multinomial(probs[j], 1, generator=g)[0] for j, g in enumerate(gens)]
                )

        return _Multinomial(*a, **kw)


class HFGeneratePolicy:
    """``TransformersPolicy`` whose sampling is transformers' ``model.generate`` on the same
    left-padded batches (its own sampler and RNG: same workload, not the same tokens)."""

    def __new__(cls, *a: Any, **kw: Any) -> Any:
        from rankgym.envs.policies import TransformersPolicy

        class _HF(TransformersPolicy):
            def _sample(self, prompts, seeds, entries=None, kept=None):  # type: ignore[override]
                import torch

                n, width = len(prompts), max(len(p) for p in prompts)
                ids = torch.full((n, width), self.pad_id, dtype=torch.long)
                att = torch.zeros((n, width), dtype=torch.long)
                for r, p in enumerate(prompts):
                    ids[r, width - len(p) :] = torch.tensor(p)
                    att[r, width - len(p) :] = 1
                torch.manual_seed(seeds[0])
                sample = self.temperature > 0
                with torch.inference_mode():
                    out = self.model.generate(
                        input_ids=ids, attention_mask=att, max_new_tokens=self.max_new_tokens,
                        do_sample=sample, temperature=self.temperature if sample else None,
                        top_p=self.top_p if sample else None, top_k=None,
                        eos_token_id=sorted(self.eos_ids), pad_token_id=self.pad_id,
                    )  # fmt: skip
                res = []
                for row in out[:, width:].tolist():
                    cut = next((i + 1 for i, t in enumerate(row) if t in self.eos_ids), len(row))
                    res.append((row[:cut], [0.0] * cut))
                return res

        return _HF(*a, **kw)


class VLLMModes:
    """The vLLM server policies: base model and a random LoRA adapter loaded at run time."""

    def __init__(self, where: str, args: argparse.Namespace) -> None:
        from rankgym.envs.policies import make_policy

        spec = "vllm:serve" if where == "serve" else f"vllm:{where}"
        t0 = time.perf_counter()
        sampling = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed)  # fmt: skip
        base = make_policy(spec, **sampling)
        self.start_s = time.perf_counter() - t0
        self.rss = base.server.rss_gib() if base.server else None
        self.dir = Path(tempfile.mkdtemp(prefix="bench-lora-"))
        _random_adapter(self.dir)
        base.client.load_lora("bench@lora", self.dir)
        lora = make_policy(f"vllm:{base.client.base_url}@bench@lora", **sampling)
        self.base, self.lora = base, lora
        self.policies = {"vllm-base": base, "vllm-lora": lora}

    def report(self, results: dict[str, list[dict]], best: Any, args: argparse.Namespace) -> dict:
        import torch

        ref = best("batched")["tokens_per_s"]
        out = {
            "env": args.env, "episodes": args.tasks * args.group_size, "max_new_tokens": args.max_new_tokens,
            "temperature": args.temperature, "threads": args.threads,
            "server_start_s": round(self.start_s, 1), "server_rss_gib": self.rss and round(self.rss, 2),
            "embedded_batched_tokens_per_s": ref, "runs": results,
            "machine": f"{platform.machine()} {os.cpu_count()} cpus, torch {torch.__version__}",
        }  # fmt: skip
        reuse = best("kv-reuse")["tokens_per_s"] if results.get("kv-reuse") else None
        out["embedded_kv_reuse_tokens_per_s"] = reuse
        for mode in ("vllm-base", "vllm-lora"):
            tps = best(mode)["tokens_per_s"]
            out[f"{mode}_tokens_per_s"] = tps
            out[f"{mode}_vs_embedded"] = round(tps / ref, 2) if ref else None
            out[f"{mode}_vs_kv_reuse"] = round(tps / reuse, 2) if reuse else None
        return out

    def close(self) -> None:
        self.base.client.unload_lora("bench@lora")
        self.lora.close()
        self.base.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _random_adapter(path: Path) -> None:
    """A LoRA adapter (r=16, every projection) with non-zero weights for the embedded model."""
    import torch
    from peft import LoraConfig, get_peft_model

    from rankgym.model import load_embedded

    model, _ = load_embedded("float32")
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    torch.manual_seed(0)
    peft = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=targets))
    with torch.no_grad():
        for name, w in peft.named_parameters():
            if "lora_B" in name:
                w.normal_(0, 0.02)
    peft.save_pretrained(str(path))


def _vllm_lines(out: dict) -> str:
    return (
        f"embedded batched {out['embedded_batched_tokens_per_s']} tok/s, with KV reuse (the "
        f"default) {out['embedded_kv_reuse_tokens_per_s']} tok/s; vLLM base "
        f"{out['vllm-base_tokens_per_s']} tok/s ({out['vllm-base_vs_embedded']}x batched, "
        f"{out['vllm-base_vs_kv_reuse']}x KV reuse), through a LoRA {out['vllm-lora_tokens_per_s']} "
        f"tok/s ({out['vllm-lora_vs_embedded']}x, {out['vllm-lora_vs_kv_reuse']}x); server start "
        f"{out['server_start_s']} s, RSS {out['server_rss_gib']} GiB"
    )


if __name__ == "__main__":
    main()
