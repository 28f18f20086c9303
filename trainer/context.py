"""The training context: the policy model, its folder, tokenizer, adapter, device and dtype, resolved once.

A :class:`TrainingContext` is what every stage of a run shares and used to rebuild for itself:
``rankgym train`` (rollout policy, evaluation policy, the ``[sft]`` stage, the vLLM adapter
sync), ``rankgym sft``, ``rankgym eval``, ``rankgym demo``'s three-way evaluation and the judge
stage's rollouts. Two ways to build one:

- :meth:`TrainingContext.from_config`: the trainable LoRA of a training config (a fresh seeded
  LoRA on ``[policy] model``, or the adapter the run starts from), sampling as ``[policy]`` says;
- :meth:`TrainingContext.from_adapter`: a saved adapter over its base model, frozen, for
  sampling only (evaluation, the demo, judge data).

``"embedded"`` is resolved to the converted model's folder here (with
``rankgym.model.policy_model_dir``, which ``load_policy_model`` uses too), and the weights dtype
and bf16 autocast are decided here, once per context.

Example (a tiny run's context, then the policy the first rollout uses)::

    ctx = TrainingContext.from_config(cfg)
    policy = ctx.policy(f"{ctx.model_name}@step0")

What it does not do: hold run state (optimizer, store, step: ``loop.Trainer``), load a model
twice (each constructor loads one), or pick threads (``rankgym.threads.set_torch_threads``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Unpack

from rankgym.envs.policies import TransformersPolicy
from rankgym.envs.policies.local import Sampling
from rankgym.errors import UserError
from rankgym.model import (
    adapter_on_base,
    auto_dtype,
    check_device,
    embedded_model_dir,
    policy_model_dir,
    training_base,
    use_bf16,
)
from rankgym.trainer.config import TrainConfig

__all__ = ["TrainingContext"]

log = logging.getLogger(__name__)


@dataclass
class TrainingContext:
    """The model a run trains or evaluates, with everything resolved around it (module doc)."""

    model: Any
    """A peft model: the trainable LoRA (``from_config``) or a loaded adapter (``from_adapter``)."""
    tokenizer: Any
    model_name: str
    """Short name of the base model (``embedded`` or its folder's name); policy names build on it."""
    model_dir: Path
    """The base model's folder (``embedded`` resolved), e.g. what a vLLM server loads."""
    device: str
    dtype: str
    """The base weights' dtype name (``auto`` resolved)."""
    bf16: bool
    """bf16 autocast for sampling and the update."""
    adapter: Path | None = None
    """The adapter the weights started from (``--init-adapter``) or that was loaded."""
    sampling: Sampling = field(default_factory=lambda: Sampling())
    """The rollout's sampling settings, what :meth:`policy` uses unless told otherwise."""
    adapter_name: str | None = None
    """The name :attr:`adapter` was loaded under into a shared base model, which the policies
    switch to (``rankgym.model.adapter_on_base``); None: the model's active adapter."""

    @classmethod
    def from_config(cls, cfg: TrainConfig, init_adapter: Path | None = None) -> TrainingContext:
        """The trainable LoRA of ``cfg`` (``setup.lora_model``) on ``[policy] model``, sampling as
        ``[policy]`` says. A missing model folder or bad LoRA targets are a ``UserError``."""
        from rankgym.trainer.setup import lora_model

        p = cfg.policy
        model_dir, name = policy_model_dir(p.model)
        dtype = auto_dtype(p.device) if p.dtype == "auto" else p.dtype
        try:
            base, tokenizer = training_base(p.model, dtype, p.device)  # the judge's, if it can
        except FileNotFoundError as e:
            raise UserError(f"policy.model: {e}") from None
        return cls(
            model=lora_model(cfg, base, init_adapter),
            tokenizer=tokenizer,
            model_name=name,
            model_dir=model_dir,
            device=p.device,
            dtype=dtype,
            bf16=use_bf16(cfg.optim.bf16, p.device),
            adapter=init_adapter,
            sampling=Sampling(
                max_new_tokens=p.max_new_tokens,
                temperature=p.temperature,
                top_p=p.top_p,
                seed=cfg.seed,
            ),
        )

    @classmethod
    def from_adapter(
        cls,
        adapter: Path,
        base: str | None = None,
        device: str = "cpu",
        **sampling: Unpack[Sampling],
    ) -> TrainingContext:
        """The peft adapter in ``adapter`` over its base model (``base``, else the adapter's
        ``base_model_name_or_path`` when that folder exists, else the embedded model), frozen,
        in eval mode. A bad device, adapter or base folder is a ``UserError`` naming the flag."""

        try:
            check_device(device)
        except ValueError as e:
            raise UserError(f"--device: {e}") from None
        if not (adapter / "adapter_config.json").is_file():
            raise UserError(
                f"--adapter {str(adapter)!r} holds no adapter_config.json; pass a checkpoint dir "
                "(OUT/checkpoints/step-N) or OUT/adapter from `rankgym train`"
            )
        if base is None:
            recorded = json.loads((adapter / "adapter_config.json").read_text())
            base = recorded.get("base_model_name_or_path")
            if not base or not Path(base).is_dir():
                log.warning("adapter base %r not found locally; using the embedded model", base)
                base = str(embedded_model_dir())
        if not Path(base).is_dir():
            raise UserError(f"--base {base!r} is not a model directory")
        dtype = auto_dtype(device)
        model, tok, named = adapter_on_base(base, adapter, dtype, device)  # shared where it can
        return cls(
            model=model,
            tokenizer=tok,
            model_name=Path(base).name,
            model_dir=Path(base),
            device=device,
            dtype=dtype,
            bf16=use_bf16("auto", device),
            adapter=adapter,
            sampling=sampling,
            adapter_name=named,
        )

    def policy(
        self, name: str, *, adapter: str | None = None, **overrides: Unpack[Sampling]
    ) -> TransformersPolicy:
        """A sampling policy named ``name`` over this context's model: :attr:`sampling`, then
        ``overrides``; bf16 autocast as decided. ``adapter``: a named adapter loaded into the
        model to sample with (``rankgym.model.load_named_adapter``)."""
        sampling: Sampling = {**self.sampling, **overrides}
        return TransformersPolicy(
            self.model,
            self.tokenizer,
            name=name,
            autocast=self.bf16,
            adapter=adapter or self.adapter_name,
            **sampling,
        )

    def eval_policy(self, name: str, temperature: float) -> TransformersPolicy:
        """The held-out evaluation's policy: the rollout's token budget and seed at
        ``temperature``, nucleus sampling off (``top_p`` 1), whatever the rollout uses."""
        s, kept = self.sampling, Sampling(temperature=temperature)
        if "max_new_tokens" in s:
            kept["max_new_tokens"] = s["max_new_tokens"]
        if "seed" in s:
            kept["seed"] = s["seed"]
        return TransformersPolicy(self.model, self.tokenizer, name=name, autocast=self.bf16,
                                  adapter=self.adapter_name, **kept)  # fmt: skip
