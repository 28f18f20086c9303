"""Reward types: one class plus its config name, validated from the registry, trained with; the
loop judges with the reward's judge method."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from fakes import LengthJudge
from trainer_helpers import save_tiny_model, tiny_config

from rankgym.config import ConfigError, validate_config
from rankgym.store import Store
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.demo import DEMO
from rankgym.trainer.loop import Trainer
from rankgym.trainer.rewards import (
    REWARDS,
    BlendedReward,
    JudgeReward,
    Reward,
    VerifiableReward,
    build_reward,
    register_reward,
    reward_class,
    reward_names,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def length_reward() -> Iterator[type[Reward]]:
    """A reward type registered for one test: the longest answer of a group wins."""

    @register_reward
    class LengthReward(JudgeReward):  # the judge's score, judged by another method
        name = "test-length"
        judge_only = False
        judge_method = LengthJudge

    yield LengthReward
    del REWARDS["test-length"]


def test_the_built_in_reward_types_are_the_registry_and_the_demo_offers_exactly_them():
    assert reward_names() == ["judge", "verifiable", "judge+verifiable"]
    parser = argparse.ArgumentParser()
    DEMO.add_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == "reward"]
    assert list(action.choices) == reward_names()
    needs = {n: (c.needs_judge, c.judge_only) for n, c in REWARDS.items()}
    assert needs == {
        "judge": (True, True),
        "verifiable": (False, False),
        "judge+verifiable": (True, False),
    }


def test_each_built_in_reward_type_blends_as_its_name_says():
    assert JudgeReward().blend(0.2, 1.0) == 0.2 and JudgeReward().blend(None, 1.0) is None
    assert VerifiableReward().blend(0.2, 1.0) == 1.0
    blended = BlendedReward(verifiable_weight=0.8)
    assert blended.blend(0.5, 1.0) == pytest.approx(0.9) and blended.blend(0.5, None) is None


def test_a_reward_is_built_once_with_the_sections_settings():
    cfg = validate_config({"reward": {"kind": "judge+verifiable", "verifiable_weight": 0.25,
                                      "hack_penalty": False}}, TrainConfig)  # fmt: skip
    r = build_reward(cfg.reward)
    assert isinstance(r, BlendedReward) and (r.verifiable_weight, r.hack_penalty) == (0.25, False)


def test_registering_refuses_an_empty_or_taken_name():
    class Nameless(Reward):
        pass

    class Impostor(Reward):
        name = "judge"

    with pytest.raises(ValueError, match="name is empty"):
        register_reward(Nameless)
    with pytest.raises(ValueError, match="'judge' is taken by JudgeReward"):
        register_reward(Impostor)
    assert reward_class("judge") is JudgeReward


def test_an_unknown_kind_is_refused_naming_every_registered_type(length_reward):
    with pytest.raises(ConfigError) as e:
        validate_config({"reward": {"kind": "human"}}, TrainConfig)
    msg = str(e.value)
    assert "reward.kind" in msg and "(got 'human')" in msg
    assert "allowed values: judge, verifiable, judge+verifiable, test-length" in msg


def test_a_registered_reward_type_validates_and_trains_with_its_judge_method(
    tmp_path: Path, length_reward
):
    model = save_tiny_model(tmp_path / "m")
    raw = tiny_config(model, tmp_path / "run", steps=1, reward={"kind": "test-length"})
    trainer = Trainer(validate_config(raw, TrainConfig), progress=False)
    assert isinstance(trainer.reward, length_reward)
    summary = trainer.run()
    assert summary["reward"] == "test-length" and summary["steps_run"] == 1
    with Store(tmp_path / "run" / "store.db", readonly=True) as s:
        (row,) = s.steps(summary["run_id"])
        groups = list(s.iter_groups(run_id=summary["run_id"]))
    assert row["metrics"]["reward_kind"] == "test-length"
    for g in groups:  # judged by LongestJudge: the longest final answer of each group scores 1
        assert g.judgement is not None and g.judgement.status == "ok"
        scores = g.judgement.score_map()
        longest = max(g.trajectories, key=lambda t: len(t.messages[-1].content or ""))
        assert scores[longest.id] == 1.0 or len(set(scores.values())) == 1


def test_the_judge_check_before_training_checks_the_rewards_own_judge_method(
    tmp_path: Path, length_reward, monkeypatch
):
    from rankgym.trainer import preflight
    from rankgym.trainer.setup import judge_spec

    monkeypatch.setenv("RANKGYM_CACHE", str(tmp_path / "cache"))
    raw = tiny_config(tmp_path / "m", tmp_path / "run", reward={"kind": "test-length"},
                      judge={"check_groups": 2})  # fmt: skip
    cfg = validate_config(raw, TrainConfig)
    report = preflight.judge_preflight(cfg, judge_spec(cfg))
    assert report is not None and report["judged"] == 2 and report["decision"] in ("ok", "warn")
    with Store(preflight.checks_dir() / "judge-check.db", readonly=True) as s:
        calls = [j.calls for j in s.judgements()]
    assert calls and set(calls) == {0}  # LengthJudge made every judgement: no LiteLLM call
    judge_only = cfg.model_copy(update={"reward": cfg.reward.model_copy(update={"kind": "judge"})})
    assert preflight._cache_path(judge_only, judge_spec(cfg), 2) != preflight._cache_path(
        cfg, judge_spec(cfg), 2, length_reward.judge_method
    )


@pytest.fixture
def plugin_rewards(tmp_path: Path, monkeypatch) -> Iterator[list[EntryPoint]]:
    """Entry points of the ``rankgym.rewards`` group, as installed packages would declare them:
    one good reward class, one that is not a Reward, one whose module does not import."""
    from rankgym.trainer import rewards

    (tmp_path / "my_rewards.py").write_text(textwrap.dedent('''
        from rankgym.trainer.rewards import Reward

        class StrictReward(Reward):
            name = "test-strict"
            needs_judge = False

            def blend(self, judge, verifiable):
                return None if verifiable is None else float(verifiable >= 1.0)

        NOT_A_REWARD = 3
    '''))  # fmt: skip
    monkeypatch.syspath_prepend(str(tmp_path))
    group = rewards.ENTRY_POINT_GROUP
    eps = [
        EntryPoint(name="strict", value="my_rewards:StrictReward", group=group),
        EntryPoint(name="number", value="my_rewards:NOT_A_REWARD", group=group),
        EntryPoint(name="gone", value="no_such_module_here:Reward", group=group),
    ]
    monkeypatch.setattr(rewards, "entry_points", lambda group: eps if group == rewards.ENTRY_POINT_GROUP else [])  # fmt: skip
    monkeypatch.setattr(rewards, "_plugins_loaded", False)
    yield eps
    REWARDS.pop("test-strict", None)


def test_an_installed_packages_reward_type_is_a_config_choice_and_broken_ones_are_skipped(
    plugin_rewards, caplog
):
    cfg = validate_config({"reward": {"kind": "test-strict"}}, TrainConfig)  # loads the plugins
    reward = build_reward(cfg.reward)
    assert type(reward).__name__ == "StrictReward" and not reward.needs_judge
    assert reward.blend(0.9, 0.5) == 0.0 and reward.blend(None, 1.0) == 1.0
    assert reward_names()[-1] == "test-strict"
    logged = caplog.text
    assert "'number' failed to load: TypeError" in logged and "not a rankgym" in logged
    assert "'gone' failed to load: ModuleNotFoundError" in logged
