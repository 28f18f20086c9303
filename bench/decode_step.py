"""One decode step of the embedded model: the growing KV cache against transformers' DynamicCache.

Same model (SmolLM2-135M, bf16), same random prompt batch, greedy, in one process with
``rankgym.heap``'s allocator settings (as every policy runs): prefill ``--rows`` x ``--tokens``,
then ``--steps`` one-token steps, timed per step; the two caches alternate ``--repeats`` times so
that load drift hits both. Prints the ms per step of each, their ratio, and whether the greedy
tokens were the same.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/decode_step.py --rows 18 --tokens 800
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=18)
    ap.add_argument("--tokens", type=int, default=800, help="cached tokens per row")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import torch
    from transformers import DynamicCache

    from rankgym.envs.policies.kvcache import growing_cache
    from rankgym.heap import bound_heap
    from rankgym.model import load_embedded

    torch.set_num_threads(args.threads)
    bound_heap()
    model, _ = load_embedded(dtype="bfloat16")
    model.eval()
    prompt = torch.randint(0, 49_000, (args.rows, args.tokens), generator=torch.Generator().manual_seed(0))  # fmt: skip
    makers = {
        "growing": lambda: growing_cache(model.config, args.steps),
        "dynamic": lambda: DynamicCache(config=model.config),
    }
    ms: dict[str, list[float]] = {k: [] for k in makers}
    tokens: dict[str, list[list[int]]] = {}
    for rep in range(args.repeats):
        for kind in list(makers) if rep % 2 == 0 else list(makers)[::-1]:
            cache = makers[kind]()
            out_toks = []
            with torch.inference_mode():
                out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
                    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                    out_toks.append(nxt)
                ms[kind].append((time.perf_counter() - t0) / args.steps * 1000)
            tokens[kind] = torch.cat(out_toks, 1).tolist()
            del cache, out
    res = {
        "rows": args.rows,
        "tokens": args.tokens,
        "threads": args.threads,
        "load_avg": os.getloadavg()[0],
        "ms_per_step": {k: [round(v, 1) for v in vs] for k, vs in ms.items()},
        "dynamic_vs_growing": round(min(ms["dynamic"]) / min(ms["growing"]), 2),
        "same_tokens": tokens["growing"] == tokens["dynamic"],
    }
    if args.json:
        print(json.dumps(res))
    else:
        print(
            f"{args.rows} rows x {args.tokens} tokens, {args.threads} thread(s): growing "
            f"{min(ms['growing']):.0f} ms/step, DynamicCache {min(ms['dynamic']):.0f} ms/step: "
            f"{res['dynamic_vs_growing']:.2f}x; same greedy tokens: {res['same_tokens']}"
        )


if __name__ == "__main__":
    main()
