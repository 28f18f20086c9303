"""The judge-training loss: margin at the decision position and SFT masking, by hand."""

from __future__ import annotations

import math

import pytest
import torch
from trainer_helpers import tiny_model

from rankgym.trainer.judge_train import Example, build_batch, judge_losses

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _examples() -> list[Example]:
    return [
        Example("with-answer", context=[5, 6, 7, 8], correct=11, wrong=12, answer=[11, 13, 2]),
        Example("margin-only", context=[9, 10], correct=12, wrong=11, answer=[]),
    ]


def test_batch_left_pads_masks_all_but_the_sft_answer_and_marks_the_decision_token():
    b = build_batch(_examples(), pad_id=0)
    assert b["input_ids"].tolist() == [[5, 6, 7, 8, 11, 13, 2], [0, 0, 0, 0, 9, 10, 12]]
    assert b["attention_mask"].tolist() == [[1] * 7, [0, 0, 0, 0, 1, 1, 1]]
    assert b["position_ids"].tolist() == [list(range(7)), [0, 0, 0, 0, 0, 1, 2]]
    assert b["labels"].tolist() == [
        [-100, -100, -100, -100, 11, 13, 2],
        [-100] * 7,  # no kept sample: no SFT target at all, not even the verdict
    ]
    assert b["decision"].tolist() == [4, 6]
    assert b["input_ids"][0, 4] == 11 and b["input_ids"][1, 6] == 12
    assert b["keep"] == 4  # logits from position 3 (predicts row 0's decision) to the end


def test_margin_and_sft_losses_equal_the_hand_computed_values_on_a_tiny_model():
    model, _ = tiny_model(seed=3)
    b = build_batch(_examples(), pad_id=0)
    with torch.no_grad():
        logits = model(
            input_ids=b["input_ids"],
            attention_mask=b["attention_mask"],
            position_ids=b["position_ids"],
        ).logits
    gamma = 0.7
    out = judge_losses(logits, b, gamma)

    # margin: logits predicting the decision token sit one position before it
    lp0 = torch.log_softmax(logits[0, 3], -1)
    lp1 = torch.log_softmax(logits[1, 5], -1)
    gaps = [float(lp0[11] - lp0[12]), float(lp1[12] - lp1[11])]
    want_margin = sum(max(0.0, gamma - g) for g in gaps) / 2
    assert float(out["margin"]) == pytest.approx(want_margin, abs=1e-6)
    assert float(out["logp_gap"]) == pytest.approx(sum(gaps) / 2, abs=1e-6)
    assert float(out["accuracy"]) == pytest.approx(sum(g > 0 for g in gaps) / 2)

    # SFT: tokens 11, 13, 2 of row 0 predicted from positions 3, 4, 5; row 1 contributes nothing
    nll = [-float(torch.log_softmax(logits[0, p], -1)[t]) for p, t in ((3, 11), (4, 13), (5, 2))]
    assert float(out["sft"]) == pytest.approx(sum(nll) / 3, abs=1e-5)

    # the same numbers from only the last ``keep`` positions (what training computes)
    tail = judge_losses(logits[:, -b["keep"] :], b, gamma)
    for k in ("margin", "sft", "logp_gap", "accuracy"):
        assert float(tail[k]) == pytest.approx(float(out[k]), abs=1e-6)


def test_margin_is_zero_once_the_correct_verdict_leads_by_gamma_and_linear_below():
    b = build_batch([Example("k", [1, 2], correct=3, wrong=4, answer=[])], pad_id=0)
    logits = torch.zeros(1, 3, 8)
    logits[0, 1, 3] = 5.0  # correct leads wrong by 5 nats at the decision position
    assert float(judge_losses(logits, b, gamma=2.0)["margin"]) == 0.0
    logits[0, 1, 3] = 0.5
    assert float(judge_losses(logits, b, gamma=2.0)["margin"]) == pytest.approx(1.5)
    logits[0, 1, 5] = 9.0  # other tokens change logp of both, not their difference
    assert float(judge_losses(logits, b, gamma=2.0)["margin"]) == pytest.approx(1.5, abs=1e-5)
    assert float(judge_losses(logits, b, gamma=2.0)["sft"]) == 0.0


def test_margin_gradient_raises_the_correct_verdict_and_lowers_the_wrong_one():
    b = build_batch([Example("k", [1, 2], correct=3, wrong=4, answer=[])], pad_id=0)
    logits = torch.zeros(1, 3, 8, requires_grad=True)
    judge_losses(logits, b, gamma=1.0)["margin"].backward()
    g = logits.grad[0, 1]
    assert g[3] < 0 < g[4]  # descent raises logit 3, lowers logit 4
    assert math.isclose(float(g[3]), -1.0, abs_tol=1e-6) and math.isclose(
        float(g[4]), 1.0, abs_tol=1e-6
    )
    assert float(logits.grad[0, 0].abs().sum() + logits.grad[0, 2].abs().sum()) == 0.0


class _AlwaysA(torch.nn.Module):
    """A stand-in judge whose next token is always `` A`` (id 330), whatever the prompt."""

    def __init__(self, a: int = 330) -> None:
        super().__init__()
        self.a = a
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=0):
        logits = torch.full((*input_ids.shape, 400), -20.0)
        logits[..., self.a] = 20.0
        return type("Out", (), {"logits": logits[:, -1:] if logits_to_keep else logits})()


def test_rejection_sampling_keeps_only_presentations_whose_correct_verdict_was_sampled():
    from rankgym.trainer.judge_train import JudgeTrainConfig, rejection_sample

    _, tok = tiny_model()
    a, b = 330, 389
    exs = [Example("a-right", [1, 2, 3], a, b), Example("b-right", [1, 2, 3], b, a)]
    rejection_sample(_AlwaysA(a), tok, exs, JudgeTrainConfig(samples=5, reason_tokens=0))
    assert (exs[0].hits, exs[1].hits) == (5, 0)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert exs[0].answer == [a, end]  # kept: the verdict is an SFT target
    assert exs[1].answer == []  # never right: margin loss only


def test_length_batches_cover_every_example_once_with_similar_lengths():
    from rankgym.trainer.judge_train import length_batches

    exs = [Example(str(i), [0] * (10 + 100 * (i % 4)), 1, 2) for i in range(16)]
    batches = length_batches(exs, 4, seed=1)
    assert sorted(i for bt in batches for i in bt) == list(range(16))
    assert all(len({len(exs[i].context) for i in bt}) == 1 for bt in batches)
    assert length_batches(exs, 4, seed=1) == batches != length_batches(exs, 4, seed=2)
