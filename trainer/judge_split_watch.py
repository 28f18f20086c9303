"""The policy's verifier reward on the judge split, watched through a judge-only run.

A judge-only reward can teach the policy to fail while the judge monitor sees nothing: once
every GRPO group fails, no pair is ordered by the verifier and the monitor has nothing to test
(bench/RESULTS.md, issue 22: two frozen on-policy judges took the groups' success from 10 of 18
to 0 by step 4). A ``judge_split`` refresh rolls the policy *as it is now* out on the judge
split (train tasks GRPO never draws) and the verifier labels those episodes anyway, so the
drift costs nothing to measure: the same tasks at the SFT start (the ``[judge_train]`` stage's
rollout) and after step k, compared task by task.

:func:`split_drift` is the comparison (mean verifier reward, paired over the tasks both
rollouts have, a 99% bootstrap interval over tasks: the guard looks once per refresh, so a
policy that did not change is stopped by one look with probability about 0.5%, and by five
with about 2.5%); :func:`drift_line` says it in one line; :func:`drift_stop` is what the guard
raises when the policy is shown to be worse there.

What it does not do: roll anything out (``judge_refresh.py`` does, at a ``judge_split``
refresh or every ``watch_every`` steps), or tell what a judge teaches on GRPO's own tasks: on
the judge split's easier tasks an early answer can rise while the hard ones fall
(bench/RESULTS.md, "On-policy judge, session 21").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rankgym.trainer.monitor import JudgeGuardStop

__all__ = [
    "LEVEL",
    "WATCH_FILE",
    "SplitDrift",
    "drift_line",
    "drift_stop",
    "judge_drift",
    "record_drift",
    "split_drift",
    "split_fields",
    "stage_drift",
    "stage_tasks",
    "task_rewards",
    "watched",
]

LEVEL = 0.99
"""Confidence of the drift's interval: the guard stops when its upper bound is below 0."""

WATCH_FILE = "split_watch.json"
"""``<out>/judge_train/split_watch.json``: every comparison made (``after_step``, ``by``:
``refresh`` or ``watch``, ``judge_split``: :meth:`SplitDrift.to_dict`), oldest first."""


@dataclass(frozen=True)
class SplitDrift:
    """Mean verifier reward on the judge-split tasks two rollouts share: at the start and now."""

    tasks: int
    """Tasks in both rollouts with at least one episode each."""
    episodes: tuple[int, int]
    """Episodes read at the start and now, over those tasks."""
    start: float
    now: float
    diff: float
    """``now - start``: the mean over tasks of each task's change in mean reward."""
    ci: tuple[float, float]
    """:data:`LEVEL` percentile bootstrap interval of ``diff``, resampling tasks."""

    @property
    def lower_shown(self) -> bool:
        """The policy is shown to do worse on the judge split than at the start."""
        return self.ci[1] < 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"lower_shown": self.lower_shown}


def task_rewards(store: str | Path, run_id: str) -> dict[str, list[float]]:
    """Each task's verifier rewards in run ``run_id`` of ``store``; an episode without one (it
    never answered, or errored) counts 0.0, as the judge-split labels count it."""
    from rankgym.store import Store

    out: dict[str, list[float]] = {}
    with Store(store, readonly=True) as s:
        for g in s.iter_groups(run_id):
            rewards = out.setdefault(g.task_id, [])
            rewards += [t.verifiable_reward or 0.0 for t in g.trajectories]
    return out


def split_drift(
    start: dict[str, list[float]],
    now: dict[str, list[float]],
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> SplitDrift | None:
    """Compare two rollouts' per-task rewards (:func:`task_rewards`) over the tasks both have;
    None when they share fewer than 2 tasks (nothing to resample)."""
    tasks = sorted(t for t in start.keys() & now.keys() if start[t] and now[t])
    if len(tasks) < 2:
        return None
    a = np.array([np.mean(start[t]) for t in tasks])
    b = np.array([np.mean(now[t]) for t in tasks])
    d = b - a
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return SplitDrift(
        tasks=len(tasks),
        episodes=(sum(len(start[t]) for t in tasks), sum(len(now[t]) for t in tasks)),
        start=float(a.mean()),
        now=float(b.mean()),
        diff=float(d.mean()),
        ci=(float(lo), float(hi)),
    )


def split_fields(drift: dict[str, Any]) -> dict[str, Any]:
    """The ``StepMetrics`` fields of a comparison (:meth:`SplitDrift.to_dict`)."""
    return {
        "judge_split_start": drift["start"],
        "judge_split_reward": drift["now"],
        "judge_split_diff_low": drift["ci"][0],
        "judge_split_diff_high": drift["ci"][1],
        "judge_split_lower": drift["lower_shown"],
    }


def stage_drift(start_db: Path, now_db: Path, envs: list[str], seed: int) -> SplitDrift | None:
    """The judge split's verifier reward in ``now_db`` against the ``[judge_train]`` stage's
    rollout of the SFT start (``start_db``), paired over the tasks of each env both have; None
    without the stage's rollout or with fewer than 2 shared tasks."""
    from rankgym.trainer.judge_rollout import ROLLOUT_RUN

    if not start_db.is_file():
        return None
    start: dict[str, list[float]] = {}
    now: dict[str, list[float]] = {}
    for env in envs:
        run = f"{ROLLOUT_RUN}:{env}"
        start |= {f"{env}/{t}": r for t, r in task_rewards(start_db, run).items()}
        now |= {f"{env}/{t}": r for t, r in task_rewards(now_db, run).items()}
    return split_drift(start, now, seed=seed)


def stage_tasks(start_db: Path, envs: list[str]) -> dict[str, list[str]] | None:
    """Each env's task ids in the ``[judge_train]`` stage's rollout (None without it), for a
    later rollout of the same tasks."""
    from rankgym.trainer.judge_rollout import ROLLOUT_RUN

    if not start_db.is_file():
        return None
    out = {env: sorted(task_rewards(start_db, f"{ROLLOUT_RUN}:{env}")) for env in envs}
    return {env: ids for env, ids in out.items() if ids}  # an env without groups: drawn anew


def watched(out: str | Path) -> list[dict[str, Any]]:
    """The run's judge-split comparisons so far (:data:`WATCH_FILE`), oldest first."""
    import json

    p = Path(out) / "judge_train" / WATCH_FILE
    return json.loads(p.read_text()) if p.is_file() else []


def record_drift(out: str | Path, after_step: int, by: str, drift: dict[str, Any] | None) -> None:
    """Add (or replace, on resume) the comparison made after ``after_step`` to the run's file."""
    from rankgym.trainer.checkpoint import write_json_atomic

    if drift is None:
        return
    rows = [r for r in watched(out) if r["after_step"] != after_step]
    rows.append({"after_step": after_step, "by": by, "judge_split": drift})
    write_json_atomic(Path(out) / "judge_train" / WATCH_FILE, sorted(rows, key=lambda r: r["after_step"]))  # fmt: skip


def drift_line(drift: SplitDrift, step: int) -> str:
    """One line: the judge split's mean verifier reward at the start and after ``step`` (1-based)."""
    tail = "; shown LOWER than at the start" if drift.lower_shown else ""
    return (
        f"judge split (train tasks GRPO never draws, the verifier's reward): {drift.start:.2f} "
        f"at the start, {drift.now:.2f} after step {step} ({drift.diff:+.2f}, {LEVEL:.0%} "
        f"interval [{drift.ci[0]:+.2f}, {drift.ci[1]:+.2f}] over {drift.tasks} tasks){tail}"
    )


def drift_stop(drift: SplitDrift, step: int) -> JudgeGuardStop:
    """The guard's stop for a judge-only run whose policy is shown worse on the judge split."""
    msg = (
        f"judge guard: the policy now does worse on tasks the reward never trained on: "
        f"{drift_line(drift, step)}. The judge's reward is teaching it to fail, though the "
        "judge may still order this run's groups well (when every group fails, none is ordered "
        "by the verifier). The run stopped after step "
        f"{step}; the last adapter is kept. Options: a judge trained on more of this policy's "
        'groups ([judge_train] group_size, tasks), reward.kind = "judge+verifiable", or '
        '[monitor] guard = "off" to train on anyway'
    )
    return JudgeGuardStop(msg, {"reason": "judge_split_lower", "after_step": step,
                                "judge_split": drift.to_dict()})  # fmt: skip


def judge_drift(
    db: Path, envs: list[str], step: int, seed: int, say: Any, stop_if_lower: bool
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A judge-split rollout after step ``step`` (1-based) in ``db`` against the stage's rollout
    beside it (``rollout.db``), said in one line: ``(drift, stop)``, the comparison
    (:meth:`SplitDrift.to_dict`, None without one) and, where ``stop_if_lower`` and the policy
    is shown worse, the :func:`drift_stop` as ``JudgeGuardStop(**stop)``'s arguments (it
    crosses ranks as plain data)."""
    drift = stage_drift(db.parent / "rollout.db", db, envs, seed)
    if drift is None:
        return None, None
    say(drift_line(drift, step))
    if not (stop_if_lower and drift.lower_shown):
        return drift.to_dict(), None
    stop = drift_stop(drift, step)
    return drift.to_dict(), {"message": str(stop), "report": stop.report}
