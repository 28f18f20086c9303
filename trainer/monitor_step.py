"""What the trainer does with the judge monitor on each step: measure the step's judged groups,
stop the run on the guard's word, warn about (or drop) a judge shown below chance inside a
blend, and refill the monitor when a run resumes. The measurement and the guard's test are
``monitor.py``'s (its docstring tells the rules); the no-signal refusal is ``no_signal.py``'s.

What it does not do: score or train (``rewards.py``, ``grpo.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rankgym.trainer.monitor import JudgeGuardStop, JudgeMonitor
from rankgym.types import Group

if TYPE_CHECKING:
    from rankgym.trainer.loop import Trainer

__all__ = [
    "below_chance_warning",
    "judge_dropped_at",
    "rankings_of",
    "restore",
    "start_monitor",
    "watch_judge",
]


def below_chance_warning(step: int, below: str, reward_kind: str, dropped: bool = False) -> str:
    """What a step whose judge is shown below chance says while the guard is off: that its share
    of the reward is noise or worse and the run goes on, or (``dropped``) that it was dropped."""
    head = f"warning: judge monitor: step {step + 1}: the judge's agreement {below}"
    if dropped:
        return (
            f"{head}, so it is dropped from the reward (reward.kind = {reward_kind!r}, [monitor] "
            'below_chance = "drop"): from this step on GRPO trains on the verifier alone. The '
            "judge still runs and the monitor keeps reporting on it."
        )
    return (
        f"{head}: its share of the reward (reward.kind = {reward_kind!r}) is noise, or pushes "
        "the policy the other way. The run goes on (the guard stops judge-only runs). "
        "Options: a judge trained on this policy's groups ([judge_train] or rankgym "
        'judge-train), a larger reward.verifiable_weight, [monitor] below_chance = "drop" to '
        'train on the verifier alone from here, guard = "on" to stop here, or reward.kind = '
        '"verifiable"'
    )


def rankings_of(store: Any, groups: Sequence[Group]) -> dict[str, list[dict[str, float]]]:
    """Each group's human rankings in ``store`` (oldest first), for groups that have any."""
    out: dict[str, list[dict[str, float]]] = {}
    for g in groups:
        rows = store.human_rankings(group_id=g.id)
        if rows:
            out[g.id] = [r["ranking"] for r in rows]
    return out


def start_monitor(trainer: Trainer) -> JudgeMonitor:
    """The monitor of ``trainer``'s run, refilled with the steps a resumed run already did; a
    judge those steps dropped (``below_chance = "drop"``) is dropped from the reward again."""
    from rankgym.trainer.step_data import stored_manifests

    cfg, start = trainer.cfg, trainer.start_step  # cfg: [judge_train] may have set the reward
    monitor = JudgeMonitor(cfg.monitor, cfg.reward.kind, trainer.success_threshold, cfg.seed)
    logged = trainer.store.steps(trainer.run_id)  # read once: the cuts and the drop come from it
    cuts = {r["step"]: (r.get("metrics") or {}).get("judge_cut") for r in logged}
    restore(monitor, trainer.store, stored_manifests(trainer.out, start), cuts)
    monitor.dropped_at = judge_dropped_at(logged, start)
    if monitor.dropped_at:
        trainer.reward = trainer.reward.without_judge() or trainer.reward
    return monitor


def restore(
    monitor: JudgeMonitor,
    store: Any,
    manifests: Sequence[tuple[int, dict[str, Any]]],
    cuts: dict[int, float | None] | None = None,
) -> None:
    """Refill ``monitor`` with the steps a resumed run already did (their step manifests;
    ``cuts``: step -> the judge cut its logged row recorded, None or missing: graded)."""
    for step, saved in manifests:
        groups = [store.get_group(gid, saved.get("spec_hash")) for gid in saved["group_ids"]]
        monitor.add(step, groups, rankings_of(store, groups), (cuts or {}).get(step))


def watch_judge(trainer: Trainer, step: int, groups: list[Group]) -> dict[str, Any]:
    """The monitor and the guard on one step's judged groups, before they are scored; returns
    the ``StepMetrics`` fields they set (none without a monitor).

    Raises :class:`JudgeGuardStop` (after logging the step's monitor row). With the guard off, a
    step shown below chance warns, or with ``[monitor] below_chance = "drop"`` replaces
    ``trainer.reward`` by its ``without_judge()`` from this step on (``judge_dropped`` is then set
    on every later step too).
    """
    out: dict[str, Any] = {}
    cfg = trainer.cfg
    if trainer.monitor is None:
        return out
    cut = getattr(trainer.reward, "judge_threshold", None)  # what the step's reward reads
    mon = trainer.monitor.observe(step, groups, rankings_of(trainer.store, groups), cut)
    out.update(mon.metrics())
    if mon.stop:
        row = {"policy": trainer.policy_name(step), "reward_kind": cfg.reward.kind, **out}
        if trainer.dist.main:
            trainer.store.log_step(trainer.run_id, step, row)
        raise JudgeGuardStop(mon.stop, {"step": step, **row})
    dropped = trainer.monitor.dropped_at is not None
    if mon.below and not dropped:
        lean = trainer.reward.without_judge() if cfg.monitor.below_chance == "drop" else None
        if lean is None:
            trainer.echo(below_chance_warning(step, mon.below, cfg.reward.kind))
        else:
            trainer.reward, dropped, trainer.monitor.dropped_at = lean, True, step + 1
            trainer.echo(below_chance_warning(step, mon.below, cfg.reward.kind, dropped=True))
    if dropped:
        out["judge_dropped"] = True
    return out


def judge_dropped_at(logged: Sequence[dict[str, Any]], before: int) -> int | None:
    """The step (1-based, as the step lines count) at which a run dropped the judge, among its
    logged steps (``Store.steps`` rows) before ``before``; None when it never did. A resumed run
    reads it to drop the judge again before its next step."""
    dropped = [
        r["step"]
        for r in logged
        if r["step"] < before and (r.get("metrics") or {}).get("judge_dropped")
    ]
    return min(dropped) + 1 if dropped else None
