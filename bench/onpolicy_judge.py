"""Where an on-policy judge is right and wrong: held-out pairs by length side, and an arm's groups.

``heldout OUT``: a ``rankgym judge-train --out OUT`` run's held-out pairs (``data/heldout.jsonl``)
and its judged rows (``work/judged/``): pairwise accuracy (both orders averaged, 95% task
bootstrap) per store, per task family-difficulty of the policy's store (``--policy-store``,
default ``rollout.db``), and split by which side the winner is on: longer, shorter, loser
answered. A judge whose accuracy equals "shorter wins" and is near 0 on longer-wins pairs
learnt length, not the task.

``arm STORE``: a GRPO run's store: judge vs verifier per step (pairs whose verifier rewards
differ), and inside the pairs the verifier ties, how often the judge prefers the shorter
trajectory and the one with fewer tool calls (the monitor does not score those pairs, GRPO
still follows them).

    .venv/bin/python bench/onpolicy_judge.py heldout /tmp/h4/s4/judgeB
    .venv/bin/python bench/onpolicy_judge.py arm /tmp/h4/s4/ablB/<arm>/store.db

What it does not do: judge anything (it reads stored verdicts) or run a model.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import random
from pathlib import Path

from rankgym.judges.judge_data import PairItem, tool_call_count, visible_length
from rankgym.store import Store


def _ci(by_task: dict[str, list[float]], seed: int = 0, n: int = 2000) -> tuple[float, float]:
    rng, keys, stats = random.Random(seed), list(by_task), []
    for _ in range(n):
        xs = [x for k in (rng.choice(keys) for _ in keys) for x in by_task[k]]
        stats.append(sum(xs) / len(xs))
    stats.sort()
    return stats[int(0.025 * n)], stats[int(0.975 * n) - 1]


def heldout(out: Path, policy_store: str) -> None:
    """Print the held-out accuracy of the judge trained in ``out``, sliced as the docstring says."""
    pairs = {}
    for line in (out / "data" / "heldout.jsonl").read_text().splitlines():
        p = PairItem.from_dict(json.loads(line))
        lw, ll = visible_length(p.winner), visible_length(p.loser)
        pairs[p.id] = (p, 1.0 if lw > ll else 0.5 if lw == ll else 0.0)
    acc: dict[str, list[float]] = collections.defaultdict(list)
    for r in json.loads(
        Path(sorted(glob.glob(str(out / "work" / "judged" / "*.json")))[-1]).read_text()
    ):
        if r["winner"] is not None:
            acc[r["pair"]].append(1.0 if r["winner"] > r["loser"] else 0.5 if r["winner"] == r["loser"] else 0.0)  # fmt: skip

    def row(name: str, ids: list[str]) -> None:
        ids = [i for i in ids if i in acc]
        if not ids:
            return
        by_task: dict[str, list[float]] = collections.defaultdict(list)
        for i in ids:
            by_task[pairs[i][0].task_id].append(sum(acc[i]) / len(acc[i]))
        mean = sum(sum(v) for v in by_task.values()) / len(ids)
        lo, hi = _ci(by_task)
        longer = sum(pairs[i][1] for i in ids) / len(ids)
        print(f"{name:48s} {mean:.3f} [{lo:.2f}, {hi:.2f}]  pairs {len(ids):3d} tasks {len(by_task):3d}  longer wins {longer:.2f}")  # fmt: skip

    row("all held-out", list(pairs))
    for store in sorted({Path(p.store).name for p, _ in pairs.values()}):
        row(f"store {store}", [i for i, (p, _) in pairs.items() if Path(p.store).name == store])
    pol = [i for i, (p, _) in pairs.items() if Path(p.store).name == policy_store]
    fam = lambda i: "-".join(pairs[i][0].task_id.split("-")[1:3])  # noqa: E731
    for f in sorted({fam(i) for i in pol}):
        row(f"  policy {f}", [i for i in pol if fam(i) == f])
    row("policy, the longer one won", [i for i in pol if pairs[i][1] == 1.0])
    row("policy, the shorter one won", [i for i in pol if pairs[i][1] == 0.0])
    row("policy, the loser answered", [i for i in pol if not pairs[i][0].loser.truncated])


def arm(store_path: str) -> None:
    """Print judge vs verifier per GRPO step of the run in ``store_path``, and the tied pairs."""
    c: collections.Counter[str] = collections.Counter()
    with Store(store_path, readonly=True) as s:
        groups = [s.get_group(g) for g in s.group_ids()]
    for step in sorted({g.step for g in groups}):
        ok = n = 0.0
        for g in (g for g in groups if g.step == step):
            sc = {x.trajectory_id: x.score for x in (g.judgement.scores if g.judgement else [])}
            ts = [t for t in g.trajectories if t.id in sc]
            for k, a in enumerate(ts):
                for b in ts[k + 1 :]:
                    ra, rb = a.verifiable_reward or 0.0, b.verifiable_reward or 0.0
                    if ra != rb:
                        n += 1
                        ok += 1.0 if (sc[a.id] - sc[b.id]) * (ra - rb) > 0 else 0.5 if sc[a.id] == sc[b.id] else 0.0  # fmt: skip
                    elif sc[a.id] != sc[b.id]:
                        w, lo = (a, b) if sc[a.id] > sc[b.id] else (b, a)
                        if visible_length(w) != visible_length(lo):
                            c["tied"] += 1
                            c["tied_shorter"] += visible_length(w) < visible_length(lo)
                        if tool_call_count(w) != tool_call_count(lo):
                            c["tied_calls"] += 1
                            c["tied_fewer_calls"] += tool_call_count(w) < tool_call_count(lo)
        print(f"step {step}: judge~verifier pairwise {ok / max(n, 1):.2f} ({int(n)} pairs)")
    print(
        f"verifier-tied pairs: judge prefers the shorter {c['tied_shorter'] / max(c['tied'], 1):.2f} "
        f"of {c['tied']}, fewer tool calls {c['tied_fewer_calls'] / max(c['tied_calls'], 1):.2f} "
        f"of {c['tied_calls']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("heldout")
    h.add_argument("out", type=Path)
    h.add_argument("--policy-store", default="rollout.db")
    a = sub.add_parser("arm")
    a.add_argument("store")
    args = ap.parse_args()
    if args.cmd == "heldout":
        heldout(args.out, args.policy_store)
    else:
        arm(args.store)


if __name__ == "__main__":
    main()
