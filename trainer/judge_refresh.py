"""Online refreshes of the ``[judge_train]`` judge during GRPO (``refresh_every`` > 0).

Every ``refresh_every`` steps :func:`maybe_refresh` retrains the judge and GRPO judges the next
steps with the result. ``refresh_data`` says what the new judge learns from:

- ``run``: this run's groups so far (their verifier rewards and any people's rankings), the
  stage's judge-split rollout and ``judge_train.stores``; a fresh LoRA. The verifier labels
  GRPO's own tasks here, so a judge-only run with it is no longer judge-only in its data.
- ``judge_split``: the policy *as it is now* (the newest checkpoint) rolled out again on the
  judge split (train tasks GRPO never draws) into ``judge_train/data/refresh-<step>.db``, and
  the current judge trained further on those groups (warm start) plus ``judge_train.stores``.
  The verifier still labels only tasks GRPO never draws, but the judge sees the failures the
  policy makes *now*, not only those of the SFT start (a judge-only run drifts to where its
  judge is wrong: bench/RESULTS.md, issue 22).

Each refresh is checked on held-out tasks of its own data like the stage (``_check``) and
recorded in ``judge_train/refreshes.json``, so ``--resume`` judges with the newest one. A
refresh that fails (too few pairs, say) warns and keeps the current judge. A ``judge_split``
refresh also compares the policy's verifier reward on those tasks with the stage's rollout of
the SFT start (``judge_split_watch.py``); where the monitor's guard is on and the policy is
shown worse there, the run stops before the judge is trained. ``watch_every`` does that
rollout and comparison alone, for a run whose judge is not refreshed. What it does not do:
stop a run whose refreshed judge failed its check (the monitor and its guard watch the judge
on GRPO's groups), or refresh on any rank but 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rankgym.step_metrics import StepMetrics
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.judge_cut import apply_cut, fit_judge_cut
from rankgym.trainer.judge_pipeline import run_judge_train
from rankgym.trainer.judge_split_watch import judge_drift, record_drift, split_fields, stage_tasks
from rankgym.trainer.judge_stage import (
    _envs,
    _job,
    _on_main,
    _use_judge,
    judge_adapter_of,
    rollout_judge_data,
)
from rankgym.trainer.judge_stage_check import failed_because, on_policy_message, stage_check

REFRESH_FILE = "refreshes.json"
"""``<out>/judge_train/refreshes.json``: every online refresh that finished, oldest first
(``after_step``, ``judge``, ``check``), so a resumed run judges with the newest one."""


def refresh_due(cfg: TrainConfig, step: int) -> bool:
    """True when GRPO step ``step`` (0-based, just finished) should refresh the judge: every
    ``refresh_every`` steps, never after the last step (no step would be judged by it)."""
    jt = cfg.judge_train
    due = bool(jt and jt.refresh_every and (step + 1) % jt.refresh_every == 0)
    return due and step + 1 < cfg.steps


def watch_due(cfg: TrainConfig, step: int) -> bool:
    """True when step ``step`` should only roll the policy out on the judge split and compare
    (``watch_every``): not where a ``judge_split`` refresh does that anyway, nor after the last
    step (there is no later step to spare)."""
    jt = cfg.judge_train
    due = bool(jt and jt.watch_every and (step + 1) % jt.watch_every == 0)
    splits = bool(jt and jt.refresh_data == "judge_split" and refresh_due(cfg, step))
    return due and not splits and step + 1 < cfg.steps


def refresh_judge(
    cfg: TrainConfig,
    store_path: str | Path,
    run_id: str,
    step: int,
    out_dir: str | Path,
    *,
    judge: str | None = None,
    policy_adapter: str | Path | None = None,
    echo: Callable[[str], None] | None = None,
    progress: bool = False,
    stop_if_lower: bool = False,
) -> dict[str, Any]:
    """Retrain the judge after GRPO step ``step`` (0-based) into
    ``out_dir/judge_train/refresh-<step + 1>`` on ``judge_train.refresh_data`` (module doc);
    returns ``{"judge", "check", "summary"}`` like ``run_judge_train_stage`` (plus
    ``"rollout"`` and ``"judge_split"``, the drift from the SFT start, for ``judge_split``).
    With ``stop_if_lower`` a policy shown worse on the judge split trains no judge: the result
    is ``{"judge": None, "stop": ..., ...}`` and the caller stops the run.

    ``run``: only groups of ``run_id``, of the judge-split rollout (``judge-split:ENV``) and of
    the runs in ``judge_train.stores`` are read; other runs in the training store are left out.
    ``judge_split`` needs ``policy_adapter`` (the policy to roll out, e.g. the newest
    checkpoint) and ``judge`` (the ``local/smollm2@DIR`` judge to train further).
    """
    from rankgym.store import Store
    from rankgym.trainer.judge_rollout import ROLLOUT_RUN

    jt = cfg.judge_train
    if jt is None:
        raise ValueError("the config has no [judge_train] section")
    say = echo or (lambda _m: None)
    jt = jt.model_copy(update={
        "epochs": jt.refresh_epochs or jt.epochs,
        "max_train_minutes": jt.refresh_max_train_minutes or jt.max_train_minutes,
    })  # fmt: skip
    base = Path(out_dir) / "judge_train"
    out = base / f"refresh-{step + 1}"
    runs = [f"{ROLLOUT_RUN}:{env}" for env in _envs(cfg)]
    for extra in jt.stores:  # a labelled store of the user's: all of its runs
        with Store(extra, readonly=True) as s:
            runs += [r["id"] for r in s.runs()]
    rollout: list[dict[str, Any]] | None = None
    if jt.refresh_data == "judge_split":
        init = _judge_adapter(judge)  # before the rollout: a judge it cannot train wastes none
        db = base / "data" / f"refresh-{step + 1}.db"
        rollout = _rollout_now(cfg, policy_adapter, db, step, say, progress)
        drift, stop = judge_drift(db, _envs(cfg), step + 1, cfg.seed + step, say, stop_if_lower)
        if stop is not None:
            return {"judge": None, "check": None, "summary": None, "rollout": rollout,
                    "judge_split": drift, "stop": stop}  # fmt: skip
        job = _job(cfg, jt, out, [str(db), *jt.stores])
        job.init_adapter = str(init)
        fit_on = db  # a fitted cut reads the newest judge-split rollout
    else:
        stores = [str(store_path), *jt.stores]
        runs = [run_id, *runs]
        fit_on = rollout_db = base / "data" / "rollout.db"
        if rollout_db.is_file():
            stores.append(str(rollout_db))
        job = _job(cfg, jt, out, stores)
    job.runs = list(dict.fromkeys(runs))
    summary = run_judge_train(job)
    check = stage_check(summary, jt.min_pairwise, jt.max_tied_shorter)
    say(
        f"judge_train refresh after step {step + 1}: {summary['train_pairs']} training pairs; "
        f"{on_policy_message(check, 'the refreshed judge')}"
        + (" (its newest judge-split groups)" if rollout is not None else "")
        + ("; passed" if check["passed"] else f"; NOT passed{failed_because(check)}")
        + "; GRPO's next steps are judged by it"
    )
    cut = fit_judge_cut(cfg, summary["judge"], fit_on, say) if fit_on.is_file() else None
    res: dict[str, Any] = {
        "judge": summary["judge"],
        "check": check,
        "summary": summary,
        "cut": cut,
    }
    if rollout is not None:
        res["rollout"] = rollout
        res["judge_split"] = drift
    return res


def _judge_adapter(judge: str | None) -> Path:
    """The adapter folder of the ``local/NAME@DIR`` judge a ``judge_split`` refresh trains on."""
    from rankgym.errors import UserError
    from rankgym.judge_adapter import resolve_ref

    if not judge or not judge.startswith("local/") or resolve_ref(judge[len("local/") :]) is None:
        raise UserError(
            f"judge_train.refresh_data = 'judge_split' trains the current judge further, but "
            f"GRPO's judge {judge!r} is not a trained local judge (local/smollm2@DIR); use "
            "refresh_data = 'run' or a [judge_train] stage with use = true"
        )
    return judge_adapter_of(judge, "judge_train.refresh_data = 'judge_split'")


def _rollout_now(
    cfg: TrainConfig,
    adapter: str | Path | None,
    db: Path,
    step: int,
    say: Callable[[str], None],
    progress: bool = False,
    what: str = "refresh",
) -> list[dict[str, Any]]:
    """Roll the policy in ``adapter`` out on each env's judge split into ``db`` like the stage
    (``rollout_judge_data``), with episode seeds of this step, so not the stage's samples; on
    the stage's tasks (all of them, or its draw of ``tasks``), so the two compare task by task."""
    from rankgym.errors import UserError

    if adapter is None:
        raise UserError(f"a judge_split {what} needs the policy's newest checkpoint; none was written")  # fmt: skip
    say(f"judge_train {what} after step {step + 1}: rolling out {adapter} on the judge split")
    name, seed = f"judge-data-policy@step{step + 1}", cfg.seed + step + 1
    jt = cfg.judge_train
    # a subset of the judge split (`tasks`): the stage's tasks, so the two can be compared
    same = stage_tasks(db.parent / "rollout.db", _envs(cfg)) if jt and jt.tasks else None
    return rollout_judge_data(cfg, adapter, db, name, seed, progress, task_ids=same)


def watch_split(trainer: Any, step: int, *, stop_if_lower: bool = False) -> dict[str, Any]:
    """``watch_every``'s work after step ``step`` on rank 0: roll the newest checkpoint out on the
    judge split into ``judge_train/data/watch-<step + 1>.db``, compare it with the stage's
    rollout (``judge_split_watch.py``), say it and record it in ``split_watch.json``; no judge
    is trained. Returns ``{"judge_split", "stop"}`` (``stop``: set when ``stop_if_lower`` and
    the policy is shown worse there)."""
    from rankgym.trainer import checkpoint as ckpt

    cfg, out = trainer.cfg, Path(trainer.out)
    db = out / "judge_train" / "data" / f"watch-{step + 1}.db"
    progress = bool(getattr(trainer, "progress", False))
    _rollout_now(cfg, ckpt.latest_checkpoint(out), db, step, trainer.echo, progress, "watch")
    drift, stop = judge_drift(db, _envs(cfg), step + 1, cfg.seed + step, trainer.echo, stop_if_lower)  # fmt: skip
    if drift is None:
        trainer.echo(f"judge_train watch after step {step + 1}: no rollout of the SFT start to compare with (the [judge_train] stage's)")  # fmt: skip
    record_drift(out, step + 1, "watch", drift)
    return {"judge_split": drift, "stop": stop}


def refreshes(out: str | Path) -> list[dict[str, Any]]:
    """The finished refreshes of the run in ``out`` (``refreshes.json``), oldest first."""
    p = Path(out) / "judge_train" / REFRESH_FILE
    return json.loads(p.read_text()) if p.is_file() else []


def _record_refresh(out: Path, after_step: int, res: dict[str, Any]) -> None:
    from rankgym.trainer.checkpoint import write_json_atomic

    rows = [r for r in refreshes(out) if r["after_step"] != after_step]
    rows.append({"after_step": after_step, "judge": res["judge"], "check": res["check"],
                 "judge_split": res.get("judge_split"), "cut": res.get("cut")})  # fmt: skip
    write_json_atomic(Path(out) / "judge_train" / REFRESH_FILE, sorted(rows, key=lambda r: r["after_step"]))  # fmt: skip


def maybe_refresh(trainer: Any, step: int) -> dict[str, Any] | None:
    """The call site after GRPO step ``step``, on every rank: every ``refresh_every`` steps
    rank 0 retrains the judge (:func:`refresh_judge`), records it in ``refreshes.json`` (a
    resumed run picks it up) and every rank judges the next steps with it. A refresh that fails
    warns and keeps the current judge. Returns the judge-split comparison made (a
    ``judge_split`` refresh or a ``watch_every`` rollout; :meth:`SplitDrift.to_dict`), else
    None. Raises :class:`JudgeGuardStop` on every rank when the monitor's guard is on and the
    policy is shown worse on the judge split (module doc)."""
    cfg = trainer.cfg
    if trainer.spec is None or not (refresh_due(cfg, step) or watch_due(cfg, step)):
        return None
    from rankgym.errors import UserError
    from rankgym.trainer.monitor import JudgeGuardStop

    monitor = getattr(trainer, "monitor", None)
    guard = bool(monitor is not None and monitor.guard_on)  # stop before training a judge
    if not refresh_due(cfg, step):
        try:
            res = _on_main(trainer, lambda: watch_split(trainer, step, stop_if_lower=guard))
        except UserError as e:  # a watch that cannot roll out must not end the GRPO run
            trainer.echo(f"warning: judge_train watch after step {step + 1} failed ({e})")
            return None
        if res.get("stop") is not None:
            raise JudgeGuardStop(**res["stop"])
        return res["judge_split"]

    def refresh() -> dict[str, Any]:
        from rankgym.trainer import checkpoint as ckpt

        res = refresh_judge(
            cfg, cfg.store_path, trainer.run_id, step, trainer.out, judge=trainer.spec.model,
            policy_adapter=ckpt.latest_checkpoint(trainer.out), echo=trainer.echo,
            progress=bool(getattr(trainer, "progress", False)), stop_if_lower=guard,
        )  # fmt: skip
        if res.get("stop") is None:
            _record_refresh(trainer.out, step + 1, res)
        if "judge_split" in res:
            record_drift(trainer.out, step + 1, "refresh", res["judge_split"])
        return res

    try:
        res = _on_main(trainer, refresh)
    except UserError as e:  # e.g. too few new pairs: a failed refresh must not end the GRPO run
        trainer.echo(f"warning: judge_train refresh after step {step + 1} failed ({e}); GRPO keeps its current judge")  # fmt: skip
        return None
    if res.get("stop") is not None:
        raise JudgeGuardStop(**res["stop"])
    trainer.judge_train = {**(trainer.judge_train or {}), "refresh": res}
    if cfg.judge_train and cfg.judge_train.use:
        _use_judge(trainer, res["judge"])
        apply_cut(trainer, res.get("cut"))
        if trainer.judge_check is not None:
            trainer.judge_check = {**trainer.judge_check, "on_policy": res["check"]}
    return res.get("judge_split")


def refresh_after_step(trainer: Any, step: int, m: StepMetrics) -> StepMetrics:
    """The training loop's call after step ``step`` (metrics ``m``): :func:`maybe_refresh`, then
    the step's row logged again with the judge-split comparison made after it (also when the
    guard stops the run on it: the row is logged, then :class:`JudgeGuardStop` raised)."""
    from rankgym.trainer.monitor import JudgeGuardStop

    try:
        drift = maybe_refresh(trainer, step)
    except JudgeGuardStop as stop:
        if "judge_split" in stop.report:
            _log_split(trainer, step, m, stop.report["judge_split"])
        raise
    return m if drift is None else _log_split(trainer, step, m, drift)


def _log_split(trainer: Any, step: int, m: StepMetrics, drift: dict[str, Any]) -> StepMetrics:
    m = replace(m, **split_fields(drift))
    if trainer.dist.main:
        trainer.store.log_step(trainer.run_id, step, m.to_dict())
    return m
