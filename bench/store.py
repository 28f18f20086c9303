"""Store benchmark: insert 100k realistic trajectories, then time the dashboard's queries.

    python bench/store.py [--trajectories 100000] [--group-size 8] [--out /tmp/bench_store.db]

Prints inserts/s and p50/p95 latency of: listing a run's groups page by page, loading one
group with its scores, full-text search (trajectory hits and group filter), counting groups
with filters. Targets on the 2-core dev machine: >= 2,000 trajectories/s, p95 <= 100 ms.
The store is kept at --out so other benches (bench/dashboard.py) can reuse it.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from rankgym.envs.toolcalls import assistant_call
from rankgym.store import Store
from rankgym.types import Group, Judgement, JudgeSpec, Message, Trajectory, TrajectoryScore, Turn

WORDS = (
    "invoice meeting quarterly budget report shipment delayed contract renewal Alice Bob Carol "
    "Dana Evan Fiona Acme Globex Initech Umbrella Stark Wayne reimbursement flight hotel Berlin "
    "Tokyo Lisbon Toronto deadline Friday Monday review approve signed pending refund total "
    "amount USD EUR percent temperature convert kilometers miles calendar date weekday table "
    "lookup population capital reverse uppercase count letters tool result error answer"
).split()


def make_trajectory(rng: random.Random, env: str, task: str) -> Trajectory:
    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))

    msgs = [
        Message(role="system", content="You are an email assistant. " + text(30)),
        Message(role="user", content="Question: " + text(20) + "?"),
    ]
    turns = []
    for k in range(3):
        content = text(15)
        call = assistant_call("search_emails", {"keywords": text(3)}, f"call_{k}", content)
        msgs.append(Message.from_dict(call))
        turns.append(
            Turn(
                message_index=len(msgs) - 1,
                prompt_token_ids=[rng.randrange(49152) for _ in range(40)],
                completion_token_ids=[rng.randrange(49152) for _ in range(30)],
                completion_logprobs=[round(-rng.random() * 3, 4) for _ in range(30)],
            )
        )
        msgs.append(Message(role="tool", content=text(80), tool_call_id=f"call_{k}"))
    msgs.append(Message(role="assistant", content="Final answer: " + text(10)))
    return Trajectory(
        env_id=env,
        task_id=task,
        messages=msgs,
        turns=turns,
        verifiable_reward=rng.random(),
        metrics={"turns": 4, "tokens": 200},
    )


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def timed(fn, n: int) -> dict[str, float]:
    lat = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        lat.append((time.perf_counter() - t) * 1000)
    return {"p50_ms": round(statistics.median(lat), 2), "p95_ms": round(pct(lat, 0.95), 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=100_000)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--out", default="/tmp/bench_store.db")
    ap.add_argument("--runs", type=int, default=4)
    args = ap.parse_args()
    out = Path(args.out)
    for suffix in ("", "-wal", "-shm"):
        Path(str(out) + suffix).unlink(missing_ok=True)
    rng = random.Random(0)
    store = Store(out)
    spec = JudgeSpec(model="local/smollm2", rubric="bench")
    h = store.put_judge_spec(spec)
    n_groups = args.trajectories // args.group_size
    envs = ["rankgym/EmailSearch-v0", "rankgym/ToolUse-v0"]
    # Build objects first so the timing covers the store, not the random text generator.
    build_t = time.perf_counter()
    groups = []
    for i in range(n_groups):
        env = envs[i % 2]
        task = f"task-{i % 500}"
        trs = [make_trajectory(rng, env, task) for _ in range(args.group_size)]
        g = Group(
            run_id=f"run-{i % args.runs}",
            step=i // (n_groups // 50 or 1),
            env_id=env,
            task_id=task,
            trajectories=trs,
        )
        g.judgement = Judgement(
            group_id=g.id,
            spec_hash=h,
            scores=[
                TrajectoryScore(trajectory_id=t.id, score=rng.random(), rationale="bench")
                for t in trs
            ],
        )
        groups.append(g)
    build_s = time.perf_counter() - build_t
    size_kb = sum(len(m.to_json()) for m in groups[0].trajectories[0].messages) / 1024
    t0 = time.perf_counter()
    for g in groups:
        store.put_group(g)
    insert_s = time.perf_counter() - t0
    n_traj = n_groups * args.group_size
    ids = [g.id for g in groups]
    q = {
        "list_run_groups_page": timed(
            lambda i: store.list_groups(
                run_id=f"run-{i % args.runs}", limit=50, offset=50 * (i % 40)
            ),
            100,
        ),
        "count_run_groups": timed(lambda i: store.count_groups(run_id=f"run-{i % args.runs}"), 50),
        "load_group_with_scores": timed(lambda i: store.get_group(ids[(i * 7919) % len(ids)]), 200),
        "fts_search_trajectories": timed(
            lambda i: store.search(
                WORDS[i % len(WORDS)] + " " + WORDS[(i * 3) % len(WORDS)], limit=50
            ),
            100,
        ),
        "fts_filter_groups_page": timed(
            lambda i: store.list_groups(search=WORDS[(i * 5) % len(WORDS)], limit=50), 50
        ),
        "unlabeled_hack_filter_page": timed(
            lambda i: store.list_groups(labeled=False, hack_flagged=False, limit=50), 50
        ),
    }
    ro = Store(out, readonly=True)
    q["readonly_load_group"] = timed(lambda i: ro.get_group(ids[(i * 104729) % len(ids)]), 100)
    result = {
        "trajectories": n_traj,
        "avg_messages_kb": round(size_kb, 2),
        "insert_trajectories_per_s": round(n_traj / insert_s, 1),
        "insert_seconds": round(insert_s, 1),
        "object_build_seconds": round(build_s, 1),
        "db_mb": round(out.stat().st_size / 1e6, 1),
        "queries": q,
    }
    print(json.dumps(result, indent=2))
    worst = max(v["p95_ms"] for v in q.values())
    print(
        f"inserts/s {result['insert_trajectories_per_s']} (target >= 2000): "
        f"{'PASS' if result['insert_trajectories_per_s'] >= 2000 else 'FAIL'}; "
        f"worst query p95 {worst} ms (target <= 100): {'PASS' if worst <= 100 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
