"""Every number of the train, sft and judge-train configs and flags is finite and in a stated range;
a non-finite loss, gradient or weight stops training before anything is saved (issue 26)."""

from __future__ import annotations

import math
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from trainer_helpers import install_fake_judge, save_tiny_model, tiny_config

from rankgym.cli import main
from rankgym.config import ConfigError, parse_config, validate_config
from rankgym.errors import UserError
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.finite import NonFiniteTraining, check_update

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _numeric_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, FieldInfo) of every int/float field under ``model``, sections included."""
    out = []
    for name, f in model.model_fields.items():
        args = [a for a in (f.annotation, *typing.get_args(f.annotation)) if a is not type(None)]
        sub = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if sub:
            out += _numeric_fields(sub[0], f"{prefix}{name}.")
        elif any(a in (int, float) for a in args) and f.annotation is not bool:
            out.append((f"{prefix}{name}", f))
    return out


def _bounds(f: Any) -> tuple[bool, bool]:
    low = any(isinstance(m, (annotated_types.Ge, annotated_types.Gt)) for m in f.metadata)
    high = any(isinstance(m, (annotated_types.Le, annotated_types.Lt)) for m in f.metadata)
    return low, high


def test_every_number_of_the_train_config_states_its_range():
    fields = _numeric_fields(TrainConfig)
    assert len(fields) > 40  # the walk reaches every section
    unbounded = [k for k, f in fields if _bounds(f) != (True, True)]
    assert not unbounded, f"give these a Field(ge=..., le=...): {unbounded}"


FINITE = "numbers must be finite"


@pytest.mark.parametrize(
    ("toml", "key", "why"),
    [
        ("[optim]\nlr = inf\n", "optim.lr", FINITE),
        ("[loss]\nepsilon = inf\n", "loss.epsilon", FINITE),
        ("[loss]\nbeta = inf\n", "loss.beta", FINITE),
        ("[loss]\nbeta = nan\n", "loss.beta", FINITE),
        ("[sft]\nlr = -inf\n", "sft.lr", FINITE),
        ("[env]\nkwargs = {scale = nan}\n", "env.kwargs.scale", FINITE),
        ("[optim]\nbetas = [0.9, inf]\n", "optim.betas.1", FINITE),
        # numbers outside their stated range
        ("[lora]\nr = 1000000\n", "lora.r", ""),
        ('out_dir = ""\n', "out_dir", ""),
        ('store = ""\n', "store", ""),
        ("[optim]\nlr = 5.0\n", "optim.lr", ""),
        ("[optim]\nbetas = [0.9, 1.5]\n", "optim.betas.1", ""),
        ("[optim]\nnum_iterations = 1000\n", "optim.num_iterations", ""),
        ("seed = -1\n", "seed", ""),
    ],
)
def test_inf_nan_and_numbers_outside_their_range_are_refused_naming_the_key(
    toml: str, key: str, why: str
):
    with pytest.raises(ConfigError, match=f"'{key}'" + (f": {why}" if why else "")):
        parse_config(toml, TrainConfig, source="t.toml")


def test_a_config_built_in_python_refuses_inf_too():
    from rankgym.trainer.config import OptimSection

    with pytest.raises(ValueError, match="finite"):
        OptimSection(lr=float("inf"))


@settings(max_examples=150, deadline=None)
@given(
    section=st.sampled_from(["optim", "loss", "sft", "policy", "eval", "lora", "env"]),
    key=st.sampled_from(["lr", "epsilon", "beta", "temperature", "r", "max_grad_norm", "steps"]),
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(2**70), max_value=2**70),
    ),
)
def test_fuzzed_config_numbers_load_in_range_or_fail_with_a_config_error(
    section: str, key: str, value: float
):
    data: dict[str, Any] = {section: {key: value}}
    if section == "sft":
        data["sft"]["source"] = "oracle"
    try:
        cfg = validate_config(data, TrainConfig)
    except ConfigError as e:
        assert "\n" not in str(e)
        return
    got = getattr(getattr(cfg, section), key)
    assert isinstance(got, (int, float)) and math.isfinite(got)


def test_sft_flags_inf_are_refused_before_any_work(tmp_path: Path, capsys):
    rc = main(["sft", "--out", str(tmp_path / "o"), "--lr", "inf", "-q"])
    assert rc == 2
    assert "sft.lr" in capsys.readouterr().err and not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--gamma", "nan"),
        ("--lr", "inf"),
        ("--lambda-margin", "-inf"),
        ("--max-train-pairs", "-5"),
        ("--max-heldout-pairs", "0"),
        ("--min-gap", "nan"),
        ("--max-train-seconds", "inf"),
        ("--lora-r", "1000000"),
        ("--reason-tokens", "-1"),
    ],
)
def test_judge_train_flags_out_of_range_are_one_line_errors(
    tmp_path: Path, capsys, flag: str, value: str
):
    out = tmp_path / "jt"
    rc = main(["judge-train", "--store", str(tmp_path / "s.db"), "--out", str(out), f"{flag}={value}"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and flag in err and "finite number in" in err
    assert not out.exists()


def test_check_update_names_the_stage_and_step_and_what_was_not_finite():
    w = torch.ones(10)
    check_update("train", 1, loss=0.5, grad_norm=1.0, params=[w])
    w[3] = float("nan")
    with pytest.raises(NonFiniteTraining, match=r"train step 4: non-finite 1 of 10 trainable"):
        check_update("train", 4, loss=0.5, params=[w])
    with pytest.raises(NonFiniteTraining, match=r"sft step 2: non-finite loss nan, gradient"):
        check_update("sft", 2, loss=float("nan"), grad_norm=float("inf"))


def _unchecked(cfg: TrainConfig, section: str, **values: float) -> TrainConfig:
    """``cfg`` with ``values`` set without validation: what a bug upstream would hand over."""
    sub = getattr(cfg, section).model_copy(update=values)
    return cfg.model_copy(update={section: sub})


def test_an_infinite_learning_rate_stops_grpo_at_step_one_before_any_adapter(tmp_path: Path):
    from rankgym.trainer.loop import Trainer

    install_fake_judge()
    model_dir = save_tiny_model(tmp_path / "tiny")
    cfg = validate_config(tiny_config(model_dir, tmp_path / "run", steps=2), TrainConfig)
    trainer = Trainer(_unchecked(cfg, "optim", lr=float("inf")), progress=False)
    with pytest.raises(NonFiniteTraining, match="train step 1: non-finite"):
        trainer.run()
    trainer.store.close()
    run = tmp_path / "run"
    assert not (run / "adapter").exists() and not list(run.glob("checkpoints/step-*"))


def test_an_infinite_learning_rate_stops_sft_before_the_adapter_is_written(tmp_path: Path):
    from peft import LoraConfig, get_peft_model
    from trainer_helpers import tiny_model

    from rankgym.envs.policies import TransformersPolicy
    from rankgym.trainer.setup import make_env_factory
    from rankgym.trainer.sft import oracle_conversations, render_rows, sft_train

    model, tok = tiny_model(seed=2)
    convs = oracle_conversations(
        make_env_factory("rankgym/ToolUse-v0", {"difficulty": "easy", "families": ["calc"]}), 2
    )
    rows = render_rows(TransformersPolicy(model, tok), convs)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"], task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lora)
    with pytest.raises(NonFiniteTraining, match="sft step 1"):
        sft_train(peft_model, rows, pad_id=tok.pad_token_id, steps=3, lr=float("inf"), warmup_steps=0)  # fmt: skip


def test_a_nan_margin_stops_judge_training_before_a_checkpoint(tmp_path: Path):
    from trainer_helpers import tiny_model

    from rankgym.trainer.judge_train import Example, JudgeTrainConfig, add_lora, train_judge

    model, tok = tiny_model(seed=4)
    cfg = JudgeTrainConfig(gamma=float("nan"), batch_size=2, epochs=1, checkpoint_every=1, bf16=False)  # fmt: skip
    examples = [Example(f"e{i}", context=[5, 6, 7 + i], correct=11, wrong=12, answer=[11, 2]) for i in range(4)]  # fmt: skip
    with pytest.raises(NonFiniteTraining, match="judge-train step 1: non-finite loss nan"):
        train_judge(add_lora(model, cfg), tok, examples, cfg, tmp_path, "fp", progress=False)
    assert not (tmp_path / "checkpoint").exists()


def test_a_new_numeric_judge_train_flag_without_a_stated_range_still_gets_one():
    import argparse

    from rankgym.trainer import judge_train_command as jtc

    p = argparse.ArgumentParser()
    jtc.JUDGE_TRAIN.add_arguments(p)
    args = p.parse_args(["--out", "o"])
    args.brand_new_knob = float("inf")
    with pytest.raises(
        UserError, match=r"--brand-new-knob must be a finite number in \[0, 1e\+09\]"
    ):
        jtc._check(args)
