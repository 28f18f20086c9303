"""The tie loss of judge training: tie presentations are pulled toward P = 0.5, not toward a side."""

from __future__ import annotations

import math

import pytest
import torch
from trainer_helpers import tie_pair, tiny_model

from rankgym.judges.pair_judge import choice_ids
from rankgym.trainer.judge_pipeline import examples_of
from rankgym.trainer.judge_train import (
    Example,
    JudgeTrainConfig,
    add_lora,
    build_batch,
    judge_losses,
    pair_losses,
    train_judge,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_tie_loss_is_zero_at_even_odds_symmetric_and_left_out_of_the_margin():
    batch = {"tie": torch.tensor([False, True, True]), "weight": torch.ones(3)}
    at_half = pair_losses(torch.tensor([1.0, 0.0, 0.0]), batch, gamma=2.0)
    assert float(at_half["tie"]) == pytest.approx(0.0, abs=1e-7)
    assert float(at_half["margin"]) == pytest.approx(1.0)  # only the decided row: relu(2 - 1)
    assert float(at_half["accuracy"]) == 1.0 and float(at_half["logp_gap"]) == 1.0
    lean = pair_losses(torch.tensor([1.0, 3.0, -3.0]), batch, gamma=2.0)
    want = 0.5 * (math.log1p(math.exp(3.0)) + math.log1p(math.exp(-3.0))) - math.log(2.0)
    assert float(lean["tie"]) == pytest.approx(want, abs=1e-6)  # the same either way round
    assert float(lean["tie_abs_gap"]) == pytest.approx(3.0)
    assert float(lean["margin"]) == pytest.approx(1.0)


def test_a_batch_without_ties_keeps_the_old_margin_and_accuracy():
    model, _ = tiny_model(seed=3)
    exs = [Example("a", [5, 6, 7], 11, 12), Example("b", [9, 10], 12, 11)]
    b = build_batch(exs, pad_id=0)
    assert b["tie"].tolist() == [False, False]
    with torch.no_grad():
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                       position_ids=b["position_ids"]).logits  # fmt: skip
    out = judge_losses(logits, b, gamma=0.7)
    lp0, lp1 = torch.log_softmax(logits[0, 2], -1), torch.log_softmax(logits[1, 2], -1)
    gaps = [float(lp0[11] - lp0[12]), float(lp1[12] - lp1[11])]
    assert float(out["margin"]) == pytest.approx(sum(max(0.0, 0.7 - g) for g in gaps) / 2, abs=1e-6)  # fmt: skip
    assert float(out["tie"]) == 0.0


def test_a_tie_pair_becomes_two_tie_presentations_and_training_pulls_the_judge_to_even_odds(tmp_path):  # fmt: skip
    model, tok = tiny_model(seed=1)
    cfg = JudgeTrainConfig(epochs=30, lr=3e-3, batch_size=2, lora_r=4, lora_alpha=8,
                           lora_layers=None, lambda_sft=0.0, bf16=False, checkpoint_every=1000)  # fmt: skip
    tie = tie_pair()
    exs, skipped = examples_of(tok, [tie], cfg)
    a, _ = choice_ids(tok)
    assert skipped == 0 and len(exs) == 2 and len({e.key for e in exs}) == 2
    assert all(e.tie and e.correct == a and not e.answer for e in exs)

    model = add_lora(model, cfg)

    def p_first() -> list[float]:
        b = build_batch(exs, tok.pad_token_id)
        with torch.no_grad():
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                           position_ids=b["position_ids"]).logits  # fmt: skip
        return [1 / (1 + math.exp(-g)) for g in _row_gaps(logits, b)]  # P(A) of each order

    # first teach it a side: "A" always wins (the same contexts as decided pairs)
    decided = [Example(e.key + "d", e.context, e.correct, e.wrong) for e in exs]
    train_judge(model, tok, decided, cfg, tmp_path / "w1", "d", progress=False)
    leaning = p_first()
    assert min(leaning) > 0.65
    train_judge(model, tok, exs, cfg, tmp_path / "w2", "t", progress=False)
    even = p_first()
    assert max(abs(p - 0.5) for p in even) < 0.1
    assert all(abs(e - 0.5) < abs(lo - 0.5) for e, lo in zip(even, leaning, strict=True))


def _row_gaps(logits: torch.Tensor, b: dict) -> list[float]:
    rows = torch.arange(logits.shape[0])
    at = torch.log_softmax(logits[rows, b["decision"] - 1].float(), -1)
    return (at[rows, b["correct"]] - at[rows, b["wrong"]]).tolist()
