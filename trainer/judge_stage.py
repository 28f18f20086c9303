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
   ``min_pairwise`` and, where held-out tie pairs were checked (``tie_ratio`` > 0), the judge
   is not shown to prefer the shorter of two verifier-tied trajectories (``max_tied_shorter``).

Where a failed check leaves the judge unused (``reward_when_passed``, see :func:`falls_back`),
step 2 stops before training when the held-out pairs are too few to decide the check
(``MIN_CHECK_PAIRS`` in ``MIN_CHECK_TASKS`` tasks) or there are no labelled pairs at all: the
stage says so, trains nothing, and GRPO keeps the configured reward and judge.

It returns the judge model string (``local/smollm2@<out>/judge_train/adapter``) that GRPO's
``[judge]`` should use when ``use`` is set. ``judge_refresh.py`` retrains it every
``refresh_every`` steps during GRPO (online). A rerun with ``--resume`` reuses a
finished stage (``stage.json``).

What it does not do: label anything itself (the verifier and people do), or guarantee that a
judge that ranks held-out pairs well trains a policy well (the monitor in ``rankgym train``
watches that).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rankgym.trainer.config import JudgeTrainSection, TrainConfig
from rankgym.trainer.judge_cut import FIT, apply_cut, fit_judge_cut
from rankgym.trainer.judge_job import TooFewPairs
from rankgym.trainer.judge_pipeline import JudgeTrainJob, run_judge_train, time_cap_line
from rankgym.trainer.judge_stage_check import (
    MIN_CHECK_PAIRS,
    MIN_CHECK_TASKS,
    failed_because,
    on_policy_message,
    skipped_check,
    stage_check,
    tie_clause,
)
from rankgym.trainer.rewards import build_reward, reward_class

STAGE_FILE = "stage.json"


def _judge_base(cfg: TrainConfig) -> str:
    """The judge's base model: the policy's (``local/smollm2`` for the embedded one)."""
    return "local/smollm2" if cfg.policy.model == "embedded" else cfg.policy.model


def _job(cfg: TrainConfig, jt: JudgeTrainSection, out: Path, stores: list[str]) -> JudgeTrainJob:
    """The judge-train job of the stage: ``rankgym judge-train``'s defaults, sized by
    ``[judge_train]`` (short prompts, no rationale, no extra comparison judge)."""
    from rankgym.trainer.judge_train import JudgeTrainConfig

    train = JudgeTrainConfig(
        epochs=jt.epochs, lr=jt.lr, lora_r=jt.lora_r, lora_alpha=2 * jt.lora_r,
        max_train_seconds=jt.max_train_minutes * 60 if jt.max_train_minutes else None,
        reason_tokens=0, max_line_chars=120, max_context_tokens=jt.max_context_tokens,
        seed=cfg.seed, tie_loss=jt.tie_loss, lambda_tie=jt.lambda_tie,
    )  # fmt: skip
    return JudgeTrainJob(
        out, stores=stores, base=_judge_base(cfg),
        sources=tuple(jt.sources), human_weight=jt.human_weight, tie_ratio=jt.tie_ratio,
        max_train_pairs=jt.max_train_pairs, max_per_task=jt.max_pairs_per_task,
        max_heldout_pairs=jt.max_heldout_pairs, heldout_fraction=jt.heldout_fraction,
        min_heldout_tasks=MIN_CHECK_TASKS, train=train, compare_with=(),
        answer_swaps=jt.answer_swaps, chain_edits=jt.chain_edits,
        length_balance=jt.length_balance, objective=jt.objective, agreement=jt.agreement,
        env_kwargs={e: _rollout_kwargs(cfg, e) or {} for e in _envs(cfg)},
    )  # fmt: skip


def _rollout_kwargs(cfg: TrainConfig, env: str) -> dict[str, Any] | None:
    """Env kwargs of the judge-split rollout: the training env's (``judge_train.env_kwargs``,
    else ``env.kwargs``); an extra env's own defaults."""
    if env != cfg.env.id:
        return None
    jt = cfg.judge_train
    return jt.env_kwargs if jt is not None and jt.env_kwargs is not None else cfg.env.kwargs


def _envs(cfg: TrainConfig) -> list[str]:
    """The envs whose judge split the stage rolls out (``judge_train.envs``, else ``[env.id]``)."""
    jt = cfg.judge_train
    return (jt.envs if jt is not None else None) or [cfg.env.id]


def rollout_judge_data(
    cfg: TrainConfig,
    adapter: str | Path,
    store: Path,
    name: str,
    seed: int,
    progress: bool = False,
    task_ids: dict[str, list[str]] | None = None,
) -> list[dict[str, Any]]:
    """Roll the policy in ``adapter`` (named ``name``, sampling as ``[policy]`` with ``seed``) out
    on the judge split of each of :func:`_envs` into ``store`` (``judge_train``'s tasks, group
    size and turns; or, per env, the ids in ``task_ids``); one ``rollout_judge_split`` summary
    per env. The stage's rollout and a ``judge_split`` refresh's."""
    from rankgym.trainer.judge_rollout import adapter_policy, rollout_judge_split

    jt = cfg.judge_train
    if jt is None:
        raise ValueError("the config has no [judge_train] section")
    store.parent.mkdir(parents=True, exist_ok=True)
    policy = adapter_policy(adapter, name, max_new_tokens=cfg.policy.max_new_tokens,
                            temperature=cfg.policy.temperature, seed=seed)  # fmt: skip
    return [
        rollout_judge_split(policy, env, store, tasks=jt.tasks, group_size=jt.group_size,
                            seed=seed, max_turns=jt.max_turns or cfg.env.max_turns,
                            env_kwargs=_rollout_kwargs(cfg, env), progress=progress,
                            task_ids=(task_ids or {}).get(env))
        for env in _envs(cfg)
    ]  # fmt: skip


def judge_adapter_of(judge: str, what: str) -> Path:
    """The adapter folder of a trained local judge: ``local/NAME@DIR`` (``local/smollm2``: the
    shipped one) or a ``rankgym judge-train`` folder (``DIR`` or ``DIR/adapter``). ``what``
    names the setting in the :class:`UserError` a judge without an adapter raises."""
    from rankgym.errors import UserError
    from rankgym.judge_adapter import adapter_dir, resolve_ref

    ref = resolve_ref(judge.removeprefix("local/")) if judge.startswith("local/") else judge
    if ref is None or ref == "pairwise":
        raise UserError(
            f"{what}: {judge!r} is not a trained local judge; pass local/smollm2@DIR or the "
            "folder `rankgym judge-train --out DIR` wrote"
        )
    try:
        return adapter_dir(ref)
    except FileNotFoundError as e:
        raise UserError(f"{what}: {e}") from None


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
    also written to ``stage.json``; ``"judge"`` is None where :func:`falls_back` and the
    rollout gave too few pairs to decide a check (``check["skipped"]`` says why; nothing was
    trained). With ``reuse`` a finished stage there is returned as is.
    """
    from rankgym.errors import UserError

    jt = cfg.judge_train
    if jt is None:
        raise ValueError("the config has no [judge_train] section")
    say = echo or (lambda _m: None)
    out = Path(out_dir) / "judge_train"
    stage_file = out / STAGE_FILE
    if reuse and stage_file.is_file():
        say(f"resume: reusing the trained judge in {out}")
        return json.loads(stage_file.read_text())
    # before the rollout: a judge it cannot start from wastes no rollout
    init = judge_adapter_of(jt.init_judge, "judge_train.init_judge") if jt.init_judge else None
    store = out / "data" / "rollout.db"
    say(f"judge_train: rolling out {sft_adapter} on the judge split of {', '.join(_envs(cfg))}")
    rollout = rollout_judge_data(cfg, sft_adapter, store, "judge-data-policy", cfg.seed, progress)
    job = _job(cfg, jt, out, [str(store), *jt.stores])
    if falls_back(cfg):  # a judge its check cannot pass would go unused: train none
        job.min_check = (MIN_CHECK_PAIRS, MIN_CHECK_TASKS)
    if init is not None:
        say(
            f"judge_train: {'training' if jt.train else 'checking'} {init} (judge_train.init_judge)"
        )
        job.init_adapter = str(init)
    try:
        if jt.train:
            summary = run_judge_train(job)
        else:
            from rankgym.trainer.judge_heldout import check_judge

            model = jt.init_judge or ""
            summary = check_judge(job, model if model.startswith("local/") else f"local/smollm2@{init}")  # fmt: skip
    except TooFewPairs as e:
        if not falls_back(cfg):
            raise UserError(f"[judge_train]: {e}") from None
        skipped = skipped_check(e, jt)
        result = {"judge": None, "check": skipped, "rollout": rollout,
                  "summary": {"judge": None, "trained": False, "train_pairs": e.train,
                              "heldout_pairs": e.heldout, "skipped": str(e)}}  # fmt: skip
        _write_stage(stage_file, result)
        say(f"judge_train: {skipped['skipped']}. GRPO keeps the configured reward; {skipped['advice']}")  # fmt: skip
        return result
    except UserError as e:
        raise UserError(f"[judge_train]: {e}") from None
    if summary.get("stopped_on_time_cap"):
        say(time_cap_line(summary))
    check = stage_check(summary, jt.min_pairwise, jt.max_tied_shorter)
    # no "cut" yet: :func:`stage_cut` fits it once GRPO is known to use this judge
    result = {"judge": summary["judge"], "check": check, "rollout": rollout, "summary": summary}
    _write_stage(stage_file, result)
    ci = check["pairwise_accuracy_ci"] or [float("nan")] * 2
    say(
        f"judge_train: {summary['train_pairs'] if jt.train else 'no'} training pairs; held-out pairwise "
        f"{check['pairwise_accuracy']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] on "
        f"{check['heldout_pairs']} pairs of this policy; "
        + tie_clause(check)
        + ("passed" if check["passed"] else "NOT passed")
    )
    return result


def _write_stage(stage_file: Path, result: dict[str, Any]) -> None:
    tmp = stage_file.with_name(STAGE_FILE + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str))
    tmp.replace(stage_file)


def falls_back(cfg: TrainConfig) -> bool:
    """Whether a judge that fails the stage's check goes unused: ``reward_when_passed`` keeps
    the configured reward and judge then. Such a stage trains no judge whose check could not
    decide anything (too few held-out pairs or tasks) and, with no labelled pair at all, goes
    on with the configured reward instead of stopping the run."""
    jt = cfg.judge_train
    return bool(jt and jt.use and jt.reward_when_passed and cfg.reward.kind != jt.reward_when_passed)  # fmt: skip


def swaps_judge(cfg: TrainConfig) -> bool:
    """Whether ``[judge_train]`` replaces ``[judge].model`` for GRPO (``use`` and a reward that
    reads the judge): then the preflight judge-check runs on the trained judge, after the stage,
    instead of on the config's judge before anything is written."""
    needs_judge = reward_class(cfg.reward.kind).needs_judge
    return bool(cfg.judge_train and cfg.judge_train.use and needs_judge)


def _use_judge(trainer: Any, model: str) -> None:
    """Point the trainer's judge spec at ``model`` (the rest of ``[judge]`` unchanged)."""
    from rankgym.trainer.setup import judge_spec

    cfg = trainer.cfg
    trainer.spec = judge_spec(cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"model": model})}))  # fmt: skip


def _on_main(trainer: Any, fn: Callable[[], Any]) -> Any:
    """``fn()`` on rank 0, its result (or its ``UserError``) on every rank."""
    from rankgym.errors import UserError

    res: Any = None
    if trainer.dist.main:
        try:
            res = ("ok", fn())
        except UserError as e:
            res = ("error", str(e))
    kind, value = trainer.dist.broadcast(res)
    if kind == "error":
        raise UserError(value)
    return value


def _preflight_trained(trainer: Any, check: dict[str, Any]) -> dict[str, Any] | None:
    """The preflight of the judge GRPO will use (the trained one): the calibration judge-check
    (``preflight.judge_preflight``), plus the stage's on-policy check under ``on_policy``. A
    judge-only reward whose on-policy check failed stops here unless ``--force``."""
    from rankgym.errors import UserError
    from rankgym.trainer.preflight import judge_preflight

    cfg = trainer.cfg
    swapped = cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"model": trainer.spec.model})})  # fmt: skip
    report = judge_preflight(swapped, trainer.spec, force=trainer.force, echo=trainer.echo)
    if report is not None:
        report["on_policy"] = check
    if not check.get("passed"):
        msg = f"[judge_train]: {on_policy_message(check)}{failed_because(check)}"
        if reward_class(cfg.reward.kind).judge_only and not trainer.force:
            raise UserError(
                msg + ": a judge-only reward would train on noise. Options: more judge data "
                "(judge_train.group_size, judge_train.tasks, judge_train.stores with people's "
                'rankings); reward.kind = "judge+verifiable"; or --force to train anyway'
            )
        trainer.echo("warning: " + msg + (" (--force: training anyway)" if trainer.force else ""))
    return report


def judge_train_stage(trainer: Any) -> None:
    """The call site in ``Trainer.setup`` after the SFT stage, on every rank: rank 0 runs
    :func:`run_judge_train_stage` on the SFT adapter (``<out>/sft``, or ``--init-adapter``);
    every rank keeps the result in ``trainer.judge_train`` and, with ``use`` and a reward that
    reads the judge, judges GRPO's groups with it (on resume: with the newest finished online
    refresh). The preflight judge-check then runs on that judge (``trainer.judge_check``,
    ``judge_check.json``), so the no-signal refusal reads the judge GRPO really uses."""
    from rankgym.errors import UserError

    cfg = trainer.cfg
    adapter = trainer.init_adapter or (trainer.out / "sft" if cfg.sft is not None else None)
    if adapter is None or not (Path(adapter) / "adapter_config.json").is_file():
        raise UserError(
            "[judge_train] rolls out the SFT policy on the judge split: add an [sft] section "
            "or pass --init-adapter DIR"
        )
    trainer.judge_train = res = _on_main(trainer, lambda: run_judge_train_stage(
        cfg, adapter, trainer.out, reuse=trainer.resume, progress=trainer.progress,
        echo=trainer.echo,
    ))  # fmt: skip
    if not swaps_judge(cfg):
        return
    judge, check, cut = res["judge"], res["check"], None
    if judge is None:  # too little data to check a judge: none trained, the configured one stays
        trainer.judge_check = None
        _maybe_judge_only(trainer, check)
        return
    if trainer.resume:
        from rankgym.trainer import checkpoint as ckpt

        latest = ckpt.latest_checkpoint(trainer.out)
        done = int(ckpt.read_meta(latest)["step"]) if latest is not None else 0
        from rankgym.trainer.judge_refresh import refreshes

        refreshed = [r for r in refreshes(trainer.out) if r["after_step"] <= done]
        if refreshed:
            judge, check = refreshed[-1]["judge"], refreshed[-1]["check"]
            # the newest fitted cut, as the run had it (a refresh that fitted none kept the last)
            cut = next((r["cut"] for r in reversed(refreshed) if r.get("cut")), None)
            trainer.judge_train = {**res, "refresh": refreshed[-1]}
            trainer.echo(f"resume: judging with the judge refreshed after step {refreshed[-1]['after_step']}")  # fmt: skip
    _use_judge(trainer, judge)
    if falls_back(cfg) and not res["check"].get("passed"):
        # the configured judge stays (below): no calibration check of the failed one
        trainer.judge_check = None
    else:
        trainer.judge_check = _on_main(trainer, lambda: _preflight_trained(trainer, check))
        if trainer.judge_check is not None and trainer.dist.main:
            from rankgym.trainer.checkpoint import write_json_atomic

            write_json_atomic(trainer.out / "judge_check.json", trainer.judge_check)
    _maybe_judge_only(trainer, res["check"])
    if trainer.spec is not None and trainer.spec.model == judge:  # not fallen back
        # after _maybe_judge_only, which may rebuild the reward
        apply_cut(trainer, cut if cut is not None else stage_cut(trainer, res))


def stage_cut(trainer: Any, res: dict[str, Any]) -> dict[str, Any] | None:
    """With ``judge_threshold = "fit"``: the cut of the stage's judge, fitted on its rollout
    (:func:`fit_judge_cut`) the first time a run is known to judge GRPO's groups with it, after
    the on-policy and calibration checks, so a fallen-back run spends no judging pass on it.
    Kept in ``stage.json`` (``"cut"``, None when there was no boundary) and read from there on
    resume. None when the setting is off."""
    if trainer.cfg.reward.judge_threshold != FIT:
        return None
    if "cut" not in res:
        out = Path(trainer.out) / "judge_train"

        def fit() -> dict[str, Any] | None:
            cut = fit_judge_cut(trainer.cfg, res["judge"], out / "data" / "rollout.db", trainer.echo)  # fmt: skip
            _write_stage(out / STAGE_FILE, {**res, "cut": cut})
            return cut

        # trainer.judge_train is res, or its copy on a resume with refreshes
        res["cut"] = trainer.judge_train["cut"] = _on_main(trainer, fit)
    return res["cut"]


def _maybe_judge_only(trainer: Any, check: dict[str, Any]) -> None:
    """``reward_when_passed``: make GRPO's reward judge-only when the stage's judge passed its
    on-policy check and its calibration judge-check (none run counts as passed); else say why,
    and keep the configured reward *and judge* (checked by the usual preflight). Decided on the
    stage's first judge, so a resume decides the same."""
    cfg = trainer.cfg
    jt = cfg.judge_train
    if jt is None or not falls_back(cfg):
        return
    report = trainer.judge_check
    calibration = report is None or report.get("decision") == "ok"
    if check.get("passed") and calibration:
        trainer.cfg = cfg.model_copy(update={"reward": cfg.reward.model_copy(update={"kind": jt.reward_when_passed})})  # fmt: skip
        trainer.reward = build_reward(trainer.cfg.reward)
        trainer.echo(
            f"judge_train: {on_policy_message(check)}, above {check.get('min_pairwise')}: GRPO's "
            f"reward is {jt.reward_when_passed!r} (the verifier now only feeds the monitor)"
        )
        return
    why = (
        f"{on_policy_message(check)}{failed_because(check)}"
        if not check.get("passed")
        else f"its calibration judge-check did not pass ({(report or {}).get('message')})"
    )
    trainer.echo(
        f"judge_train: the reward stays {cfg.reward.kind!r} with the configured judge "
        f"{cfg.judge.model}: {why}"
    )
    from rankgym.trainer.preflight import judge_preflight

    _use_judge(trainer, cfg.judge.model)
    trainer.judge_check = _on_main(trainer, lambda: judge_preflight(cfg, trainer.spec, force=trainer.force, echo=trainer.echo))  # fmt: skip
    if trainer.judge_check is not None and trainer.dist.main:
        from rankgym.trainer.checkpoint import write_json_atomic

        write_json_atomic(trainer.out / "judge_check.json", trainer.judge_check)
