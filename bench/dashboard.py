"""Dashboard responsiveness on a 100k-trajectory store: per-page load times with AppTest.

Usage::

    .venv/bin/python bench/dashboard.py [--store /tmp/rankgym-bench/dashboard-100k.db]
        [--trajectories 100000] [--loads 20] [--rebuild]

Builds the store once through the public ``Store`` API (12,500 groups of 8 trajectories from
the sample generators, two runs, three envs, two judge specs, hack signals, ~500 human
rankings; about a minute on 2 cores, 650 MB) and reuses the file afterwards. Then, for each
page, in one AppTest session: one cold load (empty ``st.cache_data`` and no background
results), reruns until the page no longer says something is computing (``complete_after_s``),
then ``--loads - 1`` warm loads, as a person clicking around would see them. p95 is over all
``--loads`` loads (cold included). It prints one JSON line per page and a summary.

What it measures: server-side script time (queries, aggregation, element tree), not browser
rendering or network. Each run uses a fresh ``AppTest`` clock; numbers are wall time on
whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_STORE = Path("/tmp/rankgym-bench/dashboard-100k.db")
PAGES = ["runs", "groups", "label", "agreement", "hacks"]
GROUP_SIZE = 8


def build(path: Path, n_trajectories: int, seed: int = 0) -> dict:
    """Write a store of ``n_trajectories`` (groups of 8) at ``path`` through the Store API."""
    from rankgym.dashboard import sample
    from rankgym.store import Store
    from rankgym.types import Group

    rng = random.Random(seed)
    n_groups = n_trajectories // GROUP_SIZE
    envs = list(sample._MAKERS)
    tmp = path.with_name(path.name + ".building")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with Store(tmp) as s:
        s.create_run(name="bench-train", kind="train")
        s.create_run(name="bench-rollout", kind="rollout")
        s.put_judge_spec(sample.LOCAL_SPEC)
        s.put_judge_spec(sample.API_SPEC)
        n_train = n_groups * 2 // 3
        per_step = 3 * 10
        batch: list[Group] = []
        for i in range(n_groups):
            train = i < n_train
            env_id = envs[i % 3]
            step = i // per_step if train else 0
            task = f"{env_id.split('/')[1][:4]}-{i}"
            p_good = min(0.9, 0.2 + 0.002 * step) if train else 0.5
            trajs = [
                sample._trajectory(rng, env_id, task, k, good=rng.random() < p_good)
                for k in range(GROUP_SIZE)
            ]
            if rng.random() < 0.03:
                trajs[0].hack_signals = ["visible_pass_hidden_fail"]
            g = Group(
                id=f"grp-{i:06d}",
                run_id="bench-train" if train else "bench-rollout",
                step=step,
                env_id=env_id,
                task_id=task,
                trajectories=trajs,
            )
            g.judgement = sample._judge(rng, sample.LOCAL_SPEC, g, fooled=rng.random() < 0.05)
            batch.append(g)
            if len(batch) == 200:
                s.put_groups(batch)
                batch = []
                done = i + 1
                el = time.perf_counter() - t0
                print(
                    f"\r{done * GROUP_SIZE} trajectories, {el:.0f}s, "
                    f"eta {el / done * (n_groups - done):.0f}s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
            if train and i % per_step == per_step - 1:
                s.log_step(
                    "bench-train",
                    step,
                    {
                        "reward_mean": 0.3 + 0.002 * step,
                        "kl": 1e-4 * step,
                        "zero_variance_groups": rng.randint(0, 5),
                        "loss": rng.uniform(-0.05, 0.05),
                    },
                )
        s.put_groups(batch)
        ids = [f"grp-{i:06d}" for i in range(n_groups)]
        for gid in rng.sample(ids, n_groups // 5):
            g = s.get_group(gid)
            s.put_judgement(sample._judge(rng, sample.API_SPEC, g))
        for k, gid in enumerate(rng.sample(ids, min(500, n_groups))):
            g = s.get_group(gid)
            for who in ("alice", "bob") if k % 5 == 0 else ("alice",):
                order = sorted(g.trajectories, key=lambda t: rng.random())
                s.add_human_ranking(gid, who, {t.id: float(r + 1) for r, t in enumerate(order)})
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    tmp.replace(path)
    print(file=sys.stderr)
    return {"built_s": round(time.perf_counter() - t0, 1), "groups": n_groups}


def measure(path: Path, loads: int) -> list[dict]:
    """Time ``loads`` runs of every page in one AppTest session (first = cold)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    import rankgym.judges.agreement  # noqa: F401  (a server imports scipy once, not per page)
    from rankgym.dashboard import data

    os.environ["RANKGYM_STORE"] = str(path)
    app = Path(__file__).resolve().parent.parent / "dashboard" / "app.py"
    at = AppTest.from_file(str(app), default_timeout=120)
    at.run()  # imports and the default page, not timed
    at.session_state["labeler_name"] = "bench"
    out = []
    for page in PAGES:
        st.cache_data.clear()  # cold: nothing cached for this page's queries
        data.BACKGROUND = data.Background()
        at.switch_page(f"views/{page}.py")
        t_first = time.perf_counter()
        at.run()
        cold = time.perf_counter() - t_first
        if at.exception:
            raise RuntimeError(f"{page}: {at.exception[0].value}")
        while _incomplete(at):  # slow results still computing in the background
            time.sleep(0.2)
            at.run()
        complete_s = time.perf_counter() - t_first
        times = [cold]
        for _ in range(loads - 1):
            t = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - t)
            if at.exception:
                raise RuntimeError(f"{page}: {at.exception[0].value}")
        warm = sorted(times[1:]) or times
        row = {
            "page": page,
            "cold_s": round(times[0], 3),
            "warm_p50_s": round(statistics.median(warm), 3),
            "warm_p95_s": round(_p95(warm), 3),
            "all_p95_s": round(_p95(times), 3),
            "max_s": round(max(times), 3),
            "complete_after_s": round(complete_s, 2),
            "loads": loads,
        }
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def _p95(xs: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    xs = sorted(xs)
    return xs[max(0, math.ceil(0.95 * len(xs)) - 1)]


def _incomplete(at) -> bool:
    """Whether the page still says something is being computed in the background."""
    texts = [e.value for e in at.info] + [e.value for e in at.caption]
    return any("Computing" in t or "updating" in t or "still being computed" in t for t in texts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", type=Path, default=DEFAULT_STORE)
    p.add_argument("--trajectories", type=int, default=100_000)
    p.add_argument("--loads", type=int, default=20)
    p.add_argument("--rebuild", action="store_true")
    p.add_argument("--build-only", action="store_true")
    args = p.parse_args()
    if args.rebuild or not args.store.exists():
        print(json.dumps({"build": build(args.store, args.trajectories)}), flush=True)
    from rankgym.store import Store

    with Store(args.store, readonly=True) as s:
        n = s.count_trajectories()
    size_mb = args.store.stat().st_size / 1e6
    print(json.dumps({"store": str(args.store), "trajectories": n, "size_mb": round(size_mb)}))
    if args.build_only:
        return
    rows = measure(args.store, args.loads)
    worst = max(r["all_p95_s"] for r in rows)
    print(
        json.dumps(
            {
                "worst_page_p95_s": worst,
                "target_s": 1.0,
                "ok": worst <= 1.0,
                "slowest_complete_s": max(r["complete_after_s"] for r in rows),
            }
        )
    )


if __name__ == "__main__":
    main()
