"""Train a pairwise judge LoRA from labelled pairs: rejection sampling, SFT + margin loss.

The recipe (CompassJudger-2, cut to what a 135M model on a CPU can use):

1. Each training pair is presented in both orders with the critical-thinking prompt of
   ``rankgym.judges.pair_judge``; the decision is the token after ``Verdict:`` (`` A``/`` B``).
2. **Rejection sampling** (:func:`rejection_sample`): K verdicts are sampled from the current
   model's distribution over the two choices at temperature ``temperature``; the correct ones
   are kept. When at least one is correct, one ``Why: ...`` rationale is sampled after the
   correct verdict (``reason_tokens`` tokens) and the whole answer becomes an SFT target.
   Presentations with no correct sample get no SFT target (they still get the margin loss):
   the model is only imitated where it was right.
3. **Loss** (:func:`judge_losses`): ``lambda_sft * CE(answer tokens of kept samples)`` +
   ``lambda_margin * mean(max(0, gamma - logp(correct) + logp(wrong)))``, where both
   log-probabilities are full-vocabulary log-softmax values at the decision position; on tie
   presentations (``Example.tie``: two equally good trajectories) instead
   ``lambda_tie * BCE(sigmoid(logp(A) - logp(B)), 0.5)`` (minus its floor log 2), which pulls
   the judge's P(first better) toward 0.5 (:func:`pair_losses`); with ``tie_loss="served"``
   the BCE is of the pair's order-averaged P, the score serving reads
   (``rankgym.trainer.judge_loss``). Tie presentations get no rejection sampling and no SFT
   target.
4. A LoRA on every linear layer of the last ``lora_layers`` layers, AdamW, bf16 autocast on
   CPU, batches of similar length (:func:`length_batches`); a checkpoint (adapter, optimizer,
   position) every ``checkpoint_every`` steps, written to a temp dir then ``os.replace``d, so a
   crash loses at most that many steps and a rerun resumes. The final adapter is a standard
   peft adapter plus ``judge_train.json`` (base, prompt format, choices).

What it does not do: policy-gradient updates on sampled reasoning (the verdict comes first, so
there is no reasoning to reinforce before it; see ``pair_judge``), sample the verdict from the
full vocabulary (only the two choices are compared), or train on more than one base model at
once. Its rationales are whatever the base model writes after the right verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
from safetensors.torch import load_file
from tqdm.auto import tqdm

from rankgym.judges.pair_judge import choice_ids, decision_logprobs
from rankgym.model import peft_quiet
from rankgym.trainer.config import LoraSection
from rankgym.trainer.finite import check_update
from rankgym.trainer.judge_loss import (
    SERVED,
    TIE_LOSSES,
    TieLoss,
    build_batch,
    check_tie_loss,
    judge_losses,
    model_judge_losses,
    pair_key,
    pair_losses,
)

__all__ = [  # the losses live in judge_loss; importable from here as before
    "TIE_LOSSES", "Example", "JudgeTrainConfig", "TieLoss", "add_lora", "build_batch",
    "judge_losses", "length_batches", "model_judge_losses", "pair_losses", "rejection_sample",
    "save_adapter", "train_judge",
]  # fmt: skip

META_FILE = "judge_train.json"
_HINT = "lower --lr, check --gamma/--lambda-sft/--lambda-margin"


@dataclass
class JudgeTrainConfig:
    """Knobs of :func:`train_judge` (defaults sized for SmolLM2-135M on a 2-core CPU)."""

    samples: int = 4
    """Verdicts sampled per presentation in rejection sampling (K)."""
    reason_tokens: int = 16
    """Length of the ``Why: ...`` rationale sampled after a correct verdict (0: none)."""
    temperature: float = 1.0
    """Sampling temperature of verdicts and rationales."""
    epochs: int = 2
    lr: float = 3e-4
    """AdamW learning rate (no weight decay)."""
    batch_size: int = 8
    """Presentations per optimizer step (batched by similar length)."""
    lora_r: int = 16
    lora_alpha: int = 32
    """LoRA rank and alpha (the update is scaled by alpha / r)."""
    lora_layers: int | None = 10
    """LoRA on the last this-many decoder layers only (None = all): the backward pass then
    stops there, which roughly halves a CPU step on a 30-layer model."""
    gamma: float = 2.0
    """Margin of the margin loss ``max(0, gamma - logp(correct) + logp(wrong))``."""
    lambda_sft: float = 0.5
    lambda_margin: float = 1.0
    """Weights of the SFT loss (kept answers) and of the margin loss in the total."""
    lambda_tie: float = 1.0
    """Weight of the tie loss (soft target 0.5 on tie presentations) in the total."""
    tie_loss: TieLoss = "presentation"
    """``presentation``: each tie presentation's P(first better) is pulled to 0.5;
    ``served``: the order-averaged P of each tie pair (what serving reads) is;
    ``served-logit``: its order-averaged logit is (the same zero, a gradient that a position
    bias does not flatten). Both served forms keep a tie pair's two presentations in one
    batch (``rankgym.trainer.judge_loss``)."""
    max_line_chars: int = 200
    """Lines of the pair prompt are cut to this many characters."""
    max_context_tokens: int = 1024
    """Presentations with a longer prompt are left out of training."""
    checkpoint_every: int = 10
    """Steps between checkpoints (a crash loses at most this many)."""
    max_train_seconds: float | None = None
    """Stop training (and keep what was learned) after this long; None = all epochs."""
    bf16: bool = True
    """bf16 autocast on CPU."""
    seed: int = 0


@dataclass
class Example:
    """One presentation of a pair, tokenised for training."""

    key: str
    context: list[int]
    correct: int
    wrong: int
    answer: list[int] = field(default_factory=list)
    """SFT target after the context (verdict, rationale, end); empty = no SFT for this one."""
    hits: int = 0
    """Correct verdicts among the K samples."""
    weight: float = 1.0
    """Loss weight of this presentation (e.g. ``--human-weight`` for people's labels)."""
    tie: bool = False
    """Two equally good trajectories: target P(``correct``) = 0.5 (tie loss, no margin)."""


# --------------------------------------------------------------------------- sampling


def _autocast(model: Any, bf16: bool) -> Any:
    """bf16 autocast on CPU when asked (halves CPU compute), else a no-op context."""
    if bf16 and next(model.parameters()).device.type == "cpu":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def rejection_sample(
    model: Any,
    tok: Any,
    examples: list[Example],
    cfg: JudgeTrainConfig,
    on_batch: Callable[[list[Example]], None] | None = None,
) -> None:
    """Fill ``hits`` and ``answer`` of each example in place (see module docstring, step 2).

    ``on_batch`` is called after each batch (the caller appends them to a resumable file).
    """
    a_id, _ = choice_ids(tok)

    end = tok.convert_tokens_to_ids("<|im_end|>")
    end = end if isinstance(end, int) and end >= 0 else tok.eos_token_id
    why = tok("\nWhy:", add_special_tokens=False)["input_ids"]
    gen = torch.Generator().manual_seed(cfg.seed)
    for start in range(0, len(examples), cfg.batch_size):
        chunk = examples[start : start + cfg.batch_size]
        with _autocast(model, cfg.bf16):
            logp = decision_logprobs(model, tok, [ex.context for ex in chunk])
        probs = torch.softmax(logp / max(cfg.temperature, 1e-6), dim=-1)
        draws = torch.multinomial(probs, cfg.samples, replacement=True, generator=gen)
        kept = []
        for ex, d in zip(chunk, draws, strict=True):
            col = 0 if ex.correct == a_id else 1  # columns are (A, B)
            ex.hits = int((d == col).sum())
            if ex.hits:
                kept.append(ex)
        for ex in chunk:
            ex.answer = (
                ([ex.correct, *why, end] if cfg.reason_tokens else [ex.correct, end])
                if ex.hits
                else []
            )
        if kept and cfg.reason_tokens > 0:
            reasons = _sample_reasons(
                model, tok, [ex.context + [ex.correct, *why] for ex in kept], cfg, end
            )
            for ex, r in zip(kept, reasons, strict=True):
                ex.answer = [ex.correct, *why, *r, end]
        if on_batch:
            on_batch(chunk)


def _sample_reasons(
    model: Any, tok: Any, prompts: list[list[int]], cfg: JudgeTrainConfig, end: int
) -> list[list[int]]:
    """Sampled continuations (without the end token) of left-padded ``prompts``."""
    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else end
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    torch.manual_seed(cfg.seed + len(prompts) + width)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=cfg.reason_tokens,
            do_sample=True,
            temperature=cfg.temperature,
            pad_token_id=pad,
            eos_token_id=end,
        )
    result = []
    for row in out[:, width:].tolist():
        cut = [t for t in row[: row.index(end)] if t != pad] if end in row else row
        result.append(cut)
    return result


# --------------------------------------------------------------------------- training


def add_lora(model: Any, cfg: JudgeTrainConfig) -> Any:
    """Wrap ``model`` in a fresh, seeded LoRA on every linear projection of the last
    ``cfg.lora_layers`` decoder layers."""
    n_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    layers = None
    if cfg.lora_layers is not None and 0 < cfg.lora_layers < n_layers:
        layers = list(range(n_layers - cfg.lora_layers, n_layers))
    torch.manual_seed(cfg.seed)
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=0.0,
        target_modules=list(LoraSection().target_modules),  # the GRPO trainer's default set
        layers_to_transform=layers,
        task_type="CAUSAL_LM",
    )
    with peft_quiet():  # peft's own deprecated is_gradient_checkpointing read
        return get_peft_model(model, lora)


def _replace_dir(tmp: Path, target: Path) -> None:
    """Swap ``tmp`` in as ``target`` (old copy removed only after the new one is in place)."""
    old = target.with_name(target.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    if old.exists():
        shutil.rmtree(old)


def save_checkpoint(model: Any, optimizer: Any, state: dict[str, Any], path: Path) -> None:
    """Adapter + optimizer + ``state.json`` into ``path`` atomically."""
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps(state))
    _replace_dir(tmp, path)


def load_checkpoint(
    model: Any, optimizer: Any, path: Path, fingerprint: str
) -> dict[str, Any] | None:
    """Restore a checkpoint written for the same data and config; None when there is none."""
    state_file = path / "state.json"
    if not state_file.is_file():
        return None
    state = json.loads(state_file.read_text())
    if state.get("fingerprint") != fingerprint:
        return None
    set_peft_model_state_dict(model, load_file(path / "adapter_model.safetensors"))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    return state


def train_judge(
    model: Any,
    tok: Any,
    examples: list[Example],
    cfg: JudgeTrainConfig,
    work_dir: Path,
    fingerprint: str,
    progress: bool = True,
) -> list[dict[str, float]]:
    """Train the LoRA ``model`` (already wrapped by :func:`add_lora`) on ``examples``.

    Resumes from ``work_dir/checkpoint`` when its fingerprint matches. Stops early after
    ``cfg.max_train_seconds``. Returns one metrics row per optimiser step (loss parts, mean
    log-prob gap, decision accuracy on the batch), including the steps of earlier runs.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    ckpt = work_dir / "checkpoint"
    state = load_checkpoint(model, optimizer, ckpt, fingerprint) or {"step": 0, "log": []}
    check_tie_loss(cfg.tie_loss)
    keep_pairs = cfg.tie_loss in SERVED
    plan = [
        length_batches(examples, cfg.batch_size, cfg.seed * 1000 + e, keep_pairs)
        for e in range(cfg.epochs)
    ]
    at = [(e, k) for e, batches in enumerate(plan) for k in range(len(batches))]
    total = len(at)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    bar = None
    if progress:
        bar = tqdm(total=total, initial=state["step"], desc="judge-train", unit="step", leave=False)
    model.train()
    started = time.monotonic()
    for step in range(state["step"], total):
        if cfg.max_train_seconds is not None and time.monotonic() - started > cfg.max_train_seconds:
            state["stopped_early"] = True
            save_checkpoint(model, optimizer, {**state, "fingerprint": fingerprint}, ckpt)
            break
        epoch, k = at[step]
        chunk = [examples[i] for i in plan[epoch][k]]
        batch = build_batch(chunk, pad)
        with _autocast(model, cfg.bf16):
            parts = model_judge_losses(model, batch, cfg.gamma, cfg.tie_loss)
        loss = (
            cfg.lambda_sft * parts["sft"]
            + cfg.lambda_margin * parts["margin"]
            + cfg.lambda_tie * parts["tie"]
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(params, 1.0))
        check_update("judge-train", step + 1, loss=float(loss.detach()), grad_norm=norm, hint=_HINT)  # fmt: skip
        optimizer.step()
        check_update("judge-train", step + 1, params=params, hint=_HINT)
        row: dict[str, float] = {"step": step + 1, "epoch": epoch}
        row.update({k2: float(v.detach()) for k2, v in parts.items()})
        state["log"].append(row)
        state["step"] = step + 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(margin=f"{row['margin']:.2f}", acc=f"{row['accuracy']:.2f}")
        if state["step"] % cfg.checkpoint_every == 0 or state["step"] == total:
            save_checkpoint(model, optimizer, {**state, "fingerprint": fingerprint}, ckpt)
    if bar is not None:
        bar.close()
    model.eval()
    return state["log"]


def length_batches(
    examples: list[Example], batch_size: int, seed: int, keep_pairs: bool = False
) -> list[list[int]]:
    """Batches of indices of similar length (less padding), in a seeded random order.

    Lengths are jittered by a seeded random fraction before sorting, so batch membership
    changes between epochs; every example appears exactly once. ``keep_pairs``: the two
    presentations of a tie pair (same ``pair_key``, both ``tie``) always share a batch (a
    batch then closes one row early rather than split them; with ``batch_size`` 1 a pair is a
    batch of 2), which the ``served`` tie losses need. Without it the batches are those of
    earlier versions, row for row.
    """
    rng = random.Random(seed)
    units: list[list[int]] = []
    if keep_pairs:
        slot: dict[str, int] = {}
        for i, ex in enumerate(examples):
            k = pair_key(ex.key)
            if ex.tie and k in slot and len(units[slot[k]]) == 1:
                units[slot.pop(k)].append(i)
                continue
            if ex.tie:
                slot[k] = len(units)
            units.append([i])
    else:
        units = [[i] for i in range(len(examples))]
    lengths = [len(examples[u[0]].context) for u in units]
    order = sorted(range(len(units)), key=lambda u: lengths[u] * (1 + 0.2 * rng.random()))
    batches: list[list[int]] = []
    cur: list[int] = []
    for u in order:
        if cur and len(cur) + len(units[u]) > batch_size:
            batches.append(cur)
            cur = []
        cur = cur + units[u]
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def save_adapter(model: Any, out: Path, meta: dict[str, Any], dtype: str = "float32") -> Path:
    """Write the final peft adapter and ``judge_train.json`` to ``out/adapter`` atomically.

    ``dtype="bfloat16"`` stores the LoRA weights in bf16 (half the file; serving loads them into
    the base model's dtype)."""
    target = out / "adapter"
    tmp = out / "adapter.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    if dtype == "bfloat16":
        from safetensors.torch import save_file

        weights = tmp / "adapter_model.safetensors"
        state = {k: v.to(torch.bfloat16).contiguous() for k, v in load_file(weights).items()}
        save_file(state, weights, metadata={"format": "pt"})
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2))
    _replace_dir(tmp, target)
    return target


def config_dict(cfg: JudgeTrainConfig) -> dict[str, Any]:
    return asdict(cfg)
