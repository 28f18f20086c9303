"""The demo's held-out evaluation of a finished demo run's adapters, with a cap on episodes in
flight (issue 23): does the cap change the held-out numbers, and which episodes?

Re-runs exactly ``rankgym demo``'s evaluation (base, SFT, SFT+GRPO; test split, 18 tasks x 5
samples, the demo's seed and temperature, one shared base copy) of the adapters in ``--run``
with ``evaluate_policies(max_in_flight=N)``, and writes each policy's summary, peak RSS and every
episode's completion tokens to ``--json``. Two such files (e.g. ``--in-flight 0`` = all at once,
as before the cap, and ``--in-flight 30``) are compared with ``--compare A B``: same successes,
and how many episodes sampled other tokens.

What it does not do: train, judge, or change the demo.

    RANKGYM_CACHE=/tmp/h2/s4/cache .venv/bin/python bench/eval_in_flight.py --run RUN \
        --in-flight 30 --json /tmp/cap30.json
    .venv/bin/python bench/eval_in_flight.py --compare /tmp/all.json /tmp/cap30.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def evaluate(run: Path, in_flight: int | None, seed: int) -> dict[str, Any]:
    """The demo's evaluation of ``run``'s adapters; summaries, tokens per episode, peak RSS."""
    from memory import proc_status  # bench/memory.py, beside this script

    from rankgym.config import validate_config
    from rankgym.heap import bound_primitive_caches
    from rankgym.threads import set_torch_threads
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.demo import DEFAULT_STEPS, demo_config, policy_from_adapter
    from rankgym.trainer.evaluate import AdapterOffPolicy, evaluate_policies
    from rankgym.trainer.setup import check_env

    bound_primitive_caches()  # as the CLI does
    raw = demo_config(str(run), DEFAULT_STEPS, "judge+verifiable", seed)
    cfg = validate_config(raw, TrainConfig, "demo")
    env, _, _ = check_env(cfg)
    set_torch_threads()
    trained = policy_from_adapter(run / "adapter", "sft+grpo", cfg)
    policies = {
        "base": AdapterOffPolicy(trained, "base"),
        "sft": policy_from_adapter(run / "sft", "sft", cfg, share=trained),
        "trained": trained,
    }
    tokens: dict[str, dict[str, list[list[int]]]] = {}

    def keep(name: str, groups: list[Any]) -> None:
        tokens[name] = {
            f"{g.task_id}/{t.seed}": [tu.completion_token_ids for tu in t.turns]
            for g in groups
            for t in g.trajectories
        }

    t0 = time.perf_counter()
    res = evaluate_policies(env, policies, split=cfg.eval.split, n_tasks=cfg.eval.tasks,
                            samples=cfg.eval.samples, seed=cfg.seed, progress=False,
                            on_groups=keep, max_in_flight=in_flight)  # fmt: skip
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    return {
        "run": str(run),
        "in_flight": in_flight,
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_gb": round(proc_status("VmHWM") / 2**30, 3),
        "load_end": load,
        "policies": {
            k: {f: v[f] for f in ("successes", "n", "mean_turns")}
            for k, v in res["policies"].items()
        },  # fmt: skip
        "tokens": tokens,
    }


def compare(a: dict[str, Any], b: dict[str, Any]) -> None:
    for name in a["tokens"]:
        ta, tb = a["tokens"][name], b["tokens"][name]
        same = sum(ta[k] == tb.get(k) for k in ta)
        pa, pb = a["policies"][name], b["policies"][name]
        print(f"{name:8s} successes {pa['successes']}/{pa['n']} vs {pb['successes']}/{pb['n']}; "
              f"episodes with identical tokens {same}/{len(ta)}")  # fmt: skip
    print(f"in flight {a['in_flight']} vs {b['in_flight']}: {a['seconds']} s vs {b['seconds']} s, "
          f"peak {a['peak_gb']} vs {b['peak_gb']} GB")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--run", type=Path, help="a `rankgym demo --out` folder (adapter/, sft/)")
    ap.add_argument("--in-flight", type=int, default=30, help="episodes in flight; 0 = all")
    ap.add_argument("--seed", type=int, default=0, help="the demo's --seed")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two result files")
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        compare(a, b)
        return
    if args.run is None:
        sys.exit("eval_in_flight.py: pass --run RUN (a demo's --out folder) or --compare A B")
    out = evaluate(args.run, args.in_flight or None, args.seed)
    print(json.dumps({k: v for k, v in out.items() if k != "tokens"}))
    if args.json:
        Path(args.json).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
