"""The policy's token draw: inverse CDF (``sample_rows``) against ``torch.multinomial`` per row.

Both draw one token per row from the same probabilities (a softmax at temperature 0.7 over a
SmolLM2-sized vocabulary), each row from its own generator, as ``TransformersPolicy`` does at
every decode step; the two alternate ``--repeats`` times in one process. Prints ms per decode
step of each (the softmax both need included) and their ratio.

    .venv/bin/python bench/sampler.py --rows 18,30 --threads 2
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="1,6,18,30", help="comma list of batch sizes")
    ap.add_argument("--vocab", type=int, default=49_152)
    ap.add_argument("--steps", type=int, default=50, help="decode steps timed per repeat")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import torch

    from rankgym.envs.policies.sampling import sample_rows

    torch.set_num_threads(args.threads)

    def multinomial(p: torch.Tensor, gens: list[torch.Generator]) -> torch.Tensor:
        return torch.stack([torch.multinomial(p[j], 1, generator=g)[0] for j, g in enumerate(gens)])  # fmt: skip

    draws = {"inverse-cdf": sample_rows, "multinomial": multinomial}
    out = []
    for rows in [int(r) for r in args.rows.split(",")]:
        logits = torch.randn(rows, args.vocab, generator=torch.Generator().manual_seed(rows)) * 3
        gens = [torch.Generator().manual_seed(i) for i in range(rows)]
        ms: dict[str, list[float]] = {k: [] for k in draws}
        for rep in range(args.repeats):
            for name in list(draws) if rep % 2 == 0 else list(draws)[::-1]:
                draw = draws[name]
                draw(torch.softmax(logits / 0.7, dim=-1), gens)  # warm-up
                t = time.perf_counter()
                for _ in range(args.steps):
                    draw(torch.softmax(logits / 0.7, dim=-1), gens)
                ms[name].append((time.perf_counter() - t) / args.steps * 1e3)
        row = {k: round(min(v), 2) for k, v in ms.items()}
        row |= {"rows": rows, "speedup": round(row["multinomial"] / row["inverse-cdf"], 1)}
        out.append(row)
        if not args.json:
            print(f"{rows:3d} rows: inverse-cdf {row['inverse-cdf']:6.2f} ms/step, "
                  f"multinomial {row['multinomial']:6.2f} ms/step: {row['speedup']}x")  # fmt: skip
    if args.json:
        print(json.dumps({"threads": args.threads, "vocab": args.vocab, "rows": out}))


if __name__ == "__main__":
    main()
