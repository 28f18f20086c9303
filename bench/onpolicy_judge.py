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

``rejudge STORE --judge MODEL``: the same store's pairs judged again, each pair alone in both
orders, by other judges (e.g. a new judge before its GRPO arm, on the groups of an arm of an
older one): pairwise on the pairs the verifier separates (``--decided``), and on the pairs it
ties the lean to the shorter / fewer-calls trajectory and mean |P - 0.5|
(``judge_pipeline.tie_stats``). Verdicts are cached in ``--cache``.

    .venv/bin/python bench/onpolicy_judge.py heldout /tmp/h4/s4/judgeB
    .venv/bin/python bench/onpolicy_judge.py arm /tmp/h4/s4/ablB/<arm>/store.db
    .venv/bin/python bench/onpolicy_judge.py rejudge /tmp/h4/s4/ablB/<arm>/store.db \
        --judge local/smollm2@/tmp/h2/s5/judgeC/adapter --decided --cache /tmp/h2/s5/rejudge

``ties OUT --judge MODEL --sample N``: a seeded sample of the held-out tie pairs of a
``judge-train --tie-ratio`` run (``data/heldout_ties.jsonl``) judged by ``MODEL``: its lean to
the shorter / fewer-calls trajectory and mean |P - 0.5| (what ``report.json`` ``ties`` gives
for all of them). ``tied STORE``: the monitor's tied-shorter row per step of a stored run
(``trainer/monitor_tied.py``), e.g. for runs logged before the monitor had it.

What it does not do: ``heldout``, ``arm`` and ``tied`` judge nothing (they read stored verdicts);
``rejudge`` runs the judges it is given, nothing else.
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
        Path(
            sorted(
                g
                for g in glob.glob(str(out / "work" / "judged" / "*.json"))
                if not Path(g).name.startswith("ties-")
            )[-1]
        ).read_text()  # fmt: skip
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


def store_pairs(store_path: str) -> tuple[list[PairItem], list[PairItem]]:
    """(decided, tied) pairs of each group of ``store_path``: two trajectories of one group with
    different content; decided when their verifier rewards differ (truncated = 0.0)."""
    from rankgym.judges.judge_data import tie_pair

    decided, tied = [], []
    with Store(store_path, readonly=True) as s:
        groups = [s.get_group(g) for g in s.group_ids()]
    for g in groups:
        ts = [t for t in g.trajectories if not t.error]
        for k, a in enumerate(ts):
            for b in ts[k + 1 :]:
                if a.content_hash() == b.content_hash():
                    continue
                ra, rb = float(a.verifiable_reward or 0.0), float(b.verifiable_reward or 0.0)
                if ra == rb:
                    tied.append(tie_pair(g.env_id, g.task_id, a, b, "verifier", store_path))
                else:
                    w, lo = (a, b) if ra > rb else (b, a)
                    decided.append(PairItem(g.env_id, g.task_id, w, lo, "verifier", store_path, abs(ra - rb)))  # fmt: skip
    return decided, tied


def rejudge(store_path: str, judges: list[str], with_decided: bool, cache: Path) -> None:
    """Print each judge's pairwise on the decided pairs and its tie lean on the tied ones."""
    import hashlib

    from rankgym.judges.judge_compare import judge_pairs, litellm_respond
    from rankgym.judges.prompt import default_rubric
    from rankgym.trainer.judge_tie_check import tie_stats

    decided, tied = store_pairs(store_path)
    cache.mkdir(parents=True, exist_ok=True)
    for m in judges:
        for kind, pairs in (("tied", tied), *((("decided", decided),) if with_decided else ())):
            key = hashlib.sha256(f"{m}|{store_path}|{kind}|{[p.id for p in pairs]}".encode()).hexdigest()[:16]  # fmt: skip
            path = cache / f"{kind}-{key}.json"
            if path.is_file():
                rows = json.loads(path.read_text())
            else:
                rows = judge_pairs(litellm_respond(m), pairs, default_rubric(), True, desc=kind)
                path.write_text(json.dumps(rows))
            if kind == "tied":
                t = tie_stats(rows, pairs)
                print(f"{m}: verifier-tied pairs {t['pairs']}: prefers the shorter {t['prefers_shorter']:.2f}, "
                      f"fewer calls {t['prefers_fewer_calls']:.2f} of {t['calls_differ']}, "
                      f"mean |P - 0.5| {t['mean_abs_dev']:.3f}, P(longer) {t['p_longer']:.2f}")  # fmt: skip
            else:
                ok = [r for r in rows if r["winner"] is not None]
                acc = sum(1.0 if r["winner"] > r["loser"] else 0.5 if r["winner"] == r["loser"] else 0.0 for r in ok)  # fmt: skip
                print(f"{m}: verifier-decided pairs {len(pairs)}: pairwise {acc / max(1, len(ok)):.3f} "
                      f"over {len(ok)} presentations")  # fmt: skip


def ties(out: Path, judge: str, sample: int, cache: Path) -> None:
    """Print ``tie_stats`` of ``judge`` on a seeded sample of ``out``'s held-out tie pairs."""
    from rankgym.judges.judge_compare import judge_pairs, litellm_respond
    from rankgym.judges.pair_files import read_jsonl
    from rankgym.judges.prompt import default_rubric
    from rankgym.trainer.judge_tie_check import tie_stats

    pairs = read_jsonl(out / "data" / "heldout_ties.jsonl")
    pairs = random.Random(0).sample(pairs, min(sample, len(pairs)))
    if cache.is_file():
        rows = json.loads(cache.read_text())
    else:
        rows = judge_pairs(litellm_respond(judge), pairs, default_rubric(), True, desc="ties")
        cache.write_text(json.dumps(rows))
    print(judge, json.dumps(tie_stats(rows, pairs)))


def tied(store_path: str) -> None:
    """Print the monitor's tied-shorter row per step of ``store_path`` and over the run."""
    from rankgym.trainer.monitor_tied import tied_shorter, tied_unit

    with Store(store_path, readonly=True) as s:
        groups = [s.get_group(g) for g in s.group_ids()]
    units = [u for g in groups if (u := tied_unit(g, g.step)) is not None]
    for step in sorted({g.step for g in groups}):
        n, rate = tied_shorter([u for u in units if u.step == step])
        print(f"step {step}: tied-shorter {rate if rate is None else round(rate, 2)} of {n}")
    n, rate = tied_shorter(units)
    print(f"run: tied-shorter {rate if rate is None else round(rate, 2)} of {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("heldout")
    h.add_argument("out", type=Path)
    h.add_argument("--policy-store", default="rollout.db")
    a = sub.add_parser("arm")
    a.add_argument("store")
    r = sub.add_parser("rejudge")
    r.add_argument("store")
    r.add_argument("--judge", action="append", required=True, metavar="MODEL")
    r.add_argument("--decided", action="store_true", help="also the pairs the verifier separates")
    r.add_argument("--cache", type=Path, default=Path("/tmp/onpolicy-rejudge"))
    t = sub.add_parser("ties")
    t.add_argument("out", type=Path)
    t.add_argument("--judge", required=True, metavar="MODEL")
    t.add_argument("--sample", type=int, default=40)
    t.add_argument("--cache", type=Path, default=Path("/tmp/onpolicy-ties.json"))
    d = sub.add_parser("tied")
    d.add_argument("store")
    args = ap.parse_args()
    if args.cmd == "ties":
        ties(args.out, args.judge, args.sample, args.cache)
    elif args.cmd == "tied":
        tied(args.store)
    elif args.cmd == "heldout":
        heldout(args.out, args.policy_store)
    elif args.cmd == "rejudge":
        rejudge(args.store, args.judge, args.decided, args.cache)
    else:
        arm(args.store)


if __name__ == "__main__":
    main()
