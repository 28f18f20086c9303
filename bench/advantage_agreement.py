"""How much of the verifier's GRPO signal a judge's reward keeps, step by step, read from a run's store.

For every step of a run, each judged group's trajectories with a verifier label
(``Trajectory.verifier_outcome``; pass = reward >= 1.0, an episode cut at its turn limit fails)
give two rewards: the verifier's pass/fail, and a rule over the judge's stored score. Both are
centred per group (GRPO's advantage before scaling) and compared over the step's trajectories
by their cosine: +1 when the judge's reward would push every trajectory as the verifier's does,
0 when it carries none of it, below 0 when it pushes against it. A group the verifier ties
has no verifier advantage, so a judge that separates its trajectories lowers the cosine (it
pushes on what the verifier calls noise); a step where the judge's rule ties every group has
no judge signal (printed ``none``). Rules: ``graded`` (the score), ``cut`` (score >= the step's
cut: ``--cut`` values, or the fitted cuts in a run's ``judge_train`` folder), ``top1`` (the
group's highest score passes).

What it does not do: weigh trajectories by their tokens or gradients (GRPO multiplies each
advantage by a log-prob gradient, so this is the direction of the reward, not of the update),
or judge anything anew: it reads the scores the run stored.

    .venv/bin/python bench/advantage_agreement.py RUN/store.db --judge-train RUN/judge_train
    .venv/bin/python bench/advantage_agreement.py RUN/store.db --cut 0.5
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from rankgym.store import Store

PASS_AT = 1.0
Rule = Callable[[list[float], float | None], list[float]]
RULES: dict[str, Rule] = {
    "graded": lambda scores, _cut: scores,
    "cut": lambda scores, cut: [float(s >= cut) for s in scores] if cut is not None else [],
    "top1": lambda scores, _cut: [float(s == max(scores)) for s in scores],
}


def _centred(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    return [v - mean for v in values]


def cosine(groups: Sequence[tuple[list[float], list[float]]]) -> float | None:
    """Cosine between the group-centred judge rewards and verifier rewards of ``groups``
    (``(judge, verifier)`` per group); None when the judge's rewards tie in every group."""
    dot = jj = vv = 0.0
    for judge, verifier in groups:
        for a, b in zip(_centred(judge), _centred(verifier), strict=True):
            dot, jj, vv = dot + a * b, jj + a * a, vv + b * b
    if jj < 1e-12:
        return None
    return dot / math.sqrt(jj * vv) if vv > 0 else 0.0


def fitted_cuts(judge_train: Path) -> list[float | None]:
    """The cut each step trained at under ``judge_threshold = "fit"``: the stage's, then each
    refresh's (one that fitted none keeps the last)."""
    stage = json.loads((judge_train / "stage.json").read_text())
    cuts = [(stage.get("cut") or {}).get("cut")]
    refreshes = judge_train / "refreshes.json"
    for r in json.loads(refreshes.read_text()) if refreshes.is_file() else []:
        cut = (r.get("cut") or {}).get("cut")
        cuts.append(cut if cut is not None else cuts[-1])
    return cuts


def step_groups(store: Store, run_id: str | None) -> dict[int, list[tuple[list[float], list[float]]]]:  # fmt: skip
    """step -> (judge scores, verifier pass 0/1) of each judged group's labelled trajectories."""
    out: dict[int, list[tuple[list[float], list[float]]]] = defaultdict(list)
    for g in store.iter_groups(run_id):
        if g.judgement is None or g.judgement.status != "ok":
            continue
        scores = g.judgement.score_map()
        pairs = [(scores[t.id], float(o >= PASS_AT)) for t in g.trajectories
                 if t.id in scores and (o := t.verifier_outcome()) is not None]  # fmt: skip
        if len(pairs) >= 2:
            out[g.step].append(([s for s, _ in pairs], [v for _, v in pairs]))
    return dict(out)


def report(by_step: dict[int, list[tuple[list[float], list[float]]]], cuts: list[float | None]) -> list[dict[str, object]]:  # fmt: skip
    """One row per step: its ``threshold`` (the cut) and each rule's cosine (None: no judge
    signal)."""
    rows = []
    for step in sorted(by_step):
        cut = cuts[min(step, len(cuts) - 1)] if cuts else None
        row: dict[str, object] = {"step": step + 1, "threshold": cut}
        for name, rule in RULES.items():
            if name == "cut" and cut is None:
                continue
            row[name] = cosine([(rule(j, cut), v) for j, v in by_step[step]])
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("store", help="a run's store.db")
    ap.add_argument("--run", default=None, help="run id (default: every group in the store)")
    ap.add_argument("--judge-train", type=Path, help="a run's judge_train folder (fitted cuts)")
    ap.add_argument("--cut", type=float, action="append", default=[], help="cut per step (repeat)")
    args = ap.parse_args()
    cuts: list[float | None] = list(args.cut) or (fitted_cuts(args.judge_train) if args.judge_train else [])  # fmt: skip
    with Store(args.store, readonly=True) as store:
        rows = report(step_groups(store, args.run), cuts)
    for row in rows:
        cells = [f"{k} {'none' if v is None else f'{v:+.2f}'}" for k, v in row.items() if k not in ("step", "threshold")]  # fmt: skip
        t = row["threshold"]
        print(
            f"step {row['step']}: "
            + (f"cut at {t:.3f}  " if isinstance(t, float) else "")
            + "  ".join(cells)
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
