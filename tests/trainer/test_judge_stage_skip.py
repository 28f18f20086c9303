"""The ``[judge_train]`` stage with too little data to check a judge: where a failed check
leaves the judge unused (``reward_when_passed``), it trains none and GRPO keeps the configured
reward and judge; elsewhere a stage without labelled pairs stops with a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rankgym.errors import UserError
from rankgym.store import Store
from rankgym.trainer import judge_stage
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.judge_job import TooFewPairs
from rankgym.trainer.judge_stage_check import MIN_CHECK_PAIRS, MIN_CHECK_TASKS, skipped_check
from rankgym.types import Group, Message, Trajectory


def _config(reward_when_passed: str | None) -> TrainConfig:
    jt: dict[str, Any] = {"reward_when_passed": reward_when_passed} if reward_when_passed else {}
    return TrainConfig.model_validate({
        "judge": {"model": "local/smollm2-yesno"}, "reward": {"kind": "judge+verifiable"},
        "judge_train": jt})  # fmt: skip


def _fake_rollout(tasks: int):
    """A judge-split rollout that writes ``tasks`` groups of one right and one wrong answer."""

    def traj(task: str, text: str, reward: float) -> Trajectory:
        return Trajectory(env_id="e/Env-v0", task_id=task, verifiable_reward=reward, messages=[
            Message(role="user", content=f"What is {task}?"),
            Message(role="assistant", content=text)])  # fmt: skip

    def rollout(cfg, adapter, store: Path, name, seed, progress=False) -> list[dict[str, Any]]:
        store.parent.mkdir(parents=True, exist_ok=True)
        with Store(store) as s:
            s.create_run(name="judge-split", kind="rollout", run_id="judge-split:e/Env-v0")
            for k in range(tasks):
                s.put_group(Group(env_id="e/Env-v0", task_id=f"q{k}", run_id="judge-split:e/Env-v0",
                                  trajectories=[traj(f"q{k}", f"it is {k}", 1.0),
                                                traj(f"q{k}", "no" if k % 2 else "a long wrong and rambling answer", 0.0)]))  # fmt: skip
        return [{"env": "e/Env-v0", "groups": tasks}]

    return rollout


@pytest.fixture
def no_model(monkeypatch):
    """Loading a model fails the test: the stage must stop before any training."""
    import rankgym.model

    def refuse(*_a, **_k):
        raise AssertionError("a judge was trained on too few pairs to check it")

    monkeypatch.setattr(rankgym.model, "load_embedded", refuse)
    monkeypatch.setattr(rankgym.model, "load_causal_lm", refuse)


@pytest.mark.parametrize("tasks", [0, 5])
def test_a_falling_back_stage_trains_no_judge_its_check_could_not_decide(
    tasks: int, tmp_path: Path, monkeypatch, no_model
):
    monkeypatch.setattr(judge_stage, "rollout_judge_data", _fake_rollout(tasks))
    said: list[str] = []
    res = judge_stage.run_judge_train_stage(_config("judge"), tmp_path / "sft", tmp_path, echo=said.append)  # fmt: skip
    check = res["check"]
    assert res["judge"] is None and not check["passed"] and check["enough_evidence"] is False
    assert check["trained"] is False and check["pairwise_accuracy"] is None
    if tasks:  # 3 pairs held out in 3 tasks, 1 to train on: fewer than the 20 a check needs
        assert (check["heldout_pairs"], check["heldout_tasks"]) == (3, 3)
        assert "hold out 3 pairs in 3 tasks and leave 1 to train on" in said[-1]
        assert f"needs {MIN_CHECK_PAIRS} pairs in {MIN_CHECK_TASKS} tasks" in said[-1]  # fmt: skip
    assert said[-1].startswith("judge_train: no judge trained") and "judge_train.group_size" in said[-1]  # fmt: skip
    stage = json.loads((tmp_path / "judge_train" / judge_stage.STAGE_FILE).read_text())
    assert stage["judge"] is None and stage["check"] == check  # a resume decides the same
    assert judge_stage.run_judge_train_stage(_config("judge"), tmp_path / "sft", tmp_path, reuse=True) == stage  # fmt: skip


def test_a_stage_whose_judge_is_used_anyway_stops_on_no_labelled_pair(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(judge_stage, "rollout_judge_data", _fake_rollout(0))
    with pytest.raises(UserError, match=r"\[judge_train\]: the stores hold 0 training and 0 held-out"):  # fmt: skip
        judge_stage.run_judge_train_stage(_config(None), tmp_path / "sft", tmp_path)


def test_grpo_keeps_the_configured_reward_and_judge_when_no_judge_was_trained(
    tmp_path: Path, monkeypatch
):
    from rankgym.trainer import preflight
    from rankgym.trainer.setup import judge_spec

    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "adapter_config.json").write_text("{}")
    checked: list[str] = []
    monkeypatch.setattr(preflight, "judge_preflight", lambda cfg, spec, **_k: checked.append(
        spec.model) or {"decision": "ok"})  # fmt: skip
    cfg = _config("judge")
    e = TooFewPairs("the labelled pairs hold out 3 pairs in 3 tasks", 2, 3, 3)
    skipped = {"judge": None, "check": skipped_check(e, cfg.judge_train), "rollout": []}  # fmt: skip
    monkeypatch.setattr(judge_stage, "run_judge_train_stage", lambda *_a, **_k: skipped)
    said: list[str] = []
    trainer = SimpleNamespace(
        cfg=cfg, spec=judge_spec(cfg), init_adapter=tmp_path / "sft", out=tmp_path, resume=False,
        progress=False, echo=said.append, force=False, judge_check=None,
        dist=SimpleNamespace(main=True, broadcast=lambda o: o))  # fmt: skip
    judge_stage.judge_train_stage(trainer)
    assert trainer.judge_train is skipped
    assert trainer.cfg.reward.kind == "judge+verifiable" and trainer.spec.model == "local/smollm2-yesno"  # fmt: skip
    assert checked == ["local/smollm2-yesno"]  # the usual preflight, on the judge GRPO uses
    assert "the reward stays 'judge+verifiable'" in said[-1] and "no judge trained" in said[-1]
    assert "pairwise None" not in said[-1] and "nan" not in said[-1]
    assert "judge_train.group_size" not in said[-1]  # the advice was said once, by the stage
