"""The ``[judge_train]`` stage of ``rankgym train``: a judge trained on this policy's own groups.

After ``[sft]`` and before GRPO, :func:`run_judge_train_stage`:

1. rolls the SFT adapter out on the ``judge`` split of each env in ``judge_train.envs``
   (train tasks that ``env.tasks("train")`` leaves out, so GRPO never draws them) into
   ``<out>/judge_train/data/rollout.db``;
2. builds labelled pairs from it (the verifier's rewards) and from ``judge_train.stores``
   (verifier rewards and people's rankings; ``sources`` / ``human_weight`` select and weight),
   split by task, and trains a pairwise judge LoRA (``rankgym judge-train``'s code path);
3. **checks** the trained judge on the held-out tasks of the same rollout (pairs the judge
   never trained on, each judged in both orders): pairwise accuracy and position consistency
   with 95% cluster-bootstrap CIs; ``passed`` when the accuracy's CI lies above
   ``min_pairwise``.

It returns the judge model string (``local/smollm2@<out>/judge_train/adapter``) that GRPO's
``[judge]`` should use when ``use`` is set. :func:`refresh_judge` retrains it every
``refresh_every`` steps on the run's newest groups (online). A rerun with ``--resume`` reuses a
finished stage (``stage.json``).

What it does not do: label anything itself (the verifier and people do), or guarantee that a
judge that ranks held-out pairs well trains a policy well (the monitor in ``rankgym train``
watches that).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rankgym.trainer.config import JudgeTrainSection, TrainConfig

STAGE_FILE = "stage.json"


def _judge_train_args(out: Path, **overrides: Any) -> argparse.Namespace:
    """``rankgym judge-train``'s arguments with their defaults, then ``overrides``."""
    from rankgym.trainer.judge_train_command import _args

    p = argparse.ArgumentParser()
    _args(p)
    args = p.parse_args(["--out", str(out)])
    args.json, args.quiet, args.verbose = True, True, False
    for k, v in overrides.items():
        setattr(args, k, v)
    return args


def _settings(cfg: TrainConfig, jt: JudgeTrainSection) -> dict[str, Any]:
    return {
        "store": list(jt.stores),
        "sources": ",".join(jt.sources),
        "human_weight": jt.human_weight,
        "max_train_pairs": jt.max_train_pairs,
        "max_heldout_pairs": jt.max_heldout_pairs,
        "heldout_fraction": jt.heldout_fraction,
        "epochs": jt.epochs,
        "lr": jt.lr,
        "lora_r": jt.lora_r,
        "max_train_seconds": jt.max_train_minutes * 60 if jt.max_train_minutes else None,
        "reason_tokens": 0,
        "max_line_chars": 120,
        "max_context_tokens": 768,
        "compare_with": "",
        "seed": cfg.seed,
    }


def _check(summary: dict[str, Any], min_pairwise: float) -> dict[str, Any]:
    """The held-out numbers of the trained judge and whether they pass."""
    comp = summary.get("comparison") or {}
    judges = comp.get("judges") or {}
    row = next(iter(judges.values()), {}).get("all", {}) if judges else {}
    ci = row.get("pairwise_accuracy_ci")
    return {
        "heldout_pairs": comp.get("n_pairs"),
        "heldout_tasks": comp.get("n_tasks"),
        "pairwise_accuracy": row.get("pairwise_accuracy"),
        "pairwise_accuracy_ci": ci,
        "position_consistency": row.get("position_consistency"),
        "position_consistency_ci": row.get("position_consistency_ci"),
        "baselines": comp.get("baselines"),
        "min_pairwise": min_pairwise,
        "passed": bool(ci and ci[0] > min_pairwise),
    }


def run_judge_train_stage(
    cfg: TrainConfig,
    sft_adapter: str | Path,
    out_dir: str | Path,
    *,
    reuse: bool = False,
    progress: bool = False,
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run ``cfg.judge_train`` (see the module docstring) under ``out_dir/judge_train``.

    Returns ``{"judge": model string, "check": {...}, "rollout": {...}, "summary": {...}}``,
    also written to ``stage.json``. With ``reuse`` a finished stage there is returned as is.
    """
    from rankgym.errors import UserError
    from rankgym.trainer.judge_rollout import adapter_policy, rollout_judge_split
    from rankgym.trainer.judge_train_command import _run, time_cap_line

    jt = cfg.judge_train
    if jt is None:
        raise ValueError("the config has no [judge_train] section")
    say = echo or (lambda _m: None)
    out = Path(out_dir) / "judge_train"
    stage_file = out / STAGE_FILE
    if reuse and stage_file.is_file():
        say(f"resume: reusing the trained judge in {out}")
        return json.loads(stage_file.read_text())
    envs = jt.envs or [cfg.env.id]
    base = "local/smollm2" if cfg.policy.model == "embedded" else cfg.policy.model
    store = out / "data" / "rollout.db"
    store.parent.mkdir(parents=True, exist_ok=True)
    say(f"judge_train: rolling out {sft_adapter} on the judge split of {', '.join(envs)}")
    policy = adapter_policy(sft_adapter, "judge-data-policy", max_new_tokens=cfg.policy.max_new_tokens,
                            temperature=cfg.policy.temperature, seed=cfg.seed)  # fmt: skip
    rollout = [
        rollout_judge_split(policy, env, store, tasks=jt.tasks, group_size=jt.group_size,
                            seed=cfg.seed, max_turns=jt.max_turns or cfg.env.max_turns,
                            env_kwargs=cfg.env.kwargs if env == cfg.env.id else None,
                            progress=progress)
        for env in envs
    ]  # fmt: skip
    del policy
    args = _judge_train_args(out, **_settings(cfg, jt), base=base)
    args.store = [str(store), *args.store]
    try:
        summary = _run(args)
    except UserError as e:
        raise UserError(f"[judge_train]: {e}") from None
    if summary.get("stopped_on_time_cap"):
        say(time_cap_line(summary))
    check = _check(summary, jt.min_pairwise)
    result = {"judge": summary["judge"], "check": check, "rollout": rollout, "summary": summary}
    tmp = stage_file.with_name(STAGE_FILE + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str))
    tmp.replace(stage_file)
    ci = check["pairwise_accuracy_ci"] or [float("nan")] * 2
    say(
        f"judge_train: {summary['train_pairs']} training pairs; held-out pairwise "
        f"{check['pairwise_accuracy']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] on "
        f"{check['heldout_pairs']} pairs of this policy; "
        + ("passed" if check["passed"] else f"NOT above {jt.min_pairwise}")
    )
    return result


def refresh_due(cfg: TrainConfig, step: int) -> bool:
    """True when GRPO step ``step`` (0-based, just finished) should refresh the judge."""
    jt = cfg.judge_train
    return bool(jt and jt.refresh_every and (step + 1) % jt.refresh_every == 0)


def refresh_judge(
    cfg: TrainConfig,
    store_path: str | Path,
    run_id: str,
    step: int,
    out_dir: str | Path,
    *,
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Retrain the judge on the run's groups so far (verifier rewards, rankings) plus the
    judge-split rollout, into ``out_dir/judge_train/refresh-<step>``; returns
    ``{"judge", "check", "summary"}`` like :func:`run_judge_train_stage`."""
    from rankgym.trainer.judge_train_command import _run

    jt = cfg.judge_train
    if jt is None:
        raise ValueError("the config has no [judge_train] section")
    say = echo or (lambda _m: None)
    base = Path(out_dir) / "judge_train"
    out = base / f"refresh-{step + 1}"
    stores = [str(store_path), *jt.stores]
    rollout_db = base / "data" / "rollout.db"
    if rollout_db.is_file():
        stores.append(str(rollout_db))
    base = "local/smollm2" if cfg.policy.model == "embedded" else cfg.policy.model
    args = _judge_train_args(out, **_settings(cfg, jt), base=base)
    args.store = stores
    summary = _run(args)
    check = _check(summary, jt.min_pairwise)
    say(
        f"judge_train refresh after step {step + 1}: held-out pairwise {check['pairwise_accuracy']}"
    )
    return {"judge": summary["judge"], "check": check, "summary": summary}


def _use_judge(trainer: Any, model: str) -> None:
    """Point the trainer's judge spec at ``model`` (the rest of ``[judge]`` unchanged)."""
    from rankgym.trainer.setup import judge_spec

    cfg = trainer.cfg
    trainer.spec = judge_spec(cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"model": model})}))  # fmt: skip


def judge_train_stage(trainer: Any) -> None:
    """The call site in ``Trainer.setup`` after the SFT stage: run :func:`run_judge_train_stage`
    on the SFT adapter (``<out>/sft``, or ``--init-adapter``), keep the result in
    ``trainer.judge_train`` and, with ``use`` and a reward that reads the judge, judge GRPO's
    groups with it."""
    from rankgym.errors import UserError

    cfg = trainer.cfg
    adapter = trainer.init_adapter or (trainer.out / "sft" if cfg.sft is not None else None)
    if adapter is None or not (Path(adapter) / "adapter_config.json").is_file():
        raise UserError(
            "[judge_train] rolls out the SFT policy on the judge split: add an [sft] section "
            "or pass --init-adapter DIR"
        )
    trainer.judge_train = res = run_judge_train_stage(
        cfg, adapter, trainer.out, reuse=trainer.resume, progress=trainer.progress,
        echo=trainer.echo,
    )  # fmt: skip
    if cfg.judge_train and cfg.judge_train.use and trainer.spec is not None:
        _use_judge(trainer, res["judge"])


def maybe_refresh(trainer: Any, step: int) -> None:
    """The call site after GRPO step ``step``: every ``refresh_every`` steps retrain the judge
    on the run's groups so far and judge the next steps with it (see :func:`refresh_judge`)."""
    cfg = trainer.cfg
    if not refresh_due(cfg, step) or trainer.spec is None or not trainer.dist.main:
        return
    from rankgym.errors import UserError

    try:
        res = refresh_judge(cfg, cfg.store_path, trainer.run_id, step, trainer.out, echo=trainer.echo)  # fmt: skip
    except UserError as e:  # e.g. too few new pairs: a failed refresh must not end the GRPO run
        trainer.echo(f"warning: judge_train refresh after step {step + 1} failed ({e}); GRPO keeps its current judge")  # fmt: skip
        return
    trainer.judge_train = {**(trainer.judge_train or {}), "refresh": res}
    if cfg.judge_train and cfg.judge_train.use:
        _use_judge(trainer, res["judge"])
