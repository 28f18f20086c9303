"""The losses of judge training (``rankgym judge-train``): batches, margin, SFT and tie losses.

:func:`build_batch` pads presentations (``judge_train.Example``) into tensors;
:func:`pair_losses` turns per-row verdict gaps ``logp(correct) - logp(wrong)`` into the margin
loss on decided rows and the tie loss on tie rows; :func:`judge_losses` (from full logits) and
:func:`model_judge_losses` (chunked log-probs, what training runs) add the SFT loss.

Two tie losses (``JudgeTrainConfig.tie_loss``, ``--tie-loss``, ``[judge_train] tie_loss``):

- ``presentation``: each tie presentation's P(first better) = sigmoid(gap) is pulled to 0.5,
  ``BCE(sigmoid(gap), 0.5) - log 2``. A judge with a *position* bias (P(first) = 0.7 in both
  orders) pays this loss although its served, order-averaged score is already even.
- ``served``: the loss is on what the judge serves (``pair_judge.score_pairs`` with both
  orders): for the two presentations (X, Y) and (Y, X) of one tie pair,
  ``P_served(X over Y) = (P(first | X, Y) + 1 - P(first | Y, X)) / 2`` and the loss is
  ``BCE(P_served, 0.5) - log 2`` = ``-(log P_served + log(1 - P_served)) / 2 - log 2``, 0 when
  the served score is even. A position bias costs nothing; a content lean (one trajectory
  preferred in both orders) is what it removes. It needs both presentations of a pair in one
  batch (``judge_train.length_batches(..., keep_pairs=True)``); a tie row whose partner is not
  in the batch (e.g. the other order was cut as too long) falls back to the presentation loss.
- ``served-logit``: the same pairs, the loss on the order-averaged *logit*: with
  ``g1 = gap(X, Y)`` and ``g0 = gap(Y, X)`` (both logp(A) - logp(B)), the content lean is
  ``d = (g1 - g0) / 2`` and the position bias ``c = (g1 + g0) / 2``; the loss is
  ``BCE(sigmoid(d), 0.5) - log 2``. It is 0 exactly where ``served`` is (P_served = 0.5 iff
  d = 0, whatever c) and grows with the lean either way, but its gradient does not vanish
  when a large position bias saturates each presentation's sigmoid: on a lean ``d = 0.4``
  the ``served`` loss's gradient is this one's at ``c = 0``, a seventh at ``c = 2.2`` and a
  twenty-third at ``c = 2.9`` (tie presentations of session 6's judge D had mean ``|gap|``
  2.2-2.9), so a judge with a strong position bias barely moves under ``served``.

What this module does not do: run the model (``logprobs.judge_losses_chunked`` does) or
decide which rows are ties (``Example.tie``, set from the pair's label).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch

from rankgym.trainer.logprobs import judge_losses_chunked

TieLoss = Literal["presentation", "served", "served-logit"]
TIE_LOSSES: tuple[TieLoss, ...] = ("presentation", "served", "served-logit")
SERVED: tuple[TieLoss, ...] = ("served", "served-logit")
"""The tie losses that read both presentations of a pair (and need them in one batch)."""


def check_tie_loss(value: str) -> TieLoss:
    """``value`` if it names a tie loss, else ``ValueError`` naming the choices."""
    if value not in TIE_LOSSES:
        raise ValueError(f"tie_loss must be one of {', '.join(TIE_LOSSES)} (got {value!r})")
    return value


def pair_key(key: str) -> str:
    """The pair id of a presentation key ``"<pair id>:<1 if the winner is shown first else 0>"``
    (``judge_pipeline.examples_of``); a key without ``:`` is its own pair."""
    return key.rsplit(":", 1)[0]


def tie_partners(examples: list[Any]) -> list[int]:
    """Per row, the index of the other presentation of the same tie pair in ``examples``
    (same :func:`pair_key`, both ``tie``), else -1; decided rows get -1."""
    first: dict[str, int] = {}
    partner = [-1] * len(examples)
    for i, ex in enumerate(examples):
        if not ex.tie:
            continue
        k = pair_key(ex.key)
        j = first.pop(k, None)
        if j is None:
            first[k] = i
        else:
            partner[i], partner[j] = j, i
    return partner


def build_batch(examples: list[Any], pad_id: int) -> dict[str, Any]:
    """Left-padded tensors: ``input_ids``, ``attention_mask``, ``position_ids``, ``labels``
    (-100 outside SFT answers), ``decision`` (index of the decision token per row),
    ``correct``, ``wrong``, ``weight``, ``tie``, ``tie_partner`` (:func:`tie_partners`), and
    ``keep``: how many trailing positions' logits the losses read (pass it as
    ``logits_to_keep``; rows end together, so the tails line up).

    A row without an SFT answer is its context plus the correct verdict token (not a label):
    the margin needs the logits at the decision position, nothing after it.
    """
    rows, labels = [], []
    for ex in examples:
        tail = ex.answer if ex.answer else [ex.correct]
        rows.append(ex.context + tail)
        labels.append([-100] * len(ex.context) + (list(ex.answer) if ex.answer else [-100]))
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    lab = torch.full((len(rows), width), -100, dtype=torch.long)
    decision = []
    for i, (r, lb) in enumerate(zip(rows, labels, strict=True)):
        pad = width - len(r)
        ids[i, pad:] = torch.tensor(r)
        mask[i, pad:] = 1
        lab[i, pad:] = torch.tensor(lb)
        decision.append(pad + len(examples[i].context))
    dec = torch.tensor(decision)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": (mask.cumsum(-1) - 1).clamp(min=0),
        "labels": lab,
        "decision": dec,
        "correct": torch.tensor([ex.correct for ex in examples]),
        "wrong": torch.tensor([ex.wrong for ex in examples]),
        "weight": torch.tensor([float(ex.weight) for ex in examples]),
        "tie": torch.tensor([bool(ex.tie) for ex in examples]),
        "tie_partner": torch.tensor(tie_partners(examples), dtype=torch.long),
        "keep": int(width - int(dec.min()) + 1),
    }


def judge_losses(
    logits: Any, batch: dict[str, Any], gamma: float, tie_loss: TieLoss = "presentation"
) -> dict[str, Any]:
    """SFT and margin losses from ``logits`` of the last ``logits.shape[1]`` positions
    (all positions, or at least ``batch["keep"]``), and the tie loss (:func:`pair_losses`).

    ``sft``: mean token cross-entropy over label positions (0 when the batch has none).
    ``margin``: mean over rows of ``relu(gamma - (logp[correct] - logp[wrong]))`` with logp the
    log-softmax of the logits that predict the decision token (position ``decision - 1``).
    Both means are weighted by ``batch["weight"]`` (per row) when the batch has it.
    Also returns ``logp_gap`` (mean correct-minus-wrong) and ``accuracy`` (gap > 0), detached.
    """
    logits = logits.float()
    offset = batch["input_ids"].shape[1] - logits.shape[1]
    rows = torch.arange(logits.shape[0])
    at = torch.log_softmax(logits[rows, batch["decision"] - 1 - offset], dim=-1)
    gap = at[rows, batch["correct"]] - at[rows, batch["wrong"]]
    w = batch.get("weight")
    w = torch.ones(logits.shape[0]) if w is None else w.float()
    shift_logits = logits[:, :-1]
    shift_labels = batch["labels"][:, offset + 1 :]
    if (shift_labels != -100).any():
        ce = torch.nn.functional.cross_entropy(
            shift_logits.reshape(-1, shift_logits.shape[-1]),
            shift_labels.reshape(-1),
            ignore_index=-100,
            reduction="none",
        ).view(shift_labels.shape)
        tw = (shift_labels != -100).float() * w[:, None]
        sft = (ce * tw).sum() / tw.sum().clamp(min=1e-12)
    else:
        sft = logits.sum() * 0.0
    return {"sft": sft, **pair_losses(gap, batch, gamma, tie_loss)}


def model_judge_losses(
    model: Any, batch: dict[str, Any], gamma: float, tie_loss: TieLoss = "presentation"
) -> dict[str, Any]:
    """:func:`judge_losses` of ``model`` on ``batch`` without full-vocabulary logits (what
    training uses): ``logprobs.judge_losses_chunked``'s SFT loss and gaps, then
    :func:`pair_losses`; every term weighted per row as in :func:`judge_losses`."""
    chunked = judge_losses_chunked(model, batch)
    return {"sft": chunked["sft"], **pair_losses(chunked["gap"].float(), batch, gamma, tie_loss)}


def pair_losses(
    gap: Any, batch: dict[str, Any], gamma: float, tie_loss: TieLoss = "presentation"
) -> dict[str, Any]:
    """Margin and tie losses from per-row ``gap`` = logp(correct) - logp(wrong).

    ``margin``: weighted mean of ``relu(gamma - gap)`` over decided rows (``batch["tie"]``
    false); ``tie``: weighted mean over tie rows of the ``tie_loss`` (module docstring): per
    row ``BCE(sigmoid(gap), 0.5) - log 2``, or with ``"served"`` per pair (partners from
    ``batch["tie_partner"]``, weight = the two rows' weights summed) the same BCE of the
    order-averaged probability (``"served-logit"``: of the order-averaged logit, the content
    lean); 0 when the judge is indifferent. Each is 0 when the batch has
    no such row. ``logp_gap`` and ``accuracy`` (gap > 0) are over decided rows,
    ``tie_abs_gap`` the mean ``|gap|`` over tie rows and ``tie_served_dev`` the mean
    ``|P_served - 0.5|`` over tie pairs with both rows in the batch (all detached).
    """
    check_tie_loss(tie_loss)
    n = gap.shape[0]
    w = batch.get("weight")
    w = torch.ones(n) if w is None else w.float().to(gap.device)
    tie = batch.get("tie")
    tie = torch.zeros(n, dtype=torch.bool) if tie is None else tie.to(gap.device)
    partner = batch.get("tie_partner")
    partner = torch.full((n,), -1, dtype=torch.long) if partner is None else partner.to(gap.device)  # fmt: skip
    dec = ~tie
    wd = w * dec
    margin = (torch.relu(gamma - gap) * wd).sum() / wd.sum().clamp(min=1e-12)
    ls = torch.nn.functional.logsigmoid
    per_row = -0.5 * (ls(gap) + ls(-gap)) - math.log(2.0)  # BCE(sigmoid(gap), 0.5) - log 2
    # pairs with both presentations here: row i (its first row) and partner j
    first = tie & (partner > torch.arange(n, device=gap.device))
    i = torch.nonzero(first, as_tuple=True)[0]
    j = partner[i]
    # P_served = (sigmoid(g_i) + sigmoid(-g_j)) / 2, in log space for stability
    log_p = torch.logaddexp(ls(gap[i]), ls(-gap[j])) - math.log(2.0)
    log_q = torch.logaddexp(ls(-gap[i]), ls(gap[j])) - math.log(2.0)
    per_pair = -0.5 * (log_p + log_q) - math.log(2.0)
    if tie_loss == "served-logit":
        d = (gap[i] - gap[j]) / 2
        per_pair = -0.5 * (ls(d) + ls(-d)) - math.log(2.0)
    if tie_loss in SERVED:
        lone = tie & (partner < 0)
        wl, wp = w * lone, w[i] + w[j]
        total = (per_row * wl).sum() + (per_pair * wp).sum()
        tie_value = total / (wl.sum() + wp.sum()).clamp(min=1e-12)
    else:
        wt = w * tie
        tie_value = (per_row * wt).sum() / wt.sum().clamp(min=1e-12)
    g = gap.detach()
    nd, nt = int(dec.sum()), int(tie.sum())
    zero = g.sum() * 0.0
    return {
        "margin": margin,
        "tie": tie_value,
        "logp_gap": g[dec].mean() if nd else zero,
        "accuracy": (g[dec] > 0).float().mean() if nd else zero,
        "tie_abs_gap": g[tie].abs().mean() if nt else zero,
        "tie_served_dev": (log_p.detach().exp() - 0.5).abs().mean() if i.numel() else zero,
    }
