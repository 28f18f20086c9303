"""Torch threads vs other load: rollout throughput with 1, 2 and ``auto`` threads.

On a small CPU box shared with other work, OpenMP threads that outnumber the free cores stall
each other at every barrier. This measures batched rollout throughput (the embedded policy on
``rankgym/ToolUse-v0``, same tasks and seeds every time) with 0 and then 1 busy-looping
background process, for each thread setting, and what ``rankgym.threads.choose_threads`` picks.

    RANKGYM_CACHE=/tmp/rgcache HF_HUB_OFFLINE=1 .venv/bin/python bench/threads.py

Each cell is a separate subprocess, so the thread pool is fresh and ``auto`` samples the
load the burners create (``/proc/stat`` over 0.3 s at start).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _burn() -> None:
    while True:
        pass


def _cell(threads: str, tasks: int, group_size: int, max_new_tokens: int) -> dict:
    """One measurement in this process (called via ``--cell``)."""
    import torch

    from rankgym.envs.policies import make_policy
    from rankgym.envs.rollout import rollout_groups
    from rankgym.threads import set_torch_threads

    if threads == "auto":
        os.environ.pop("RANKGYM_THREADS", None)
        n = set_torch_threads()
    else:
        n = int(threads)
        torch.set_num_threads(n)
    policy = make_policy("embedded", max_new_tokens=max_new_tokens, temperature=1.0, seed=0)
    rollout_groups("rankgym/ToolUse-v0", policy, n_tasks=1, group_size=1, seed=1, progress=False)
    t0 = time.perf_counter()
    groups = rollout_groups(
        "rankgym/ToolUse-v0", policy, n_tasks=tasks, group_size=group_size, seed=0, progress=False
    )
    wall = time.perf_counter() - t0
    eps = sum(len(g.trajectories) for g in groups)
    return {"threads": threads, "torch_threads": n, "episodes": eps, "wall_s": round(wall, 2),
            "episodes_per_min": round(60 * eps / wall, 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--burners", default="0,1", help="background busy processes per round")
    ap.add_argument("--settings", default="1,2,auto")
    ap.add_argument("--cell", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell is not None:
        print(json.dumps(_cell(args.cell, args.tasks, args.group_size, args.max_new_tokens)))
        return

    rows = []
    for nb in (int(x) for x in args.burners.split(",")):
        burners = [mp.Process(target=_burn, daemon=True) for _ in range(nb)]
        for b in burners:
            b.start()
        if nb:
            time.sleep(2)
        for setting in args.settings.split(","):
            from rankgym.threads import other_busy_cores

            load = other_busy_cores(1.0)
            cmd = [sys.executable, __file__, "--cell", setting, "--tasks", str(args.tasks),
                   "--group-size", str(args.group_size), "--max-new-tokens", str(args.max_new_tokens)]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row.update(burners=nb, load_before=round(load, 2))
            rows.append(row)
            print(json.dumps(row), flush=True)
        for b in burners:
            b.terminate()
            b.join()
        time.sleep(5)

    print(
        "\n| background busy processes | threads | torch threads | busy cores before | episodes/min |"
    )
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['burners']} | {r['threads']} | {r['torch_threads']} | {r['load_before']} | {r['episodes_per_min']} |")  # fmt: skip


if __name__ == "__main__":
    main()
