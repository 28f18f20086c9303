"""Building what a training run needs from its config: env factory, judge spec, LoRA on a loaded
base model (``context.py`` loads it), optimizer and GRPO update settings. Every config mistake
becomes a ``UserError`` naming the key.

What it does not do: write anything (``loop.Trainer.setup`` calls these before it writes
run.json), or check the judge's credentials (``Trainer._preflight``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rankgym.envs.policies import derive_seed
from rankgym.envs.registry import UnknownEnvError, make
from rankgym.envs.rollout import EnvFactory, select_tasks
from rankgym.errors import UserError
from rankgym.judges.spec import spec_from_options
from rankgym.model import check_device, enable_checkpointing, peft_quiet
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.grpo import LossSettings, UpdateSettings
from rankgym.types import JudgeSpec

__all__ = [
    "adamw_with_warmup",
    "check_env",
    "judge_spec",
    "lora_model",
    "make_env_factory",
    "make_optimizer",
    "update_settings",
]


def make_env_factory(
    env_id: str, kwargs: dict[str, Any], max_turns: int | None = None
) -> EnvFactory:
    """A zero-argument factory making ``env_id`` with ``kwargs`` (what the rollout takes).

    Makes one env now, so a bad id or bad kwargs fail here with a ``UserError``.
    """
    kw = dict(kwargs)
    if max_turns is not None:
        kw["max_turns"] = max_turns
    try:
        make(env_id, **kw)
    except UnknownEnvError as e:  # unknown, or a Gymnasium env that is not a rankgym env
        raise UserError(f"env.id: {e}") from None
    except TypeError as e:
        try:
            make(env_id)
        except UnknownEnvError as e2:  # not ours: the kwargs were never the problem
            raise UserError(f"env.id: {e2}") from None
        except Exception:  # the plain env fails too; the kwargs error is what we can name
            pass
        raise UserError(f"env.kwargs: {env_id} does not take these arguments: {e}") from None
    except ValueError as e:
        raise UserError(f"env.kwargs: {e}") from None
    return EnvFactory(lambda: make(env_id, **kw), env_id)


def judge_spec(cfg: TrainConfig) -> JudgeSpec:
    """The judge spec of a training config (raises ``UserError`` naming the ``judge.*`` key)."""
    j = cfg.judge
    return spec_from_options(
        j.model,
        rubric_file=j.rubric,
        seed=cfg.seed,
        max_tokens=j.max_tokens or None,
        context_window=j.context_window or None,
        api_base=j.api_base,
        names={
            "judge": "judge.model",
            "rubric": "judge.rubric",
            "max_tokens": "judge.max_tokens",
            "context_window": "judge.context_window",
        },
    )


def check_inputs(cfg: TrainConfig, init_adapter: Path | None = None) -> None:
    """A ``UserError`` naming the key when ``policy.device`` cannot be used here, a line of the
    ``[sft]`` JSONL is bad (when the SFT stage runs), or ``init_adapter`` holds no adapter."""
    from rankgym.trainer.sft import check_demonstrations  # sft imports this module

    try:
        check_device(cfg.policy.device)
    except ValueError as e:
        raise UserError(f"policy.device: {e}") from None
    if cfg.sft is not None and init_adapter is None:
        check_demonstrations(cfg)  # a bad JSONL line fails before run.json
    if init_adapter is not None and not (init_adapter / "adapter_config.json").is_file():
        raise UserError(
            f"init adapter {str(init_adapter)!r} holds no adapter_config.json; pass the "
            "adapter dir `rankgym sft` wrote"
        )


def check_env(cfg: TrainConfig) -> tuple[EnvFactory, float, int]:
    """``(env factory, success threshold, max turns)``; a bad env id or kwargs, or a split with
    fewer tasks than ``env.tasks_per_step`` (or none for ``[eval]``), or an ``env.stratify``
    field no task has, is a ``UserError``."""
    factory = make_env_factory(cfg.env.id, cfg.env.kwargs, cfg.env.max_turns)
    probe = factory()
    for key, split, need in (
        ("env.tasks_per_step", cfg.env.split, cfg.env.tasks_per_step),
        ("eval.tasks", cfg.eval.split, 1 if (cfg.eval.at_end or cfg.eval.every) else 0),
    ):
        if not need:
            continue
        try:
            have = len(probe.tasks(split))
        except (ValueError, KeyError) as e:
            raise UserError(f"{key}: {cfg.env.id} has no split {split!r} ({e})") from None
        if need > have:
            raise UserError(
                f"{key} = {need} but {cfg.env.id} has only {have} tasks in split "
                f"{split!r}; lower it or change env.kwargs"
            )
    if cfg.env.stratify:
        try:
            select_tasks(probe.tasks(cfg.env.split), n_tasks=1, stratify=cfg.env.stratify)
        except ValueError as e:
            raise UserError(f"env.{e}; use a field the tasks of {cfg.env.id} have") from None
    return factory, float(probe.success_threshold), int(cfg.env.max_turns or probe.max_turns)


def lora_model(cfg: TrainConfig, base: Any, init_adapter: Path | None = None) -> Any:
    """The trainable peft model on ``base``: a fresh LoRA seeded from ``cfg.seed`` as ``[lora]``
    says, or the adapter at ``init_adapter`` (e.g. one ``rankgym sft`` wrote), in eval mode.
    Loading the base model is ``context.TrainingContext.from_config``'s."""
    from peft import LoraConfig, PeftModel, get_peft_model

    torch.manual_seed(derive_seed("lora-init", cfg.seed) % (2**63))
    with peft_quiet():
        if init_adapter is not None:
            model = PeftModel.from_pretrained(base, str(init_adapter), is_trainable=True)
        else:
            lora = LoraConfig(
                r=cfg.lora.r,
                lora_alpha=cfg.lora.alpha,
                lora_dropout=cfg.lora.dropout,
                target_modules=list(cfg.lora.target_modules),
                task_type="CAUSAL_LM",
            )
            try:
                model = get_peft_model(base, lora)
            except ValueError as e:
                raise UserError(f"lora.target_modules: {e}") from None
    if cfg.optim.gradient_checkpointing:
        enable_checkpointing(model)
    model.eval()
    return model


def adamw_with_warmup(
    model: Any,
    lr: float,
    warmup_steps: int,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.0,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the trainable (LoRA) parameters of ``model``, and a LambdaLR that ramps the
    rate linearly over the first ``warmup_steps`` steps (0: the full rate from the start). GRPO
    and the SFT warm start use it; judge training keeps a plain AdamW (no warmup)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: min(1.0, (i + 1) / warmup_steps) if warmup_steps else 1.0
    )
    return optimizer, scheduler


def make_optimizer(model: Any, cfg: TrainConfig) -> tuple[torch.optim.Optimizer, Any]:
    """GRPO's optimizer and schedule: :func:`adamw_with_warmup` with ``[optim]``'s settings."""
    o = cfg.optim
    return adamw_with_warmup(model, o.lr, o.warmup_steps, o.betas, o.weight_decay)


def update_settings(cfg: TrainConfig, max_turns: int, bf16: bool) -> UpdateSettings:
    """The GRPO update settings of a config (dr_grpo's normaliser defaults to the turn budget)."""
    return UpdateSettings(
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
        bf16=bf16,
        temperature=cfg.policy.temperature or 1.0,
    )
