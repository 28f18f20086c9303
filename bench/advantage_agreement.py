"""How much of the verifier's push a judge's reward makes, step by step, from a run's store.

For every step of a run, each judged group's trajectories with a verifier label
(``Trajectory.verifier_outcome``: an unscored episode cut at its turn limit is 0) give two
rewards: the verifier's pass/fail, and a rule over the judge's stored score. Both are centred per group
(GRPO's advantage before scaling) and compared over the step's trajectories by their cosine,
the judge monitor's signal row (``trainer/monitor_signal.py``; a run since session 25 logs it
for the rule it trained on as ``judge_signal``): +1 when the judge's reward would push every
trajectory as the verifier's does, 0 when it carries none of it, below 0 when it pushes
against it. A group the verifier ties has no verifier advantage, so a judge that separates its
trajectories lowers the cosine (it pushes on what the verifier calls noise); a step where the
judge's rule ties every group has no judge signal (printed ``none``).

Rules: ``graded`` (the score), ``cut`` (score >= the step's cut: ``--cut`` values, or the
fitted cuts in a run's ``judge_train`` folder), ``top1`` (the group's highest score passes).
The verifier's side is its pass/fail at ``--pass-at`` (1.0, what held-out success counts, as
the monitor); ``--against-reward`` takes its reward instead, partial credit included.

What it does not do: weigh trajectories by their tokens or gradients (GRPO multiplies each
advantage by a log-prob gradient, so this is the direction of the reward, not of the update),
or judge anything anew: it reads the scores the run stored.

    .venv/bin/python bench/advantage_agreement.py RUN/store.db --judge-train RUN/judge_train
    .venv/bin/python bench/advantage_agreement.py RUN/store.db --cut 0.5
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from rankgym.store import Store
from rankgym.trainer.monitor_signal import SignalUnit, judge_signal, signal_unit
from rankgym.types import Group


def top1(group: Group) -> Group:
    """``group`` with its judge's top-scored trajectories (ties included) scored 1, the rest 0."""
    j = group.judgement
    assert j is not None
    best = max(s.score for s in j.scores)
    scores = [s.model_copy(update={"score": float(s.score == best)}) for s in j.scores]
    return group.model_copy(update={"judgement": j.model_copy(update={"scores": scores})})


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


def report(
    store: Store, run_id: str | None, cuts: list[float | None], pass_at: float | None = None
) -> list[dict[str, object]]:
    """One row per step: its ``threshold`` (the cut, None without one) and each rule's cosine
    (None: no judge signal); ``pass_at``: against the verifier's pass/fail, not its reward."""

    def cut_at(step: int) -> float | None:  # a run longer than its cuts keeps the last one
        return cuts[min(step, len(cuts) - 1)] if cuts else None

    units: dict[int, dict[str, list[SignalUnit]]] = defaultdict(lambda: defaultdict(list))
    for g in store.iter_groups(run_id):
        if g.judgement is None or g.judgement.status != "ok" or not g.judgement.scores:
            continue
        cut = cut_at(g.step)
        for name, unit in (("graded", signal_unit(g, g.step, None, pass_at)),
                           ("cut", signal_unit(g, g.step, cut, pass_at) if cut is not None else None),
                           ("top1", signal_unit(top1(g), g.step, None, pass_at))):  # fmt: skip
            if unit is not None:
                units[g.step][name].append(unit)
    rows: list[dict[str, object]] = []
    for step in sorted(units):
        cut = cut_at(step)
        row: dict[str, object] = {"step": step + 1, "threshold": cut}
        for name in ("graded", "cut", "top1"):
            if name != "cut" or cut is not None:
                row[name] = judge_signal(units[step][name])
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("store", help="a run's store.db")
    ap.add_argument("--run", default=None, help="run id (default: every group in the store)")
    ap.add_argument("--judge-train", type=Path, help="a run's judge_train folder (fitted cuts)")
    ap.add_argument("--cut", type=float, action="append", default=[], help="cut per step (repeat)")
    ap.add_argument("--pass-at", type=float, default=1.0,
                    help="the verifier's pass/fail at this reward, what held-out success counts "
                         "(default 1.0, as the monitor)")  # fmt: skip
    ap.add_argument("--against-reward", action="store_true",
                    help="compare with the verifier's reward (partial credit) instead")  # fmt: skip
    args = ap.parse_args()
    cuts: list[float | None] = list(args.cut) or (fitted_cuts(args.judge_train) if args.judge_train else [])  # fmt: skip
    with Store(args.store, readonly=True) as store:
        rows = report(store, args.run, cuts, None if args.against_reward else args.pass_at)
    for row in rows:
        cells = [f"{k} {'none' if v is None else f'{v:+.2f}'}" for k, v in row.items() if k not in ("step", "threshold")]  # fmt: skip
        t = row["threshold"]
        print(f"step {row['step']}: " + (f"cut at {t:.3f}  " if isinstance(t, float) else "") + "  ".join(cells))  # fmt: skip
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
