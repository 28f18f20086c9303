"""Data-parallel GRPO updates across the processes of ``accelerate launch`` (or ``torchrun``).

``rankgym train`` started by a launcher that sets ``WORLD_SIZE`` > 1 runs one process per
device. Rank 0 does everything a single process does (rollout, judge, store, checkpoints, the
vLLM adapter sync, evaluation); the step's groups are then broadcast to every rank, each rank
computes the same rewards and advantages, runs the GRPO update on its share of the trajectories
(``samples[rank::world]`` with the *global* loss normalisers) and the LoRA gradients are summed
across ranks before clipping and the optimizer step, so every rank holds the same adapter.
Ranks other than 0 write only to ``<out>/ranks/rank<k>`` (their own store and checkpoints, which
a resume of that rank reads).

Backend: NCCL when the policy device is CUDA (each rank takes ``cuda:<LOCAL_RANK>``), gloo on
CPU. ``samples/accelerate-ddp.yaml`` (GPUs) and ``samples/accelerate-cpu-2proc.yaml`` (two CPU
processes, what the test runs) are launcher configs.

What it does not do: no sharded rollouts (rank 0 samples everything; put the rollouts on a vLLM
server to scale them), no FSDP/DeepSpeed (LoRA on a model that fits one device), no gradient
bucketing (one all-reduce per LoRA tensor per step: fine for adapters, slow for full weights).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rankgym.trainer.config import TrainConfig

__all__ = ["Dist", "from_env"]


@dataclass(frozen=True)
class Dist:
    """This process's place in the run: rank 0 of 1 when not launched distributed."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    def device(self, device: str) -> str:
        """``cuda`` becomes this rank's GPU (``cuda:<LOCAL_RANK>``); other devices stay."""
        return f"cuda:{self.local_rank}" if self.enabled and device == "cuda" else device

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (pickled; for a step's groups, not for tensors)."""
        if not self.enabled:
            return obj
        import torch.distributed as td

        box = [obj]
        td.broadcast_object_list(box, src=0)
        return box[0]

    def sum_grads(self, params: list[Any]) -> None:
        """Sum each parameter's gradient over the ranks (a missing gradient counts as zero)."""
        if not self.enabled:
            return
        import torch
        import torch.distributed as td

        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            td.all_reduce(p.grad)

    def close(self) -> None:
        """Leave the process group. Call before the process exits: a gloo group still alive at
        interpreter teardown can abort the process (SIGABRT) after a run that succeeded."""
        if not self.enabled:
            return
        import torch.distributed as td

        if td.is_initialized():
            td.destroy_process_group()


def from_env(device: str = "cpu") -> Dist:
    """Join the process group the launcher describes (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``,
    ``MASTER_ADDR``/``MASTER_PORT``); a plain single-process run gets ``Dist()``."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Dist()
    import torch
    import torch.distributed as td

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not td.is_initialized():
        cuda = device.startswith("cuda")
        if cuda:
            torch.cuda.set_device(local)
        td.init_process_group("nccl" if cuda else "gloo")
    return Dist(rank=td.get_rank(), world=td.get_world_size(), local_rank=local)


def rank_config(cfg: TrainConfig, dist: Dist) -> TrainConfig:
    """``cfg`` for this rank: its own device, and for ranks > 0 their own output dir and store."""
    if not dist.enabled:
        return cfg
    policy = cfg.policy.model_copy(update={"device": dist.device(cfg.policy.device)})
    update: dict[str, Any] = {"policy": policy}
    if not dist.main:
        out = os.path.join(cfg.out_dir, "ranks", f"rank{dist.rank}")
        update.update(out_dir=out, store=os.path.join(out, "store.db"))
    return cfg.model_copy(update=update)
