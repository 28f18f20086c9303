"""The whole GRPO update in one file: rewards -> advantages -> clipped ratio loss -> optimizer step.

Formulas follow TRL 1.16 `GRPOTrainer` so runs compare side by side:

- advantages: ``r - mean(group)``, divided by ``std + 1e-4`` for ``scale_rewards="group"`` (std of
  the group) or ``"batch"`` (std of the whole step), not divided for ``"none"``; std is Bessel
  corrected (TRL's ``nanstd``). Unscored trajectories (``None``) are left out of the baseline and
  get advantage 0. Groups whose std is 0 (or that have fewer than two scored members) are counted
  as zero-variance: their advantages are 0, they carry no signal.
- ratio ``w = exp(logp - old_logp)`` per token, or per trajectory (mean log-ratio over its
  completion tokens) for ``importance_sampling_level="sequence"``; per-token loss
  ``-min(w*A, clip(w, 1-epsilon, 1+epsilon_high)*A) + beta*KL`` with TRL's k3 estimator
  ``KL = exp(ref-logp) - (ref-logp) - 1``; the reference is the base model, i.e. the same peft
  model with its adapter disabled (no second copy).
- aggregation over a step of N trajectories and M completion tokens:
  ``grpo`` = mean over trajectories of their token-mean; ``dr_grpo`` = token sum / (N *
  max_completion_length); ``dapo`` = token sum / M. TRL computes these per micro-batch and divides
  by the number of accumulation steps; with equal micro-batches (TRL's only case) that is the same
  number as the global normaliser used here, which also lets us skip zero-advantage trajectories
  (they add nothing to the loss) without changing the result when ``beta == 0``.

Multi-turn: a trajectory's Turns become token rows; a turn whose prompt extends the previous row
(prompt + completion so far) is appended to it, otherwise it starts a new row (re-tokenised chat
history rarely matches the sampled tokens exactly). Only completion tokens have loss; system, user,
tool and template tokens are context. Rows of one trajectory always share a micro-batch.

What this file does not do: generate, judge, checkpoint or log (see ``loop.py``); it does not use
the sampler's logprobs as ``old_logp`` (like TRL without vLLM, the ratio is 1 on the first
iteration; ``num_iterations > 1`` recomputes ``old_logp`` once before updating).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from rankgym.model import bound_heap, release_freed_memory
from rankgym.trainer.attention import training_attention
from rankgym.trainer.logprobs import CHUNK, masked_logprobs

ScaleRewards = Literal["group", "batch", "none"]
LossType = Literal["grpo", "dr_grpo", "dapo"]
ISLevel = Literal["token", "sequence"]
EPS = 1e-4


@dataclass(frozen=True)
class LossSettings:
    loss_type: LossType = "dapo"
    epsilon: float = 0.2
    epsilon_high: float | None = None
    importance_sampling_level: ISLevel = "token"
    beta: float = 0.0
    max_completion_length: int = 256
    """dr_grpo's constant normaliser (TRL's ``max_completion_length``)."""


@dataclass(frozen=True)
class UpdateSettings:
    loss: LossSettings = field(default_factory=LossSettings)
    micro_batch_size: int = 4
    num_iterations: int = 1
    max_grad_norm: float = 1.0
    bf16: bool = False
    """bf16 autocast for the forward/backward (weights and optimizer stay fp32)."""
    temperature: float = 1.0
    """The rollout's sampling temperature: logits are divided by it before the log-softmax, so
    the update differentiates the distribution the tokens were drawn from (as TRL does).
    Greedy sampling (0) counts as 1."""


@dataclass
class Advantages:
    values: list[list[float]]
    zero_variance_groups: int
    unscored: int


def group_advantages(
    rewards: Sequence[Sequence[float | None]], scale: ScaleRewards = "group", eps: float = EPS
) -> Advantages:
    """Per-group advantages as TRL computes them; ``None`` rewards get 0 and stay out of stats."""

    def std(xs: list[float]) -> float:
        if len(xs) < 2:
            return float("nan")
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))

    everything = [r for g in rewards for r in g if r is not None]
    batch_std = std(everything)
    values, zero_var, unscored = [], 0, 0
    for g in rewards:
        scored = [r for r in g if r is not None]
        unscored += len(g) - len(scored)
        g_std = std(scored)
        if math.isnan(g_std) or math.isclose(g_std, 0.0, abs_tol=1e-8):
            zero_var += 1
            values.append([0.0] * len(g))
            continue
        mean = sum(scored) / len(scored)
        div = {"group": g_std + eps, "batch": batch_std + eps, "none": 1.0}[scale]
        values.append([0.0 if r is None else (r - mean) / div for r in g])
    return Advantages(values, zero_var, unscored)


@dataclass
class Sample:
    """One trajectory ready for the loss: token rows with completion masks, and its advantage."""

    rows: list[tuple[list[int], list[int]]]
    advantage: float

    @property
    def completion_tokens(self) -> int:
        return sum(sum(m) for _, m in self.rows)

    @property
    def tokens(self) -> int:
        return sum(len(ids) for ids, _ in self.rows)


def trajectory_rows(turns: Sequence[Any]) -> list[tuple[list[int], list[int]]]:
    """Token rows ``(input_ids, loss_mask)`` of a trajectory's Turns; mask is 1 on completions."""
    rows: list[tuple[list[int], list[int]]] = []
    for t in turns:
        prompt, completion = list(t.prompt_token_ids), list(t.completion_token_ids)
        if not completion:
            continue
        if rows and prompt[: len(rows[-1][0])] == rows[-1][0]:
            ids, mask = rows[-1]
            extra = prompt[len(ids) :]
            ids.extend(extra + completion)
            mask.extend([0] * len(extra) + [1] * len(completion))
        else:
            rows.append((prompt + completion, [0] * len(prompt) + [1] * len(completion)))
    return rows


@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # (R, T) left padded
    attention_mask: torch.Tensor  # (R, T)
    position_ids: torch.Tensor  # (R, T)
    loss_mask: torch.Tensor  # (R, K): mask of the last K positions (K covers every completion)
    row_traj: torch.Tensor  # (R,) index of each row's trajectory in this micro-batch
    advantages: torch.Tensor  # (N,)


def collate(
    samples: Sequence[Sample], pad_id: int, device: str | torch.device = "cpu"
) -> MicroBatch:
    """Left-pad the rows of ``samples`` into one micro-batch."""
    rows = [(ids, m, i) for i, s in enumerate(samples) for ids, m in s.rows]
    T = max(len(ids) for ids, _, _ in rows)
    first = min(T - len(ids) + m.index(1) for ids, m, _ in rows)
    ids_t = torch.full((len(rows), T), pad_id, dtype=torch.long)
    att = torch.zeros((len(rows), T), dtype=torch.long)
    lmask = torch.zeros((len(rows), T), dtype=torch.float32)
    for r, (ids, m, _) in enumerate(rows):
        ids_t[r, T - len(ids) :] = torch.tensor(ids)
        att[r, T - len(ids) :] = 1
        lmask[r, T - len(ids) :] = torch.tensor(m, dtype=torch.float32)
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    return MicroBatch(
        ids_t.to(device),
        att.to(device),
        pos.to(device),
        lmask[:, first:].to(device),
        torch.tensor([i for _, _, i in rows], device=device),
        torch.tensor([s.advantage for s in samples], dtype=torch.float32, device=device),
    )


def token_logprobs(
    model: Any, mb: MicroBatch, temperature: float = 1.0, chunk: int = CHUNK
) -> torch.Tensor:
    """Log-probs (R, K) of the last K tokens of each row where ``mb.loss_mask`` is set, 0 at the
    other places (context tokens: no lm_head work, no gradient).

    The decoder runs once; lm_head + log-softmax run on ``chunk`` loss positions at a time and
    are recomputed in backward (``trainer/logprobs.py``), so no full-vocabulary logits are kept.
    ``temperature`` (> 0) divides the logits first: the log-probs of a sampler at that
    temperature."""
    return masked_logprobs(model, mb, temperature, chunk)


def per_traj_sum(x: torch.Tensor, row_traj: torch.Tensor, n: int) -> torch.Tensor:
    """Sum (R, K) values over each trajectory's rows and tokens -> (N,)."""
    return torch.zeros(n, dtype=x.dtype, device=x.device).index_add(0, row_traj, x.sum(-1))


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    mb: MicroBatch,
    s: LossSettings,
    n_traj_total: int,
    n_tokens_total: float,
    ref_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one micro-batch, normalised over the whole step (see module docstring)."""
    mask, rt = mb.loss_mask, mb.row_traj
    n = mb.advantages.shape[0]
    adv = mb.advantages[rt].unsqueeze(1)  # (R, 1)
    log_ratio = logp - old_logp
    if s.importance_sampling_level == "token":
        log_w = log_ratio
    else:
        counts = per_traj_sum(mask, rt, n).clamp(min=1.0)
        log_w = (per_traj_sum(log_ratio * mask, rt, n) / counts)[rt].unsqueeze(1)
    coef_1 = torch.exp(log_w)
    eps_high = s.epsilon if s.epsilon_high is None else s.epsilon_high
    coef_2 = torch.clamp(coef_1, 1 - s.epsilon, 1 + eps_high)
    per_token = -torch.min(coef_1 * adv, coef_2 * adv)
    kl = None
    if s.beta != 0.0:
        assert ref_logp is not None, "beta != 0 needs reference log-probs"
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1
        per_token = per_token + s.beta * kl
    per_token = per_token.expand_as(mask) * mask
    if s.loss_type == "grpo":
        counts = per_traj_sum(mask, rt, n).clamp(min=1.0)
        loss = (per_traj_sum(per_token, rt, n) / counts).sum() / n_traj_total
    elif s.loss_type == "dr_grpo":
        loss = per_token.sum() / (n_traj_total * s.max_completion_length)
    elif s.loss_type == "dapo":
        loss = per_token.sum() / max(n_tokens_total, 1.0)
    else:
        raise ValueError(f"unknown loss_type {s.loss_type!r}; use grpo, dr_grpo or dapo")
    with torch.no_grad():
        clipped = ((coef_1 < 1 - s.epsilon) & (adv < 0)) | ((coef_1 > 1 + eps_high) & (adv > 0))
        if s.importance_sampling_level == "sequence":  # one value per trajectory, as TRL logs it
            per_row = clipped.float().squeeze(1)
            seen = per_traj_sum(mask, rt, n) > 0
            clip_n = float((per_traj_sum(per_row[:, None], rt, n) > 0)[seen].sum())
            clip_d = float(seen.sum())
        else:
            clip_n, clip_d = float((clipped.float() * mask).sum()), float(mask.sum())
        stats = {
            "clip_count": clip_n,
            "clip_total": clip_d,
            "kl_sum": float((kl * mask).sum()) if kl is not None else 0.0,
            "tokens": float(mask.sum()),
        }
    return loss, stats


@dataclass
class UpdateStats:
    loss: float = 0.0
    grad_norm: float = 0.0
    clip_fraction: float = 0.0
    kl: float | None = None
    trained_trajectories: int = 0
    skipped_zero_advantage: int = 0
    tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    optimizer_steps: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


@contextlib.contextmanager
def lora_inputs_uncast(model: Any, autocast: bool) -> Any:
    """Under bf16 autocast, keep peft from copying each LoRA layer's input to the adapter's fp32
    (autocast casts it back to bf16 for the matmul: the same numbers, two copies fewer per layer
    in forward, recompute and backward). Without autocast, peft's casting stays (it is needed
    there). Spans forward and backward, so checkpointed layers recompute the same way."""
    if not autocast:
        yield
        return
    try:
        from peft.helpers import disable_input_dtype_casting
    except ImportError:  # not a peft model
        yield
        return
    with disable_input_dtype_casting(model):
        yield


def grpo_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[Sample],
    s: UpdateSettings,
    pad_id: int,
    scheduler: Any = None,
    shard: tuple[int, int] = (0, 1),
    sync_grads: Any = None,
) -> UpdateStats:
    """One GRPO step (``num_iterations`` optimizer steps) on a step's samples.

    Returns stats; makes no optimizer step when no sample has a non-zero advantage (and beta is 0).
    Data parallel (``distributed.py``): every rank passes *all* samples and ``shard=(rank,
    world)``; it trains on its share with the global normalisers, and ``sync_grads(params)``
    sums the gradients over ranks before clipping. Stats other than ``grad_norm`` are this rank's.
    """
    t0 = time.perf_counter()
    bound_heap()  # else glibc keeps GBs of freed activations resident (rankgym.model)
    device = next(p for p in model.parameters()).device
    n_traj, n_tok = len(samples), float(sum(x.completion_tokens for x in samples))
    keep = [x for x in samples if x.rows and (x.advantage != 0.0 or s.loss.beta != 0.0)]
    keep.sort(key=lambda x: (max(len(ids) for ids, _ in x.rows), len(x.rows)))  # less padding
    st = UpdateStats(trained_trajectories=len(keep), skipped_zero_advantage=n_traj - len(keep))
    if not keep:
        st.seconds = time.perf_counter() - t0
        return st
    mine = keep[shard[0] :: shard[1]]
    mbs = [
        collate(mine[i : i + s.micro_batch_size], pad_id, device)
        for i in range(0, len(mine), s.micro_batch_size)
    ]
    amp = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        if s.bf16
        else contextlib.nullcontext()
    )
    old: list[torch.Tensor | None] = [None] * len(mbs)
    ref: list[torch.Tensor | None] = [None] * len(mbs)
    with torch.no_grad(), amp:  # in eval mode: no dropout in the reference numbers
        if s.num_iterations > 1:
            old = [token_logprobs(model, mb, s.temperature) for mb in mbs]
        if s.loss.beta != 0.0:
            with model.disable_adapter():
                ref = [token_logprobs(model, mb, s.temperature) for mb in mbs]
    model.train()
    clip_n = clip_d = kl_sum = loss_sum = 0.0
    cpu_attn = training_attention(model) if device.type == "cpu" else contextlib.nullcontext()
    with lora_inputs_uncast(model, s.bf16), cpu_attn:  # both: same numbers, less work
        for _ in range(s.num_iterations):
            loss_sum = 0.0
            for i, mb in enumerate(mbs):
                with amp:
                    logp = token_logprobs(model, mb, s.temperature)
                prev = old[i]
                old_i = logp.detach() if prev is None else prev
                loss, ms = grpo_loss(logp, old_i, mb, s.loss, n_traj, n_tok, ref[i])
                loss.backward()
                loss_sum += float(loss.detach())
                clip_n += ms["clip_count"]
                clip_d += ms["clip_total"]
                kl_sum += ms["kl_sum"]
                st.tokens += int(mb.attention_mask.sum())
                st.completion_tokens += int(ms["tokens"])
            params = [p for p in model.parameters() if p.requires_grad]
            if sync_grads is not None:
                sync_grads(params)
            st.grad_norm = float(torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm))
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            st.optimizer_steps += 1
    model.eval()
    release_freed_memory()  # glibc keeps freed activations resident otherwise
    st.loss = loss_sum
    st.clip_fraction = clip_n / clip_d if clip_d else 0.0
    st.kl = kl_sum / st.completion_tokens if s.loss.beta != 0.0 and st.completion_tokens else None
    st.seconds = time.perf_counter() - t0
    return st
