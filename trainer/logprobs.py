"""Log-probs of chosen tokens without full-vocabulary logits for every position.

A causal LM's loss needs, per target token, ``logit[target] - logsumexp(logits)`` at the
position before it. Computing ``lm_head`` on every position keeps a ``(rows, positions, vocab)``
float tensor alive for backward (49,152 columns for SmolLM2: ~200 KB per position in fp32). Here
the decoder runs once for the final hidden states, only the positions that carry loss are
gathered (contiguous, so a bf16 matmul does not copy the output weight per row), and ``lm_head``
+ log-softmax run on chunks of ``chunk`` positions. With autograd on and a frozen bias-free
``lm_head`` (LoRA, tied embeddings: every trainer here), each chunk's gradient with respect to its
hidden states is computed in the forward pass, while its logits exist anyway: a log-prob is
one number per position, so ``d logp / d h = (onehot - softmax) @ W / temperature`` is all
backward needs (P x H, not P x vocab), scaled there by the incoming gradient. That is one
lm_head matmul and one softmax fewer than recomputing the logits in backward, and no logits
are alive when backward starts. A trainable or biased ``lm_head`` falls back to recomputing
each chunk's logits in backward (``torch.utils.checkpoint``). Either way the memory of the
log-prob step is one chunk's logits whatever the batch.

Numbers equal a plain ``model(...).logits`` + ``log_softmax`` within float rounding (tested at
1e-5 in fp32). What this does not do: fuse the matmul and the softmax into one kernel (no
maintained fused op runs on this CPU), or handle models without a separate decoder and output
layer (``get_decoder()`` / ``get_output_embeddings()``, which every transformers causal LM has).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch.utils.checkpoint import checkpoint

from rankgym.model import decoder_and_head

CHUNK = 256
"""Positions per lm_head chunk: 256 x 49,152 fp32 logits = 50 MB at a time."""


def split_lm(model: Any) -> tuple[Any, Any]:
    """``(decoder, lm_head)`` of ``model`` (``rankgym.model.decoder_and_head``)."""
    return decoder_and_head(model)


def final_hidden(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """The last layer's (normed) hidden states ``(R, T, H)``; no logits are computed."""
    decoder, _ = split_lm(model)
    out = decoder(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        use_cache=False,
    )
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]


def _chunk_logprobs(
    lm_head: Any, h: torch.Tensor, targets: torch.Tensor, temperature: float
) -> torch.Tensor:
    logits = lm_head(h).float()
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)


class _FusedChunk(torch.autograd.Function):
    """Log-probs ``(P,)`` of ``targets`` under ``linear(h, weight) / temperature`` whose
    gradient with respect to ``h`` is computed in forward (``weight`` gets none)."""

    @staticmethod
    def forward(
        ctx: Any, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float
    ) -> torch.Tensor:
        dev = h.device.type
        if torch.is_autocast_enabled(dev):  # cast once here, not again for the second matmul
            weight = weight.to(torch.get_autocast_dtype(dev))
        low = torch.nn.functional.linear(h, weight)  # bf16 under autocast, as lm_head(h)
        logits = low.float()
        del low
        scaled = temperature not in (0.0, 1.0)
        if scaled:
            logits = logits / temperature
        lse = torch.logsumexp(logits, -1)
        tg = targets.unsqueeze(-1)
        lp = logits.gather(-1, tg).squeeze(-1) - lse
        g = logits.sub_(lse.unsqueeze(-1)).exp_().neg_()  # -softmax, in place of the logits
        g.scatter_add_(-1, tg, torch.ones_like(lp).unsqueeze(-1))  # onehot - softmax
        dh = g.to(weight.dtype) @ weight  # (P, H): the lm_head backward's matmul, done once here
        del g
        if scaled:
            dh = dh / temperature
        ctx.save_for_backward(dh)
        ctx.h_dtype = h.dtype
        return lp

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        (dh,) = ctx.saved_tensors
        return (grad.unsqueeze(-1) * dh.float()).to(ctx.h_dtype), None, None, None


def _fusable(lm_head: Any) -> bool:
    return (
        isinstance(lm_head, torch.nn.Linear)
        and lm_head.bias is None
        and not lm_head.weight.requires_grad
    )


def hidden_logprobs(
    lm_head: Any,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    chunk: int = CHUNK,
) -> torch.Tensor:
    """Log-probs ``(P,)`` (fp32) of ``targets`` (P,) under ``lm_head(hidden)`` (hidden: (P, H)).

    ``temperature`` (> 0; 0 counts as 1) divides the logits first. Chunks of ``chunk`` rows;
    with grad enabled each chunk's gradient is computed in forward for a frozen bias-free
    ``lm_head`` (else its logits are recomputed in backward); no chunk's logits are kept.
    """
    if chunk < 1:
        raise ValueError(f"chunk = {chunk}: needs at least one position per chunk")
    hidden = hidden.contiguous()
    fused = _fusable(lm_head)
    parts = []
    for i in range(0, hidden.shape[0], chunk):
        h, t = hidden[i : i + chunk], targets[i : i + chunk]
        if torch.is_grad_enabled() and h.requires_grad and fused:
            parts.append(_FusedChunk.apply(h, lm_head.weight, t, temperature))
        elif torch.is_grad_enabled() and h.requires_grad:
            parts.append(
                checkpoint(_chunk_logprobs, lm_head, h, t, temperature, use_reentrant=False)
            )
        else:
            parts.append(_chunk_logprobs(lm_head, h, t, temperature))
    if not parts:
        return hidden.new_zeros(0, dtype=torch.float32)
    return torch.cat(parts)


def selected_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    rows: torch.Tensor,
    cols: torch.Tensor,
    targets: torch.Tensor | None = None,
    temperature: float = 1.0,
    chunk: int = CHUNK,
) -> torch.Tensor:
    """Log-probs ``(P,)`` of the tokens at ``(rows[i], cols[i])`` of ``input_ids``.

    Each is predicted from the hidden state at ``cols[i] - 1`` (so ``cols >= 1``). ``targets``
    overrides which token is scored at each place (e.g. a wrong verdict at a decision
    position); a place may appear more than once.
    """
    if cols.numel() and int(cols.min()) < 1:
        raise ValueError("a scored token at position 0 has no position before it to predict it")
    hidden = final_hidden(model, input_ids, attention_mask, position_ids)
    h = hidden[rows, cols - 1]
    tg = input_ids[rows, cols] if targets is None else targets
    _, lm_head = split_lm(model)
    return hidden_logprobs(lm_head, h, tg, temperature, chunk)


class LossRows(Protocol):
    """Left-padded token rows with a loss mask over their last K places (``grpo.MicroBatch``)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    loss_mask: torch.Tensor


def masked_logprobs(
    model: Any, mb: LossRows, temperature: float = 1.0, chunk: int = CHUNK
) -> torch.Tensor:
    """Log-probs ``(R, K)`` of the last K tokens of each row where ``mb.loss_mask`` (R, K) is
    non-zero; 0 elsewhere (those places get no gradient and cost no lm_head work)."""
    R, T = mb.input_ids.shape
    K = mb.loss_mask.shape[1]
    r, j = torch.nonzero(mb.loss_mask, as_tuple=True)
    lp = selected_logprobs(
        model, mb.input_ids, mb.attention_mask, mb.position_ids, r, j + (T - K), None,
        temperature, chunk,
    )  # fmt: skip
    return torch.zeros((R, K), dtype=torch.float32, device=mb.input_ids.device).index_put(
        (r, j), lp
    )


def judge_losses_chunked(model: Any, batch: dict[str, Any]) -> dict[str, Any]:
    """The SFT loss and per-row verdict gap of ``model`` on ``batch`` (``trainer.judge_train``'s
    ``build_batch``), from the log-probs it reads instead of the logits of every kept position:
    the correct and wrong verdict at each row's decision place, and each SFT label.

    ``sft``: mean token cross-entropy over label positions, each token weighted by its row's
    ``batch["weight"]`` when the batch has one (e.g. ``--human-weight``; 0 with no label);
    ``gap``: logp(correct) - logp(wrong) per row. The margin and tie losses over ``gap`` are
    ``judge_train.pair_losses``; ``judge_train.model_judge_losses`` puts the two together."""
    ids, labels, dec = batch["input_ids"], batch["labels"], batch["decision"]
    n = ids.shape[0]
    rows = torch.arange(n, device=ids.device)
    lr, lc = torch.nonzero(labels != -100, as_tuple=True)
    lp = selected_logprobs(
        model,
        ids,
        batch["attention_mask"],
        batch["position_ids"],
        torch.cat([rows, rows, lr]),
        torch.cat([dec, dec, lc]),
        torch.cat([batch["correct"], batch["wrong"], labels[lr, lc]]),
    )
    gap = lp[:n] - lp[n : 2 * n]
    w = batch.get("weight")
    tw = torch.ones(lr.numel(), device=lp.device) if w is None else w.float().to(lp.device)[lr]
    sft = -(lp[2 * n :] * tw).sum() / tw.sum().clamp(min=1e-12) if lr.numel() else lp.sum() * 0.0
    return {"sft": sft, "gap": gap}


def full_logits_logprobs(model: Any, mb: LossRows, temperature: float = 1.0) -> torch.Tensor:
    """The reference for ``grpo.token_logprobs``: log-probs ``(R, K)`` of each row's last K
    tokens (K = ``mb.loss_mask.shape[1]``) from the full logits of the last K+1 positions, a
    float log-softmax row by row: ``token_logprobs`` as it was before this module (50999ae).

    Keeps ``R x K x vocab`` logits alive, so training never calls it; the tests check the
    chunked path against it and bench/memory.py measures what it cost. Every place is scored
    (no mask), and ``temperature`` 0 or 1 leaves the logits as they are."""
    K = mb.loss_mask.shape[1]
    out = model(
        input_ids=mb.input_ids,
        attention_mask=mb.attention_mask,
        position_ids=mb.position_ids,
        use_cache=False,
        logits_to_keep=K + 1,
    )
    logits, targets, rows = out.logits[:, :-1], mb.input_ids[:, -K:], []
    for lg, tg in zip(logits, targets, strict=True):
        lg = lg.float() if temperature in (0.0, 1.0) else lg.float() / temperature
        rows.append(lg.gather(-1, tg.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(lg, -1))
    return torch.stack(rows)
