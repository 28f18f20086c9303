"""The training loop: rollout -> judge -> store -> GRPO update -> checkpoint -> next rollout.

One step ``k`` (0-based):

1. **rollout**: ``tasks_per_step`` tasks x ``group_size`` episodes with the policy at adapter
   step ``k`` (its name is ``<model>@step<k>``; every Turn records it and the loop checks that
   all of them do, so a stale adapter cannot train silently). Sampling is seeded per episode
   from ``(seed, step, task, index)``, so a step regenerates identically.
2. **judge** (if the reward uses it): one LiteLLM call per group, cached and stored.
3. **store**: groups, trajectories and judgements go to the SQLite store; a step manifest
   (``<out>/steps/step-00000k.json``, written atomically) records the step's group ids in order.
   A resumed run reuses a step whose manifest exists instead of rolling it out again.
4. **update**: rewards -> group advantages -> one GRPO update (``grpo.py``).
5. **checkpoint**: adapter + optimizer + scheduler + RNG state, atomically; then
   ``store.log_step`` with the step's metrics.

``--resume`` loads the newest complete checkpoint and continues at its step; with the same seed
it reaches the same adapter as a run that was never interrupted (tested with SIGKILL mid-step).

What it does not do: no vLLM or multi-GPU (single process, the policy is the trained peft model
itself, so "loading the new adapter" is the same object), no evaluation-based early stopping,
and no judge retries beyond what ``judges.group_judge`` does (an unjudged group gets no signal).
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from rankgym.cli import UserError
from rankgym.trainer import checkpoint as ckpt
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.grpo import (
    LossSettings,
    Sample,
    UpdateSettings,
    group_advantages,
    grpo_update,
    trajectory_rows,
)
from rankgym.types import Group

log = logging.getLogger(__name__)

# Config keys that may change between a run and its resumption.
RESUMABLE_CHANGES = {"steps", "out_dir", "store", "keep_checkpoints", "eval"}


def cpu_bf16_native() -> bool:
    """Whether this CPU runs bf16 matmuls natively (AVX512-BF16 or AMX)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def use_bf16(setting: str, device: str) -> bool:
    if setting != "auto":
        return setting == "on"
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return cpu_bf16_native()


def enable_checkpointing(model: Any) -> None:
    """Recompute activations in the backward pass (non-reentrant; transformers 5 name first)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def blend_reward(
    judge: float | None, verifiable: float | None, kind: str, weight: float
) -> float | None:
    """Training reward of one trajectory; None (no signal) when a needed part is missing."""
    if kind == "judge":
        return judge
    if kind == "verifiable":
        return verifiable
    if judge is None or verifiable is None:
        return None
    return (1.0 - weight) * judge + weight * verifiable


def _mean_std(xs: list[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.pstdev(xs) if len(xs) > 1 else 0.0)


def _write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_policy_model(cfg: TrainConfig) -> tuple[Any, Any, str]:
    """The base model + tokenizer for ``policy.model`` and a short name for it."""
    from rankgym.model import load_causal_lm, load_embedded

    dtype = cfg.policy.dtype
    if dtype == "auto":
        dtype = "bfloat16" if use_bf16("auto", cfg.policy.device) else "float32"
    if cfg.policy.model == "embedded":
        model, tok = load_embedded(dtype, device=cfg.policy.device)
        return model, tok, "embedded"
    try:
        model, tok = load_causal_lm(cfg.policy.model, dtype, device=cfg.policy.device)
    except FileNotFoundError as e:
        raise UserError(f"policy.model: {e}") from None
    return model, tok, Path(cfg.policy.model).name


def env_factory(env_id: str, kwargs: dict[str, Any], max_turns: int | None = None) -> Any:
    """A zero-argument factory making ``env_id`` with ``kwargs`` (what the rollout takes)."""
    from rankgym.envs.registry import UnknownEnvError, make
    from rankgym.envs.rollout import EnvFactory

    kw = dict(kwargs)
    if max_turns is not None:
        kw["max_turns"] = max_turns
    try:
        make(env_id, **kw)
    except UnknownEnvError as e:
        raise UserError(f"env.id: {e}") from None
    except TypeError as e:
        raise UserError(f"env.kwargs: {env_id} does not take these arguments: {e}") from None
    except ValueError as e:
        raise UserError(f"env.kwargs: {e}") from None
    return EnvFactory(lambda: make(env_id, **kw), env_id)


class Trainer:
    """Runs a :class:`TrainConfig` end to end (see the module docstring).

    ``out_dir``/``store_path`` override the config's. ``progress`` shows tqdm bars on stderr.
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
    ) -> None:
        if out_dir:
            cfg = cfg.model_copy(update={"out_dir": out_dir})
        if store_path:
            cfg = cfg.model_copy(update={"store": store_path})
        self.cfg = cfg
        self.out = Path(cfg.out_dir)
        self.resume = resume
        self.progress = progress
        self.echo = echo or (lambda msg: log.info("%s", msg))
        if cfg.loss.importance_sampling_level == "sequence" and cfg.loss.type != "grpo":
            log.warning(
                "importance_sampling_level='sequence' with loss.type=%r weights each sequence "
                "by its length (TRL warns the same); loss.type='grpo' is the GSPO setup",
                cfg.loss.type,
            )

    # ---- setup --------------------------------------------------------------------------

    def _run_identity(self) -> str:
        run_file = self.out / "run.json"
        cfg_dump = self.cfg.model_dump(mode="json")
        if self.resume:
            if not run_file.is_file():
                raise UserError(
                    f"--resume: {str(self.out)!r} holds no run (no run.json); start without "
                    "--resume, or pass the --out of the run to continue"
                )
            saved = json.loads(run_file.read_text())
            old = saved["config"]
            diff = sorted(
                k for k in set(old) | set(cfg_dump)
                if k not in RESUMABLE_CHANGES and old.get(k) != cfg_dump.get(k)
            )  # fmt: skip
            if diff:
                raise UserError(
                    f"--resume: the config differs from the run in {str(self.out)!r} in "
                    f"{', '.join(diff)}; resume with the same config (only {', '.join(sorted(RESUMABLE_CHANGES))} "
                    "may change), or start a new run with another --out"
                )
            return saved["run_id"]
        if ckpt.latest_checkpoint(self.out) is not None or run_file.exists():
            raise UserError(
                f"{str(self.out)!r} already holds a training run; pass --resume to continue it "
                "or choose another --out"
            )
        run_id = (
            self.cfg.name or f"train-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid() % 10000:04d}"
        )
        _write_json_atomic(run_file, {"run_id": run_id, "config": cfg_dump})
        return run_id

    def _preflight(self) -> None:
        """Fail before anything is written when the device or the judge's credentials are missing."""
        from rankgym.judges.group_judge import check_credentials
        from rankgym.model import check_device

        try:
            check_device(self.cfg.policy.device)
        except ValueError as e:
            raise UserError(f"policy.device: {e}") from None
        if self.cfg.reward.kind != "verifiable":
            try:
                check_credentials(self._judge_spec())
            except ValueError as e:
                raise UserError(f"judge.model: {e}") from None

    def setup(self) -> None:
        from peft import LoraConfig, get_peft_model

        from rankgym.envs.policies import TransformersPolicy, derive_seed
        from rankgym.store import Store

        cfg = self.cfg
        self._preflight()
        self.out.mkdir(parents=True, exist_ok=True)
        self.run_id = self._run_identity()
        self.store = Store(cfg.store_path)
        self.store.create_run(
            name=self.run_id, kind="train", config=cfg.model_dump(mode="json"), run_id=self.run_id
        )
        self.env = env_factory(cfg.env.id, cfg.env.kwargs, cfg.env.max_turns)
        probe = self.env()
        self.success_threshold = float(getattr(probe, "success_threshold", 1.0))
        if cfg.env.tasks_per_step > len(probe.tasks(cfg.env.split)):
            raise UserError(
                f"env.tasks_per_step = {cfg.env.tasks_per_step} but {cfg.env.id} has only "
                f"{len(probe.tasks(cfg.env.split))} tasks in split {cfg.env.split!r}"
            )
        max_turns = int(cfg.env.max_turns or getattr(probe, "max_turns", 1))

        base, self.tokenizer, self.model_name = load_policy_model(cfg)
        torch.manual_seed(derive_seed("lora-init", cfg.seed) % (2**63))
        lora = LoraConfig(
            r=cfg.lora.r,
            lora_alpha=cfg.lora.alpha,
            lora_dropout=cfg.lora.dropout,
            target_modules=list(cfg.lora.target_modules),
            task_type="CAUSAL_LM",
        )
        try:
            with warnings.catch_warnings():  # peft reads transformers' deprecated attribute name
                warnings.filterwarnings("ignore", "`is_gradient_checkpointing`", FutureWarning)
                self.model = get_peft_model(base, lora)
        except ValueError as e:
            raise UserError(f"lora.target_modules: {e}") from None
        if cfg.optim.gradient_checkpointing:
            enable_checkpointing(self.model)
        self.model.eval()
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=cfg.optim.lr, betas=cfg.optim.betas, weight_decay=cfg.optim.weight_decay
        )
        warm = cfg.optim.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda i: min(1.0, (i + 1) / warm) if warm else 1.0
        )
        self.bf16 = use_bf16(cfg.optim.bf16, cfg.policy.device)
        self.update_settings = UpdateSettings(
            loss=LossSettings(
                loss_type=cfg.loss.type,
                epsilon=cfg.loss.epsilon,
                epsilon_high=cfg.loss.epsilon_high,
                importance_sampling_level=cfg.loss.importance_sampling_level,
                beta=cfg.loss.beta,
                max_completion_length=cfg.loss.max_completion_length
                or cfg.policy.max_new_tokens * max_turns,
            ),
            micro_batch_size=cfg.optim.micro_batch_size,
            num_iterations=cfg.optim.num_iterations,
            max_grad_norm=cfg.optim.max_grad_norm,
            bf16=self.bf16,
        )
        self.start_step = 0
        if self.resume:
            self._load_latest()
        self.policy = TransformersPolicy(
            self.model,
            self.tokenizer,
            name=self.policy_name(self.start_step),
            max_new_tokens=cfg.policy.max_new_tokens,
            temperature=cfg.policy.temperature,
            top_p=cfg.policy.top_p,
            seed=cfg.seed,
            autocast=self.bf16,
        )
        self.spec = None
        if cfg.reward.kind != "verifiable":
            self.spec = self._judge_spec()

    def _judge_spec(self) -> Any:
        from rankgym.judges.group_judge import default_spec

        j = self.cfg.judge
        rubric = None
        if j.rubric:
            p = Path(j.rubric)
            if not p.is_file():
                raise UserError(f"judge.rubric: file {j.rubric!r} does not exist")
            rubric = p.read_text(encoding="utf-8")
        params: dict[str, Any] = {"seed": self.cfg.seed}
        if j.context_window:
            params["context_window"] = j.context_window
        if j.max_tokens:
            params["max_tokens"] = j.max_tokens
        if j.api_base:
            params["extra"] = {"api_base": j.api_base}
        return default_spec(j.model, rubric, **params)

    def policy_name(self, step: int) -> str:
        return f"{self.model_name}@step{step}"

    def _load_latest(self) -> None:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        path = ckpt.latest_checkpoint(self.out)
        if path is None:
            self.echo(f"resume: no checkpoint in {self.out} yet; starting at step 0")
            return
        weights = load_file(str(path / "adapter_model.safetensors"))
        result = set_peft_model_state_dict(self.model, weights)
        if getattr(result, "unexpected_keys", None):
            raise RuntimeError(
                f"checkpoint {path} has unexpected keys {result.unexpected_keys[:3]}"
            )
        state = ckpt.load_trainer_state(path)
        self.optimizer.load_state_dict(state["optimizer"])
        if state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        ckpt.set_rng_state(state["rng"])
        self.start_step = int(state["step"])
        meta = ckpt.read_meta(path)
        logged = {r["step"] for r in self.store.steps(self.run_id)}
        if self.start_step - 1 not in logged and meta.get("metrics"):
            self.store.log_step(self.run_id, self.start_step - 1, meta["metrics"])
        self.echo(f"resume: loaded {path.name}; continuing at step {self.start_step}")

    # ---- one step -------------------------------------------------------------------------

    def _manifest(self, step: int) -> Path:
        return self.out / "steps" / f"step-{step:06d}.json"

    def _rollout_and_judge(self, step: int) -> tuple[list[Group], dict[str, Any]]:
        from rankgym.envs.rollout import rollout_groups

        cfg = self.cfg
        timing: dict[str, Any] = {"reused_rollout": False}
        man = self._manifest(step)
        if man.is_file():
            saved = json.loads(man.read_text())
            spec_hash = saved.get("spec_hash")
            groups = [self.store.get_group(gid, spec_hash) for gid in saved["group_ids"]]
            timing.update(saved.get("timing", {}), reused_rollout=True)
            return groups, timing
        t0 = time.perf_counter()
        expected = self.policy_name(step)
        self.policy.name = expected
        groups = rollout_groups(
            self.env,
            self.policy,
            n_tasks=cfg.env.tasks_per_step,
            group_size=cfg.env.group_size,
            split=cfg.env.split,
            seed=cfg.seed,
            run_id=self.run_id,
            step=step,
            progress=self.progress,
        )
        stale = {
            tu.policy
            for g in groups
            for t in g.trajectories
            for tu in t.turns
            if tu.policy != expected
        }
        if stale:
            raise RuntimeError(
                f"step {step}: rollouts came from {sorted(map(str, stale))}, expected {expected!r}; "
                "the policy is not serving the current adapter"
            )
        timing["rollout_s"] = time.perf_counter() - t0
        timing["rollout_completion_tokens"] = sum(
            len(tu.completion_token_ids) for g in groups for t in g.trajectories for tu in t.turns
        )
        self.store.put_groups(groups)
        t1 = time.perf_counter()
        judge_summary: dict[str, Any] = {}
        if self.spec is not None:
            from rankgym.judges.group_judge import judge_groups_sync, summarize

            js = judge_groups_sync(
                groups,
                self.spec,
                self.store,
                permutations=cfg.judge.permutations,
                concurrency=cfg.judge.concurrency,
            )
            judge_summary = summarize(js, self.spec.spec_hash)
        timing["judge_s"] = time.perf_counter() - t1
        timing["judge"] = judge_summary
        _write_json_atomic(
            man,
            {
                "step": step,
                "group_ids": [g.id for g in groups],
                "spec_hash": self.spec.spec_hash if self.spec else None,
                "timing": timing,
            },
        )
        return groups, timing

    def step(self, step: int) -> dict[str, Any]:
        """Run training step ``step`` (0-based); returns its metrics (also logged)."""
        from rankgym.envs.policies import derive_seed

        cfg = self.cfg
        t_step = time.perf_counter()
        groups, timing = self._rollout_and_judge(step)
        rewards: list[list[float | None]] = []
        judge_scores, verif, train_r = [], [], []
        unjudged = 0
        for g in groups:
            ok = g.judgement is not None and g.judgement.status == "ok"
            unjudged += int(self.spec is not None and not ok)
            smap = g.judgement.score_map() if ok else {}
            row = []
            for t in g.trajectories:
                js, vr = smap.get(t.id), t.verifiable_reward
                r = blend_reward(js, vr, cfg.reward.kind, cfg.reward.verifiable_weight)
                row.append(r)
                if js is not None:
                    judge_scores.append(js)
                if vr is not None:
                    verif.append(vr)
                if r is not None:
                    train_r.append(r)
            rewards.append(row)
        adv = group_advantages(rewards, cfg.reward.scale_rewards)
        samples = [
            Sample(trajectory_rows(t.turns), a)
            for g, advs in zip(groups, adv.values, strict=True)
            for t, a in zip(g.trajectories, advs, strict=True)
        ]
        torch.manual_seed(derive_seed("update", cfg.seed, step) % (2**63))
        st = grpo_update(
            self.model,
            self.optimizer,
            samples,
            self.update_settings,
            pad_id=self.tokenizer.pad_token_id,
            scheduler=self.scheduler,
        )
        no_signal = st.trained_trajectories == 0
        n_traj = sum(len(g.trajectories) for g in groups)
        rm, rs = _mean_std(train_r)
        jm, jsd = _mean_std(judge_scores)
        vm, vsd = _mean_std(verif)
        judge = timing.get("judge") or {}
        metrics: dict[str, Any] = {
            "policy": self.policy_name(step),
            "reward_kind": cfg.reward.kind,
            "reward_mean": rm,
            "reward_std": rs,
            "judge_score_mean": jm,
            "judge_score_std": jsd,
            "verifiable_mean": vm,
            "verifiable_std": vsd,
            "success_rate": (
                sum(v >= self.success_threshold for v in verif) / n_traj if n_traj else None
            ),
            "groups": len(groups),
            "trajectories": n_traj,
            "zero_variance_groups": adv.zero_variance_groups,
            "unscored_trajectories": adv.unscored,
            "unjudged_groups": unjudged,
            "no_signal": no_signal,
            "trained_trajectories": st.trained_trajectories,
            "loss": st.loss,
            "grad_norm": st.grad_norm,
            "clip_fraction": st.clip_fraction,
            "kl": st.kl,
            "lr": self.scheduler.get_last_lr()[0],
            "update_tokens": st.tokens,
            "update_tokens_per_s": st.tokens_per_s,
            "rollout_completion_tokens": timing.get("rollout_completion_tokens"),
            "rollout_tokens_per_s": (
                timing["rollout_completion_tokens"] / timing["rollout_s"]
                if timing.get("rollout_s")
                else None
            ),
            "judge_input_tokens": judge.get("input_tokens"),
            "judge_output_tokens": judge.get("output_tokens"),
            "judge_cost_usd": judge.get("cost_usd"),
            "judge_latency_s_mean": judge.get("latency_s_mean"),
            "judge_calls": judge.get("calls"),
            "time_rollout_s": timing.get("rollout_s"),
            "time_judge_s": timing.get("judge_s"),
            "time_update_s": st.seconds,
            "reused_rollout": timing.get("reused_rollout", False),
            "bf16": self.bf16,
        }
        if no_signal:
            self.echo(
                f"step {step}: no signal ({adv.zero_variance_groups}/{len(groups)} groups had "
                "equal rewards); no optimizer step"
            )
        t_ck = time.perf_counter()
        self.policy.name = self.policy_name(step + 1)
        metrics["time_step_s"] = time.perf_counter() - t_step
        path = ckpt.save_checkpoint(
            self.out,
            step + 1,
            self.model,
            self.optimizer,
            self.scheduler,
            meta={
                "run_id": self.run_id,
                "metrics": metrics,
                "env": {"id": self.cfg.env.id, "kwargs": self.cfg.env.kwargs},
                "policy_model": self.cfg.policy.model,
                "max_new_tokens": self.cfg.policy.max_new_tokens,
            },
            keep=cfg.keep_checkpoints,
        )
        metrics["time_checkpoint_s"] = time.perf_counter() - t_ck
        metrics["checkpoint"] = str(path)
        self.store.log_step(self.run_id, step, metrics)
        return metrics

    # ---- evaluation -----------------------------------------------------------------------

    def evaluate(self, tag: str) -> dict[str, Any]:
        """Held-out success of base (adapter off) vs the current adapter, paired."""
        from rankgym.envs.policies import TransformersPolicy
        from rankgym.trainer.evaluate import AdapterOffPolicy, evaluate_policies

        e = self.cfg.eval
        cur = TransformersPolicy(
            self.model,
            self.tokenizer,
            name=self.policy.name,
            max_new_tokens=self.cfg.policy.max_new_tokens,
            temperature=e.temperature,
            seed=self.cfg.seed,
            autocast=self.bf16,
        )
        policies = {"base": AdapterOffPolicy(cur, f"{self.model_name}@base"), "trained": cur}
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

    def run(self) -> dict[str, Any]:
        self.setup()
        cfg = self.cfg
        t0 = time.perf_counter()
        history: list[dict[str, Any]] = []
        evals: list[dict[str, Any]] = []
        if self.start_step >= cfg.steps:
            self.echo(f"run {self.run_id} already has {self.start_step} steps; nothing to do")
        for k in range(self.start_step, cfg.steps):
            m = self.step(k)
            history.append(m)
            self.echo(
                f"step {k + 1}/{cfg.steps}  reward {_fmt(m['reward_mean'])}"
                f"  verifiable {_fmt(m['verifiable_mean'])}  success {_fmt(m['success_rate'])}"
                f"  zero-var {m['zero_variance_groups']}/{m['groups']}"
                f"  {m['time_step_s']:.0f}s (rollout {m['time_rollout_s'] or 0:.0f}s,"
                f" judge {m['time_judge_s'] or 0:.0f}s, update {m['time_update_s']:.0f}s)"
            )
            if cfg.eval.every and (k + 1) % cfg.eval.every == 0 and k + 1 < cfg.steps:
                ev = self.evaluate(f"step{k + 1}")
                ev["step"] = k + 1
                evals.append(ev)
                self.store.log_step(self.run_id, k, {**m, "eval": ev})
        final = ckpt.latest_checkpoint(self.out)
        adapter = ckpt.copy_adapter(final, self.out / "adapter") if final else None
        if cfg.eval.at_end or cfg.eval.every:
            ev = self.evaluate(f"step{cfg.steps}")
            ev["step"] = cfg.steps
            evals.append(ev)
        rewards = [r for r in (m.get("reward_mean") for m in history) if r is not None]
        summary = {
            "run_id": self.run_id,
            "store": str(self.cfg.store_path),
            "out_dir": str(self.out),
            "adapter": str(adapter) if adapter else None,
            "steps": cfg.steps,
            "steps_run": len(history),
            "start_step": self.start_step,
            "reward": cfg.reward.kind,
            "reward_first": rewards[0] if rewards else None,
            "reward_last": rewards[-1] if rewards else None,
            "no_signal_steps": sum(bool(m["no_signal"]) for m in history),
            "reward_per_step": [
                {
                    k: m.get(k)
                    for k in ("reward_mean", "judge_score_mean", "verifiable_mean", "success_rate")
                }
                for m in history
            ],
            "wall_s": round(time.perf_counter() - t0, 1),
            "evals": evals,
        }
        self.store.close()
        return summary


def _fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"
