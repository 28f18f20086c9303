"""`rankgym demo --chain-credit C`: the demo's GRPO env pays ToolUse's chain credit."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.cli import main
from rankgym.config import validate_config
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.demo import (
    DEFAULT_CHAIN_CREDIT,
    GRPO_ENV_KWARGS,
    _chain_credit,
    _demo_arguments,
    demo_config,
)
from rankgym.trainer.setup import make_env_factory


@pytest.mark.parametrize("judge_train", [False, True])
def test_the_credit_reaches_the_env_grpo_trains_on(tmp_path, judge_train):
    before = dict(GRPO_ENV_KWARGS)
    raw = demo_config(str(tmp_path / "run"), 6, "judge+verifiable", 0, judge_train=judge_train,
                      chain_credit=0.3)  # fmt: skip
    cfg = validate_config(raw, TrainConfig)
    env = make_env_factory(cfg.env.id, cfg.env.kwargs)()
    assert env.unwrapped.chain_credit == 0.3
    assert cfg.sft.env_kwargs["chain_credit"] == 0.3  # the same tasks as GRPO's, as without it
    assert env.unwrapped.judge_split is judge_train  # the split rule is unchanged
    assert before == GRPO_ENV_KWARGS  # the module's defaults are not edited in place


def test_without_the_flag_the_reward_is_the_plain_one(tmp_path):
    raw = demo_config(str(tmp_path / "run"), 6, "judge+verifiable", 0)
    assert "chain_credit" not in raw["env"]["kwargs"]


@pytest.mark.parametrize("bad", ["0.8", "-0.1", "lots"])
def test_a_credit_out_of_range_is_refused_before_anything_runs(capsys, bad):
    with pytest.raises(SystemExit) as e:
        main(["demo", "--chain-credit", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--chain-credit" in err and ("[0, 0.8)" in err or "not a number" in err)


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(st.text(max_size=12), st.floats(allow_nan=True).map(repr)))
def test_any_text_is_a_credit_in_range_or_a_clear_refusal(text):
    try:
        value = _chain_credit(text)
    except argparse.ArgumentTypeError as e:
        assert "not a number" in str(e) or "must be in [0, 0.8)" in str(e)
    else:
        assert 0.0 <= value < 0.8


def test_the_demo_pays_chain_credit_by_default_and_0_gives_the_plain_reward():
    p = argparse.ArgumentParser()
    _demo_arguments(p)
    assert p.parse_args([]).chain_credit == DEFAULT_CHAIN_CREDIT == 0.3
    assert p.parse_args(["--chain-credit", "0"]).chain_credit == 0.0
