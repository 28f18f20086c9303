"""The trainer's judge preflight: a judge that reads only positions is refused before training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import litellm
import pytest

from rankgym.config import validate_config
from rankgym.errors import UserError
from rankgym.judges.spec import default_spec
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.loop import Trainer
from rankgym.trainer.preflight import decide, judge_preflight

sys.path.insert(0, str(Path(__file__).parents[1] / "judges"))
from judge_fakes import install_fake, labels_in  # noqa: E402
from trainer_helpers import save_tiny_model, tiny_config  # noqa: E402


def position_judge(messages) -> str:
    labels = labels_in(messages)
    n = max(1, len(labels) - 1)
    return json.dumps(
        {"scores": [{"trajectory_id": lab, "score": 1 - k / n} for k, lab in enumerate(labels)]}
    )


@pytest.fixture
def fake(monkeypatch, tmp_path):
    from rankgym.trainer import preflight

    monkeypatch.setattr(preflight, "checks_dir", lambda: tmp_path / "checks")
    f = install_fake()
    f.script = [position_judge]
    yield f
    litellm.custom_provider_map = [
        p for p in litellm.custom_provider_map if p.get("provider") != "fakejudge"
    ]


def _cfg(tmp_path, kind: str) -> TrainConfig:
    raw = tiny_config(tmp_path / "model", tmp_path / "out", steps=1)
    raw["env"]["kwargs"] = {}
    raw["judge"] = {"model": "fakejudge/position", "check_groups": 6, "concurrency": 4}
    raw["reward"] = {"kind": kind}
    return validate_config(raw, TrainConfig)


def test_judge_only_reward_with_a_position_biased_judge_stops_naming_numbers_and_options(
    fake, tmp_path
):
    cfg = _cfg(tmp_path, "judge")
    with pytest.raises(UserError) as e:
        judge_preflight(cfg, default_spec("fakejudge/position"))
    msg = str(e.value)
    assert "kendall_tau" in msg and "position_consistency" in msg and "includes 0" in msg
    assert "--force" in msg and "judge.model" in msg and "judge+verifiable" in msg


def test_the_check_is_cached_by_judge_spec_and_force_trains_anyway(fake, tmp_path):
    cfg = _cfg(tmp_path, "judge")
    with pytest.raises(UserError):
        judge_preflight(cfg, default_spec("fakejudge/position"))
    calls = len(fake.requests)
    report = judge_preflight(cfg, default_spec("fakejudge/position"), force=True)
    assert len(fake.requests) == calls and report["cached"] is True
    assert report["decision"] == "stop" and report["forced"] is True


def test_a_blended_reward_warns_and_goes_on(fake, tmp_path):
    said: list[str] = []
    report = judge_preflight(
        _cfg(tmp_path, "judge+verifiable"), default_spec("fakejudge/position"), echo=said.append
    )
    assert report["decision"] == "warn" and said[-1].startswith("warning:")
    assert report["position_consistency"]["value"] < 0.3


def test_the_trainer_refuses_the_judge_before_writing_anything(fake, tmp_path):
    save_tiny_model(tmp_path / "model")
    cfg = _cfg(tmp_path, "judge")
    with pytest.raises(UserError, match="--force"):
        Trainer(cfg).setup()
    assert not (tmp_path / "out" / "run.json").exists()


def test_decide_without_numbers_warns():
    level, msg = decide({"judge": "j", "env": "e", "kendall_tau": {"value": None}}, "judge")
    assert level == "warn" and "too few" in msg
