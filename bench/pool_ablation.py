"""Pool `bench/reward_ablation.py` evaluations of several seeds: paired gains and their ratio.

Each input is an ``OUT/eval-seed<N>.json`` that reward_ablation wrote (it holds every held-out
episode's success per task). For each file and pooled over all of them it prints, paired on
the same episodes: ``arm - baseline``, ``peer - baseline``, ``arm - peer`` in points and the
ratio of the two gains, ``(arm - baseline) / (peer - baseline)``, each with a 95% bootstrap
interval. The pooled bootstrap is stratified: every resample draws each seed's tasks from that
seed's own tasks (seeds are the design, not a sample), so a seed's weight stays its episodes.

What it does not do: choose which seeds to pool (pass every run you made) or test anything
beyond these intervals.

    .venv/bin/python bench/pool_ablation.py /tmp/abl3/eval-seed3.json /tmp/abl4/eval-seed4.json \
        --baseline sft --peer verifiable --arm judge-refresh
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

Table = dict[str, list[int]]


def _load(path: str, names: list[str]) -> dict[str, Table]:
    data = json.loads(Path(path).read_text())
    tables = data.get("tables")
    if not tables:
        raise SystemExit(
            f"{path}: no per-task tables; rerun its evaluation with reward_ablation.py"
        )
    missing = [n for n in names if n not in tables]
    if missing:
        raise SystemExit(f"{path}: no policy {missing} (it has {sorted(tables)})")
    uneven = sorted(k for k in tables[names[0]] if len({len(tables[n].get(k, [])) for n in names}) > 1)  # fmt: skip
    if uneven:  # the gains below divide every policy's successes by one episode count
        raise SystemExit(
            f"{path}: {names} ran different numbers of episodes on task(s) {uneven[:5]}; pool "
            "evaluations of the same held-out episodes (one reward_ablation.py evaluation)"
        )
    return {n: tables[n] for n in names}


def _sums(strata: list[dict[str, Table]], picks: list[list[str]], name: str) -> tuple[int, int]:
    k = n = 0
    for tables, keys in zip(strata, picks, strict=True):
        for key in keys:
            k += sum(tables[name][key])
            n += len(tables[name][key])
    return k, n


def _stats(strata: list[dict[str, Table]], picks: list[list[str]], base: str, peer: str, arm: str) -> tuple[float, float, float, float]:  # fmt: skip
    (kb, n), (kp, _), (ka, _) = (_sums(strata, picks, x) for x in (base, peer, arm))
    g_arm, g_peer = (ka - kb) / n, (kp - kb) / n
    ratio = g_arm / g_peer if g_peer else float("nan")
    return g_arm, g_peer, (ka - kp) / n, ratio


def pooled(strata: list[dict[str, Table]], base: str, peer: str, arm: str, n_boot: int = 4000, seed: int = 0) -> dict[str, object]:  # fmt: skip
    """Point estimates and stratified-bootstrap 95% intervals over ``strata`` (one per seed)."""
    keys = [sorted(set.intersection(*(set(t[x]) for x in (base, peer, arm)))) for t in strata]
    point = _stats(strata, keys, base, peer, arm)
    rng = random.Random(seed)
    boots = [
        _stats(strata, [[ks[rng.randrange(len(ks))] for _ in ks] for ks in keys], base, peer, arm)
        for _ in range(n_boot)
    ]

    def ci(i: int) -> list[float]:
        import numpy as np

        vals = [b[i] for b in boots if b[i] == b[i]]  # nan-free (a resample with no peer gain)
        if not vals:  # the peer gained nothing in any resample: no ratio to bound
            return [float("nan")] * 2
        return [float(x) for x in np.percentile(vals, [2.5, 97.5])]

    n = sum(len(t[base][k]) for t, ks in zip(strata, keys, strict=True) for k in ks)
    labels = (f"{arm} - {base}", f"{peer} - {base}", f"{arm} - {peer}")
    out: dict[str, object] = {"n": n}
    for i, label in enumerate(labels):
        out[label] = {"points": round(100 * point[i], 1), "ci95": [round(100 * x, 1) for x in ci(i)]}  # fmt: skip
    out["ratio"] = {"value": round(point[3], 2), "ci95": [round(x, 2) for x in ci(3)]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("evals", nargs="+", help="eval-seed<N>.json files of reward_ablation.py")
    ap.add_argument("--baseline", default="sft")
    ap.add_argument("--peer", default="verifiable")
    ap.add_argument("--arm", required=True)
    args = ap.parse_args()
    names = [args.baseline, args.peer, args.arm]
    strata = [_load(p, names) for p in args.evals]
    report = {p: pooled([s], *names) for p, s in zip(args.evals, strata, strict=True)}
    if len(strata) > 1:
        report["pooled"] = pooled(strata, *names)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
