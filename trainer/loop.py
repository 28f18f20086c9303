"""The training loop: rollout -> judge -> store -> GRPO update -> checkpoint -> next rollout.

One step ``k`` (0-based):

1. **rollout**: ``tasks_per_step`` tasks x ``group_size`` episodes with the policy at adapter
   step ``k`` (its name is ``<model>@step<k>``; every Turn records it and the loop checks that
   all of them do, so a stale adapter cannot train silently). Sampling is seeded per episode
   from ``(seed, step, task, index)``, so a step regenerates identically.
2. **judge** (if the reward uses it): one LiteLLM call per group, cached and stored; the
   judge is shown the env's tool schemas (``Group.tools``). Rollout and judging live in
   ``step_data.py``.
3. **store**: groups, trajectories and judgements go to the SQLite store; a step manifest
   (``<out>/steps/step-00000k.json``, written atomically) records the step's group ids in order.
   A resumed run reuses a step whose manifest exists instead of rolling it out again.
4. **update**: the judge monitor and its guard (``monitor.watch_judge``: may stop the run, or
   drop a judge shown below chance from a blend) -> rewards (``rewards.step_rewards``: blend +
   hack penalty) -> group advantages -> the no-signal refusal (``no_signal.watch_signal``: may
   stop the run or skip the update) -> one GRPO update (``grpo.py``).
5. **checkpoint**: adapter + optimizer + scheduler + RNG state, atomically; then
   ``store.log_step`` with the step's metrics (``step_report.step_metrics``).

Setup validates everything it can (device, judge credentials and rubric, env id and kwargs,
task counts, the model and LoRA targets) before it writes anything; a start that still fails
(run.json written, no step done) leaves an output dir that the next start reuses. The model is
loaded once, into the run's ``TrainingContext`` (``context.py``: model, tokenizer, model folder,
device, dtype, bf16); the rollout, evaluation and SFT policies and the vLLM sync come from it.
``--resume`` loads the newest complete checkpoint and continues at its step; with the same seed
it reaches the same adapter as a run that was never interrupted (tested with SIGKILL mid-step).
With ``adapt_threads`` the torch thread count is re-chosen from the free cores before each
phase (rollout, judge, update, eval), so a run keeps its pace when the box gets busier or idler.

Under ``accelerate launch`` the update is data-parallel (``distributed.py``: rank 0 rolls out,
judges and writes; every rank trains on its share and gradients are summed). With ``[vllm]``
``_serve_adapter`` publishes each step's adapter to the server (``adapter_sync.py``).

What it does not do: no sharded rollouts or FSDP, no evaluation-based early stopping, and no
judge retries beyond what ``judges.group_judge`` does (an unjudged group gets no signal).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from rankgym.envs.policies import Policy, derive_seed
from rankgym.envs.rollout import EnvFactory
from rankgym.errors import UserError
from rankgym.store import Store
from rankgym.threads import set_torch_threads
from rankgym.trainer import checkpoint as ckpt
from rankgym.trainer.adapter_sync import AdapterSync, start_for
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.context import TrainingContext
from rankgym.trainer.distributed import Dist, rank_config
from rankgym.trainer.distributed import from_env as dist_from_env
from rankgym.trainer.finite import check_update
from rankgym.trainer.grpo import (
    Sample,
    UpdateSettings,
    group_advantages,
    grpo_update,
    trajectory_rows,
)
from rankgym.trainer.monitor import JudgeGuardStop, JudgeMonitor
from rankgym.trainer.monitor_step import start_monitor, watch_judge
from rankgym.trainer.no_signal import watch_signal
from rankgym.trainer.preflight import judge_preflight
from rankgym.trainer.records import EvalResult, StepTiming
from rankgym.trainer.rewards import StepMetrics, build_reward
from rankgym.trainer.setup import (
    check_env,
    check_inputs,
    judge_spec,
    make_optimizer,
    update_settings,
)
from rankgym.trainer.step_report import history_summary, step_line, step_metrics
from rankgym.trainer.truncation_watch import watch_truncation
from rankgym.types import Group, JudgeSpec

log = logging.getLogger(__name__)

# Config keys that may change between a run and its resumption.
RESUMABLE_CHANGES = {
    "steps", "out_dir", "store", "keep_checkpoints", "eval", "vllm", "router", "monitor",
}  # fmt: skip


class Trainer:
    """Runs a :class:`TrainConfig` end to end (see the module docstring).

    ``out_dir``/``store_path`` override the config's. ``progress`` shows tqdm bars on stderr.
    ``adapt_threads`` re-chooses torch threads before each phase (the CLI turns it on).
    ``init_adapter`` is a peft adapter dir (e.g. from ``rankgym sft``) the LoRA starts from.
    Every attribute is declared in ``__init__``; those without a default are set by ``setup()``.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        out_dir: str | None = None,
        store_path: str | None = None,
        resume: bool = False,
        progress: bool = True,
        echo: Any = None,
        adapt_threads: bool = False,
        init_adapter: str | Path | None = None,
        force: bool = False,
    ) -> None:
        if out_dir:
            cfg = cfg.model_copy(update={"out_dir": out_dir})
        if store_path:
            cfg = cfg.model_copy(update={"store": store_path})
        self.cfg = cfg
        self.out = Path(cfg.out_dir)
        self.resume = resume
        self.progress = progress
        self.adapt_threads = adapt_threads
        init_adapter = init_adapter or cfg.policy.adapter  # the flag wins over [policy] adapter
        self.init_adapter = Path(init_adapter) if init_adapter else None
        self.force = force
        """Train even when the judge-check says the judge cannot judge (``--force``)."""
        self.judge_check: dict[str, Any] | None = None
        self.echo = echo or (lambda msg: log.info("%s", msg))
        # what setup() and the stages fill in: known before setup, when they have a default
        self.spec: JudgeSpec | None = None
        """The judge's spec when the reward reads a judge (``[judge_train]`` may replace it)."""
        self.reward = build_reward(cfg.reward)
        """The reward type of ``[reward]`` (``rewards.REWARDS``); ``[judge_train]`` may replace it."""
        self.start_step = 0
        self.sft_summary: dict[str, Any] | None = None
        self.judge_train: dict[str, Any] | None = None
        """What the ``[judge_train]`` stage (and its refreshes) returned."""
        self.monitor: JudgeMonitor | None = None
        self.sync: AdapterSync | None = None
        # set by setup(), read only after it
        self.dist: Dist
        self.env: EnvFactory
        self.success_threshold: float
        self.ctx: TrainingContext
        """The model, tokenizer, model folder, device and dtype of the run (``context.py``)."""
        self.optimizer: torch.optim.Optimizer
        self.scheduler: torch.optim.lr_scheduler.LRScheduler
        self.update_settings: UpdateSettings
        self.run_id: str
        self.store: Store
        self.policy: Policy
        """The rollout policy: the trained model itself, or the vLLM server (``[vllm]``)."""
        if cfg.loss.importance_sampling_level == "sequence" and cfg.loss.type != "grpo":
            log.warning(
                "importance_sampling_level='sequence' with loss.type=%r weights each sequence "
                "by its length (TRL warns the same); loss.type='grpo' is the GSPO setup",
                cfg.loss.type,
            )

    # the training context's parts, read by the step and the stages
    @property
    def model(self) -> Any:
        return self.ctx.model

    @property
    def tokenizer(self) -> Any:
        return self.ctx.tokenizer

    # ---- setup --------------------------------------------------------------------------

    def _run_identity(self) -> str:
        """The run id: the saved one on resume, a new one otherwise (writes run.json)."""
        return ckpt.run_identity(
            self.out,
            self.cfg.model_dump(mode="json"),
            resume=self.resume,
            name=self.cfg.name,
            resumable=RESUMABLE_CHANGES,
            echo=self.echo,
        )

    def _preflight(self) -> None:
        """Fail before anything is written when the device, the judge's credentials or an input
        (``setup.check_inputs``) is bad."""
        from rankgym.judges.group_judge import check_credentials

        if self.cfg.router is not None:
            from rankgym.router import install

            install(self.cfg.router)
        check_inputs(self.cfg, self.init_adapter)
        if self.reward.needs_judge:
            self.spec = judge_spec(self.cfg)
            try:
                check_credentials(self.spec)
            except ValueError as e:
                raise UserError(f"judge.model: {e}") from None

    def _build_model(self) -> None:
        self.ctx = TrainingContext.from_config(self.cfg, self.init_adapter)

    def setup(self) -> None:
        """Validate, load the model, then (only then) write run.json and open the store."""
        self.dist = dist_from_env(self.cfg.policy.device)  # accelerate launch: one rank a device
        self.cfg = cfg = rank_config(self.cfg, self.dist)
        self.out = Path(cfg.out_dir)
        self._preflight()
        self.env, self.success_threshold, max_turns = check_env(cfg)  # bad id/kwargs/task counts
        self.judge_check = None
        from rankgym.trainer.judge_stage import swaps_judge

        if self.dist.main and not swaps_judge(cfg):  # [judge_train]: checked after its stage
            self.judge_check = judge_preflight(
                self.cfg, self.spec, force=self.force, echo=self.echo
            )
        self.judge_check = self.dist.broadcast(self.judge_check)  # every rank's no-signal check
        self._build_model()
        self.optimizer, self.scheduler = make_optimizer(self.model, cfg)
        self.update_settings = update_settings(cfg, max_turns, self.ctx.bf16)
        self.out.mkdir(parents=True, exist_ok=True)
        self.run_id = self._run_identity()
        self.store = Store(cfg.store_path)
        if self.judge_check is not None:
            ckpt.write_json_atomic(self.out / "judge_check.json", self.judge_check)
        self.store.create_run(
            name=self.run_id, kind="train", config=cfg.model_dump(mode="json"), run_id=self.run_id
        )
        if cfg.sft is not None and self.init_adapter is None:
            self._warm_start()
        if cfg.judge_train is not None:  # a judge on this policy's groups (rank 0 trains it)
            from rankgym.trainer.judge_stage import judge_train_stage

            judge_train_stage(self)
        if self.resume:
            self._load_latest()
        if self.spec is not None:  # the judge is watched on every step's groups
            self.monitor = start_monitor(self)
        self.policy = self.ctx.policy(self.policy_name(self.start_step))
        if cfg.vllm is not None and self.dist.main:  # rollouts through vLLM, one adapter a step
            self.sync = start_for(self.ctx, cfg.vllm, run_id=self.run_id, out_dir=self.out,
                                  lora_rank=cfg.lora.r, name=self.policy_name(self.start_step))  # fmt: skip
            self.policy = self.sync.policy

    def _warm_start(self) -> None:
        """Run the ``[sft]`` stage into ``<out>/sft`` (on resume: reuse the adapter it wrote)."""
        from rankgym.trainer.sft import warm_start

        self._phase_threads({}, "sft")
        self.sft_summary = warm_start(
            self.cfg,
            self.ctx,
            self.out / "sft",
            reuse=self.resume,
            load=ckpt.latest_checkpoint(self.out) is None,
            progress=self.progress,
            echo=self.echo,
        )

    def policy_name(self, step: int) -> str:
        return f"{self.ctx.model_name}@step{step}"

    def _load_latest(self) -> None:
        restored = ckpt.restore_latest(self.out, self.model, self.optimizer, self.scheduler)
        if restored is None:
            self.echo(f"resume: no checkpoint in {self.out} yet; starting at step 0")
            return
        path, self.start_step, meta = restored
        logged = {r["step"] for r in self.store.steps(self.run_id)}
        if self.start_step - 1 not in logged and meta.get("metrics"):
            self.store.log_step(self.run_id, self.start_step - 1, meta["metrics"])
        self.echo(f"resume: loaded {path.name}; continuing at step {self.start_step}")

    def _phase_threads(self, timing: StepTiming, phase: str) -> None:
        """Re-choose torch threads for ``phase`` from the free cores (when ``adapt_threads``)."""
        if self.adapt_threads:
            timing.setdefault("threads", {})[phase] = set_torch_threads()

    # ---- one step -------------------------------------------------------------------------

    def _serve_adapter(self, step: int) -> str:
        """Make the rollout policy serve adapter step ``step``; returns the name it must report.

        The in-process policy *is* the trained model, so this only renames it; a backend that
        serves the adapter elsewhere loads ``ckpt.latest_checkpoint(self.out)`` here.
        """
        expected = self.policy_name(step)
        self.policy.name = expected
        if self.sync is not None:  # save, load as <run>@step<k>, verify, unload the old one
            self.sync.publish(step)
        return expected

    def _rollout_and_judge(self, step: int) -> tuple[list[Group], StepTiming]:
        """Rank 0 rolls out and judges (or reuses a stored step); every rank gets the groups."""
        return self.dist.broadcast(self._rollout_and_judge_main(step) if self.dist.main else None)

    def _rollout_and_judge_main(self, step: int) -> tuple[list[Group], StepTiming]:
        from rankgym.trainer.step_data import rollout_and_judge

        return rollout_and_judge(self, step)

    def step(self, step: int) -> StepMetrics:
        """Run training step ``step`` (0-based); returns its metrics (also logged)."""
        cfg = self.cfg
        t_step = time.perf_counter()
        groups, timing = self._rollout_and_judge(step)
        watched = watch_judge(self, step, groups)  # may stop the run or drop the judge
        sr = self.reward.score(groups)
        adv = group_advantages(sr.rewards, cfg.reward.scale_rewards)
        watched |= watch_signal(self, step, groups, adv.values)  # may stop or skip (no_signal.py)
        skipped = bool(watched.get("skipped_no_signal"))  # judge noise only: no update at all
        samples = [
            Sample(trajectory_rows(t.turns), a)
            for g, advs in zip(groups, adv.values, strict=True)
            for t, a in zip(g.trajectories, advs, strict=True)
        ] if not skipped else []  # fmt: skip
        self._phase_threads(timing, "update")
        torch.manual_seed(derive_seed("update", cfg.seed, step) % (2**63))
        st = grpo_update(
            self.model,
            self.optimizer,
            samples,
            self.update_settings,
            pad_id=self.tokenizer.pad_token_id,
            scheduler=self.scheduler,
            shard=(self.dist.rank, self.dist.world),
            sync_grads=self.dist.sum_grads if self.dist.enabled else None,
        )
        check_update(
            "train",
            step + 1,
            loss=st.loss,
            grad_norm=st.grad_norm,
            params=(p for p in self.model.parameters() if p.requires_grad),
            hint="lower [optim] lr / [loss] epsilon, beta or check the rewards",
        )
        metrics = step_metrics(
            policy=self.policy_name(step),
            reward_kind=cfg.reward.kind,
            rewards=sr,
            n_groups=len(groups),
            n_trajectories=sum(len(g.trajectories) for g in groups),
            success_threshold=self.success_threshold,
            zero_variance_groups=adv.zero_variance_groups,
            unscored=adv.unscored,
            update=st,
            lr=float(self.scheduler.get_last_lr()[0]),
            timing=timing,
            bf16=self.ctx.bf16,
            judge_cut=self.reward.judge_threshold,  # the cut score() read (None: graded)
        )
        if self.sync is not None:
            metrics = replace(metrics, extra=dict(self.sync.last))
        cuts, warning = watch_truncation(step, groups, self.store.steps(self.run_id))
        metrics = replace(metrics, **watched, **cuts)
        if warning:
            self.echo(warning)
        if metrics.no_signal and not skipped:  # a skipped step was announced by watch_signal
            self.echo(
                f"step {step + 1}: no signal ({adv.zero_variance_groups}/{len(groups)} groups had "
                "equal rewards); no optimizer step"
            )
        t_ck = time.perf_counter()
        self.policy.name = self.policy_name(step + 1)
        metrics = replace(metrics, time_step_s=time.perf_counter() - t_step)
        path = ckpt.save_checkpoint(
            self.out,
            step + 1,
            self.model,
            self.optimizer,
            self.scheduler,
            meta={
                "run_id": self.run_id,
                "metrics": metrics.to_dict(),
                "env": {"id": self.cfg.env.id, "kwargs": self.cfg.env.kwargs},
                "policy_model": self.cfg.policy.model,
                "max_new_tokens": self.cfg.policy.max_new_tokens,
            },
            keep=cfg.keep_checkpoints,
        )
        metrics = replace(
            metrics, time_checkpoint_s=time.perf_counter() - t_ck, checkpoint=str(path)
        )
        self.store.log_step(self.run_id, step, metrics.to_dict())
        return metrics

    # ---- evaluation -----------------------------------------------------------------------

    def evaluate(self, tag: str) -> EvalResult:
        """Held-out success of base (adapter off) vs the current adapter, paired."""
        from rankgym.trainer.evaluate import AdapterOffPolicy, evaluate_policies

        e = self.cfg.eval
        self._phase_threads({}, "eval")
        cur = self.ctx.eval_policy(self.policy.name, e.temperature)
        policies = {"base": AdapterOffPolicy(cur, f"{self.ctx.model_name}@base"), "trained": cur}
        res = evaluate_policies(
            self.env,
            policies,
            split=e.split,
            n_tasks=e.tasks,
            samples=e.samples,
            seed=self.cfg.seed,
            progress=self.progress,
        )
        res["tag"] = tag
        return res

    # ---- whole run ------------------------------------------------------------------------

    def _stopped(self, stop: JudgeGuardStop) -> None:
        """The guard stopped the run: keep the last adapter, write ``guard_stop.json``, close."""
        final = ckpt.latest_checkpoint(self.out)
        adapter = ckpt.copy_adapter(final, self.out / "adapter") if final else None
        report = {
            **stop.report,
            "message": str(stop),
            "adapter": str(adapter) if adapter else None,
            "monitor": self.monitor.summary() if self.monitor is not None else None,
        }
        if self.dist.main:
            ckpt.write_json_atomic(self.out / "guard_stop.json", report)
        stop.report = report
        if self.sync is not None:
            self.sync.close()
        self.store.close()

    def run(self) -> dict[str, Any]:
        """Train ``cfg.steps`` steps (from the last checkpoint on resume); returns the summary."""
        self.setup()
        try:
            return self._run()
        finally:
            self.dist.close()

    def _run(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        history: list[StepMetrics] = []
        evals: list[EvalResult] = []
        if self.start_step >= cfg.steps:
            self.echo(f"run {self.run_id} already has {self.start_step} steps; nothing to do")
        for k in range(self.start_step, cfg.steps):
            try:
                m = self.step(k)
                history.append(m)
                self.echo(step_line(m, k, cfg.steps))
                if cfg.judge_train is not None:  # online: retrain the judge every K steps
                    from rankgym.trainer.judge_refresh import refresh_after_step

                    history[-1] = m = refresh_after_step(self, k, m)  # its guard may stop it
            except JudgeGuardStop as stop:
                self._stopped(stop)
                raise
            if (
                cfg.eval.every
                and (k + 1) % cfg.eval.every == 0
                and k + 1 < cfg.steps
                and self.dist.main
            ):
                ev = self.evaluate(f"step{k + 1}")
                ev["step"] = k + 1
                evals.append(ev)
                self.store.log_step(self.run_id, k, replace(m, eval=ev).to_dict())
        final = ckpt.latest_checkpoint(self.out)
        adapter = ckpt.copy_adapter(final, self.out / "adapter") if final else None
        if (cfg.eval.at_end or cfg.eval.every) and self.dist.main:
            ev = self.evaluate(f"step{cfg.steps}")
            ev["step"] = cfg.steps
            evals.append(ev)
        summary = {
            "run_id": self.run_id,
            "store": str(self.cfg.store_path),
            "out_dir": str(self.out),
            "adapter": str(adapter) if adapter else None,
            "init_adapter": str(self.init_adapter) if self.init_adapter else None,
            "steps": cfg.steps,
            "steps_run": len(history),
            "start_step": self.start_step,
            "reward": cfg.reward.kind,
            "judge_check": self.judge_check,
            **history_summary(history),
            "wall_s": round(time.perf_counter() - t0, 1),
            "evals": evals,
            "sft": self.sft_summary,
            "monitor": self.monitor.summary() if self.monitor is not None else None,
        }
        if self.sync is not None:
            self.sync.close()
        self.store.close()
        return summary
