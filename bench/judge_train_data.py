"""Mixed-quality groups for ``rankgym judge-train``: the env's oracle at graded noise, into a store.

Each group holds ``--group-size`` trajectories of one task from the oracle with per-turn noise
0, ..., 1 (the ``NoisyOracle`` of ``bench/judge_tokens.py``: with probability p a random tool
call instead of the oracle's next step). Noisy trajectories are often long *and* wrong, which
the oracle-vs-random stores lack (there the winner is nearly always the longer one, and the
length balance of ``rankgym.judges.judge_data`` drops most pairs).

    .venv/bin/python bench/judge_train_data.py --env rankgym/EmailSearch-v0 --groups 60 \
        --store /tmp/judge-data/email.db

Until ``rankgym rollout --policy oracle~0.5`` exists this is the way to get such data; it
writes groups with run id ``noisy-oracle`` (rerunning adds another run with a suffix).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_tokens import add_group_arguments, make_groups  # noqa: E402

from rankgym.store import Store  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_group_arguments(ap, groups=60)
    ap.add_argument("--store", required=True)
    args = ap.parse_args(argv)
    groups = make_groups(args.env, args.groups, args.group_size, args.seed)
    with Store(args.store) as store:
        run = "noisy-oracle"
        existing = {r["id"] for r in store.runs()}
        k = 1
        while run in existing:
            k += 1
            run = f"noisy-oracle-{k}"
        for g in groups:
            g.run_id = run
        store.put_groups(groups)
    rewards = [t.verifiable_reward for g in groups for t in g.trajectories]
    print(json.dumps({"env": args.env, "groups": len(groups), "run_id": run,
                      "mean_verifiable_reward": sum(r or 0 for r in rewards) / len(rewards)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
