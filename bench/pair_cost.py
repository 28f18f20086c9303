"""What the pairwise judge's two presentation orders cost per group, and what sharing the KV
cache of the prompts' common prefix would save (issue 22).

For each group in the stores: the pair prompts ``score_pairs`` sends (N(N-1) with both orders,
N(N-1)/2 with one), their prefill tokens, and the longest token prefix all of a group's pair
prompts share (chat template, system prompt, the task context: everything up to the first
attempt). With ``--judge DIR`` it also times ``score_pairs`` in both modes (one thread).

    .venv/bin/python bench/pair_cost.py --store S.db [--store ...] [--groups 8] [--judge DIR]

What it does not do: implement the KV sharing (it measures the upper bound of the saving: the
shared prefix computed once instead of once per prompt).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from rankgym.judges.pair_judge import decision_context, pair_messages
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.store import Store


def common_prefix(seqs: list[list[int]]) -> int:
    n = min(len(s) for s in seqs)
    for k in range(n):
        if any(s[k] != seqs[0][k] for s in seqs):
            return k
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", action="append", required=True)
    ap.add_argument("--groups", type=int, default=8, help="groups per store (default: 8)")
    ap.add_argument("--judge", metavar="DIR", help="a judge adapter dir: also time the scoring")
    ap.add_argument("--max-line-chars", type=int, default=120)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from rankgym.model import load_embedded

    torch.set_num_threads(1)
    base, tok = load_embedded()
    lm = None
    if args.judge:
        from peft import PeftModel

        lm = PeftModel.from_pretrained(base, args.judge).merge_and_unload().eval()
    rows = []
    for path in args.store:
        with Store(path, readonly=True) as s:
            groups = [s.get_group(g) for g in s.group_ids()[: args.groups]]
        for g in groups:
            p = build_prompt(g, default_rubric())
            labels = list(p.labels)
            both = [(a, b) for a in labels for b in labels if a != b]
            ctxs = [
                decision_context(tok, pair_messages(p.messages, a, b, args.max_line_chars))
                for a, b in both
            ]
            total = sum(len(c) for c in ctxs)
            shared = common_prefix(ctxs)
            row = {
                "store": path,
                "n": len(labels),
                "prompts_both_orders": len(ctxs),
                "tokens_both_orders": total,
                "shared_prefix_tokens": shared,
                "saving_if_shared": (len(ctxs) - 1) * shared / total,
            }
            if lm is not None:
                from rankgym.judges.pair_judge import model_scorer, score_pairs

                for orders in (1, 2):
                    t0 = time.perf_counter()
                    score_pairs(
                        model_scorer(lm, tok),
                        p.messages,
                        labels,
                        args.max_line_chars,
                        orders=orders,
                    )
                    row[f"seconds_orders_{orders}"] = time.perf_counter() - t0
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {
        k: statistics.median(r[k] for r in rows)
        for k in rows[0]
        if k not in ("store",) and isinstance(rows[0][k], (int, float))
    }
    print(json.dumps({"groups": len(rows), "median": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
