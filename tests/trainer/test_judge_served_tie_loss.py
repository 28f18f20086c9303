"""The served tie loss: ties pulled to even odds on the order-averaged score that serving reads."""

from __future__ import annotations

import argparse
import math
import random

import pytest
import torch
from trainer_helpers import tie_pair, tiny_model

from rankgym.trainer.judge_loss import TIE_LOSSES, pair_losses, tie_partners
from rankgym.trainer.judge_pipeline import examples_of
from rankgym.trainer.judge_train import (
    Example,
    JudgeTrainConfig,
    add_lora,
    build_batch,
    length_batches,
    train_judge,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tie_batch() -> dict:
    exs = [Example("p:1", [1], 11, 12, tie=True), Example("p:0", [2], 11, 12, tie=True)]
    return build_batch(exs, pad_id=0)


def _sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_a_pure_position_bias_costs_nothing_served_but_costs_per_presentation():
    b = _tie_batch()
    assert b["tie_partner"].tolist() == [1, 0]
    bias = torch.tensor([1.5, 1.5])  # P(first) = 0.82 in both orders: served P is 0.5
    served = pair_losses(bias, b, gamma=2.0, tie_loss="served")
    assert float(served["tie"]) == pytest.approx(0.0, abs=1e-6)
    assert float(served["tie_served_dev"]) == pytest.approx(0.0, abs=1e-6)
    assert float(pair_losses(bias, b, gamma=2.0)["tie"]) > 0.1


def test_a_content_lean_costs_the_bce_of_the_order_averaged_probability():
    b = _tie_batch()
    lean = torch.tensor([1.5, -0.5])  # X first: P(X) = s(1.5); Y first: P(Y) = s(-0.5)
    p = (_sig(1.5) + 1 - _sig(-0.5)) / 2
    want = -0.5 * (math.log(p) + math.log(1 - p)) - math.log(2.0)
    out = pair_losses(lean, b, gamma=2.0, tie_loss="served")
    assert float(out["tie"]) == pytest.approx(want, abs=1e-6)
    assert float(out["tie_served_dev"]) == pytest.approx(p - 0.5, abs=1e-6)
    flipped = pair_losses(-lean.flip(0), b, gamma=2.0, tie_loss="served")  # Y leaned to instead
    assert float(flipped["tie"]) == pytest.approx(want, abs=1e-6)


def test_served_logit_is_zero_on_a_position_bias_and_the_bce_of_half_the_gap_difference():
    b = _tie_batch()
    bias = pair_losses(torch.tensor([2.5, 2.5]), b, gamma=2.0, tie_loss="served-logit")
    assert float(bias["tie"]) == pytest.approx(0.0, abs=1e-6)
    d = (1.5 - -0.5) / 2
    want = -0.5 * (math.log(_sig(d)) + math.log(_sig(-d))) - math.log(2.0)
    lean = pair_losses(torch.tensor([1.5, -0.5]), b, gamma=2.0, tie_loss="served-logit")
    assert float(lean["tie"]) == pytest.approx(want, abs=1e-6)


def test_a_position_bias_flattens_the_served_gradient_on_a_lean_but_not_the_served_logit_one():
    b = _tie_batch()

    def lean_grad(mode: str, c: float, d: float = 0.4) -> float:
        g = torch.tensor([c + d, c - d], requires_grad=True)
        pair_losses(g, b, 2.0, tie_loss=mode)["tie"].backward()  # type: ignore[arg-type]
        return float(g.grad[0] - g.grad[1])

    assert lean_grad("served", 0.0) == pytest.approx(lean_grad("served-logit", 0.0), rel=1e-4)
    assert lean_grad("served-logit", 2.2) == pytest.approx(lean_grad("served-logit", 0.0), rel=1e-4)  # fmt: skip
    assert lean_grad("served", 2.2) < 0.2 * lean_grad("served-logit", 2.2)


def test_a_tie_row_without_its_partner_falls_back_to_the_presentation_loss():
    exs = [Example("p:1", [1], 11, 12, tie=True), Example("d:1", [2], 11, 12)]
    b = build_batch(exs, pad_id=0)
    assert b["tie_partner"].tolist() == [-1, -1]
    g = torch.tensor([2.0, 0.5])
    served, logit, per = (pair_losses(g, b, 2.0, m)["tie"] for m in ("served", "served-logit", "presentation"))  # fmt: skip
    assert float(served) == pytest.approx(float(per)) == float(logit) and float(per) > 0


def test_an_unknown_tie_loss_is_an_error_naming_the_choices(tmp_path):
    with pytest.raises(ValueError, match="presentation, served, served-logit"):
        pair_losses(torch.zeros(2), _tie_batch(), 2.0, tie_loss="order")  # type: ignore[arg-type]
    model, tok = tiny_model(seed=0)
    cfg = JudgeTrainConfig(tie_loss="order", bf16=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tie_loss"):
        train_judge(add_lora(model, cfg), tok, [Example("a:1", [5], 11, 12)], cfg, tmp_path, "f", progress=False)  # fmt: skip


def test_the_command_and_the_config_take_exactly_the_libraries_tie_losses():
    from pydantic import ValidationError

    from rankgym.trainer import judge_train_command as jtc
    from rankgym.trainer.config import JudgeTrainSection

    assert set(jtc.TIE_LOSS_CHOICES) == set(TIE_LOSSES)
    p = argparse.ArgumentParser()
    jtc.JUDGE_TRAIN.add_arguments(p)
    assert jtc._job(p.parse_args(["--out", "o", "--tie-loss", "served"])).train.tie_loss == "served"
    assert jtc._job(p.parse_args(["--out", "o"])).train.tie_loss == "presentation"
    with pytest.raises(SystemExit):
        p.parse_args(["--out", "o", "--tie-loss", "order"])
    assert JudgeTrainSection(tie_loss="served").tie_loss == "served"
    with pytest.raises(ValidationError, match="tie_loss"):
        JudgeTrainSection(tie_loss="order")


def _mixed(n_ties: int, n_decided: int, seed: int) -> list[Example]:
    rng = random.Random(seed)
    exs = []
    for k in range(n_ties):
        n = rng.randint(3, 40)
        exs += [Example(f"t{k}:{o}", [1] * (n + o), 11, 12, tie=True) for o in (1, 0)]
    exs += [Example(f"d{k}:1", [1] * rng.randint(3, 40), 11, 12) for k in range(n_decided)]
    rng.shuffle(exs)
    return exs


@pytest.mark.parametrize("batch_size", [1, 2, 3, 8])
def test_keep_pairs_puts_both_orders_of_every_tie_pair_in_one_batch(batch_size):
    for seed in range(5):
        exs = _mixed(9, 7, seed)
        batches = length_batches(exs, batch_size, seed, keep_pairs=True)
        assert sorted(i for b in batches for i in b) == list(range(len(exs)))
        assert all(len(b) <= max(batch_size, 2) for b in batches)
        for b in batches:
            partners = tie_partners([exs[i] for i in b])
            assert all(p >= 0 for p, i in zip(partners, b, strict=True) if exs[i].tie)


def test_without_keep_pairs_the_batches_are_the_earlier_versions_row_for_row():
    exs = _mixed(9, 7, 0)

    def earlier(batch_size: int, seed: int) -> list[list[int]]:  # length_batches before 'served'
        rng = random.Random(seed)
        keyed = sorted(range(len(exs)), key=lambda i: len(exs[i].context) * (1 + 0.2 * rng.random()))  # fmt: skip
        bs = [keyed[i : i + batch_size] for i in range(0, len(keyed), batch_size)]
        rng.shuffle(bs)
        return bs

    for seed in range(3):
        assert length_batches(exs, 4, seed) == earlier(4, seed)


def test_served_training_moves_a_tie_pairs_order_averaged_p_to_even_not_each_order(tmp_path):  # fmt: skip
    model, tok = tiny_model(seed=1)
    cfg = JudgeTrainConfig(epochs=60, lr=1e-2, batch_size=2, lora_r=16, lora_alpha=32,
                           lora_layers=None, lambda_sft=0.0, bf16=False, checkpoint_every=1000)  # fmt: skip
    tie = tie_pair()
    exs, _ = examples_of(tok, [tie], cfg)
    x_first = next(e for e in exs if e.key.endswith(":1"))
    y_first = next(e for e in exs if e.key.endswith(":0"))
    model = add_lora(model, cfg)

    def p_a() -> tuple[float, float]:  # P(A wins) with X first, with Y first
        b = build_batch([x_first, y_first], tok.pad_token_id)
        with torch.no_grad():
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                           position_ids=b["position_ids"]).logits  # fmt: skip
        rows = torch.arange(2)
        at = torch.log_softmax(logits[rows, b["decision"] - 1].float(), -1)
        g = (at[rows, b["correct"]] - at[rows, b["wrong"]]).tolist()
        return _sig(g[0]), _sig(g[1])

    # teach a content lean: X wins in both orders (as decided presentations)
    teach = [Example("x", x_first.context, x_first.correct, x_first.wrong),
             Example("y", y_first.context, y_first.wrong, y_first.correct, weight=0.5)]  # fmt: skip
    train_judge(model, tok, teach, cfg, tmp_path / "w1", "d", progress=False)
    px, py = p_a()
    assert (px + 1 - py) / 2 > 0.65  # the served score prefers X
    served = JudgeTrainConfig(**{**cfg.__dict__, "epochs": 30, "tie_loss": "served"})
    train_judge(model, tok, exs, served, tmp_path / "w2", "t", progress=False)
    px, py = p_a()
    assert abs((px + 1 - py) / 2 - 0.5) < 0.02  # the served score is even ...
    # ... while each order still favours the same slot, A or B: a position bias (which slot
    # depends on the CPU's float rounding: "A" on the AVX2 boxes, "B" on an AMX one)
    assert abs(px - 0.5) > 0.1 and abs(py - 0.5) > 0.1 and (px - 0.5) * (py - 0.5) > 0


def test_on_a_content_lean_and_a_position_bias_served_descent_removes_only_the_lean():
    b = _tie_batch()
    for mode, bias_left in (("served", True), ("served-logit", True), ("presentation", False)):
        lean = torch.tensor(1.0, requires_grad=True)  # X over Y whichever is first
        bias = torch.tensor(1.0, requires_grad=True)  # "A" whichever is shown
        opt = torch.optim.SGD([lean, bias], lr=2.0)
        for _ in range(300):
            gaps = torch.stack([bias + lean, bias - lean])  # X first, Y first (both: logp A - B)
            loss = pair_losses(gaps, b, 2.0, tie_loss=mode)["tie"]  # type: ignore[arg-type]
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert abs(float(lean)) < 0.05
        assert float(bias) > 0.5 if bias_left else abs(float(bias)) < 0.05


def test_a_job_with_an_unknown_tie_loss_is_a_one_line_user_error(tmp_path):
    from rankgym.errors import UserError
    from rankgym.trainer.judge_pipeline import JudgeTrainJob, check_job

    store = tmp_path / "s.db"
    store.write_bytes(b"")
    job = JudgeTrainJob(tmp_path / "o", stores=[str(store)], train=JudgeTrainConfig(tie_loss="x"))  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(UserError, match="tie_loss must be presentation, served or served-logit"):
        check_job(job)
