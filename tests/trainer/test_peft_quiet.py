"""peft's read of transformers' deprecated ``is_gradient_checkpointing`` stays out of the log."""

from __future__ import annotations

import warnings

import pytest
from trainer_helpers import tiny_model

from rankgym.model import enable_checkpointing
from rankgym.trainer.judge_train import JudgeTrainConfig, add_lora

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_judge_lora_on_a_checkpointed_model_warns_nothing_about_checkpointing():
    model, _ = tiny_model(seed=0)
    enable_checkpointing(model)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        add_lora(model, JudgeTrainConfig(lora_r=4, lora_alpha=8, lora_layers=None))
    assert not [w for w in seen if "is_gradient_checkpointing" in str(w.message)]
    with warnings.catch_warnings(record=True) as seen:  # the filter ends with the block
        warnings.simplefilter("always")
        warnings.warn("`is_gradient_checkpointing` is deprecated", FutureWarning, stacklevel=1)
    assert len(seen) == 1
