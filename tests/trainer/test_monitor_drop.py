"""``[monitor] below_chance = "drop"``: a judge shown below chance leaves a blended reward.

The coin env and the scripted judge are ``test_monitor.py``'s (a real LiteLLM provider, the
production trainer, store and monitor); here the judge inverts the marks from its first call.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from test_monitor import _group, _raw, fake, mark_judge, tiny  # noqa: F401  (fixtures)

from rankgym.config import validate_config
from rankgym.store import Store
from rankgym.trainer.config import MonitorSection, TrainConfig
from rankgym.trainer.demo import demo_config, monitor_fields, monitor_sentence
from rankgym.trainer.loop import Trainer
from rankgym.trainer.monitor import JudgeMonitor
from rankgym.trainer.monitor_step import watch_judge
from rankgym.trainer.rewards import (
    BlendedReward,
    JudgeDroppedReward,
    JudgeReward,
    VerifiableReward,
)


def test_a_blend_without_its_judge_is_the_verifier_alone_and_a_judge_only_reward_has_none():
    lean = BlendedReward(verifiable_weight=0.3, hack_penalty=False).without_judge()
    assert isinstance(lean, JudgeDroppedReward) and lean.needs_judge  # still judged: monitored
    assert lean.blend(0.9, 0.0) == 0.0 and lean.blend(None, 1.0) == 1.0
    assert lean.blend(0.1, None) is None and lean.hack_penalty is False
    assert JudgeReward().without_judge() is None
    assert VerifiableReward().without_judge() is None


def _trainer(reward: Any, below_chance: str, tmp_path) -> tuple[Any, list[str]]:
    """The parts of a Trainer ``watch_judge`` reads (a double: the monitor and store are real)."""
    said: list[str] = []
    settings = MonitorSection(min_pairs=8, min_groups=3, resamples=200, below_chance=below_chance)
    kind = "judge" if reward.judge_only else "judge+verifiable"
    trainer = SimpleNamespace(
        cfg=SimpleNamespace(monitor=settings, reward=SimpleNamespace(kind=kind)),
        monitor=JudgeMonitor(settings, kind),
        store=Store(tmp_path / f"{below_chance}-{kind}.db"),
        reward=reward,
        echo=said.append,
    )
    return trainer, said


ANTI = [_group([1.0, 0.0, 0.0], [0.1, 0.9, 0.8], f"a{i}") for i in range(6)]


def test_watch_judge_drops_once_warns_without_drop_and_cannot_drop_a_judge_only_reward(tmp_path):
    trainer, said = _trainer(BlendedReward(0.8), "drop", tmp_path)
    first = watch_judge(trainer, 0, ANTI[:4])
    assert first["judge_dropped"] and first["judge_below_chance"]
    assert isinstance(trainer.reward, JudgeDroppedReward) and trainer.monitor.dropped_at == 1
    assert len(said) == 1 and "dropped from the reward" in said[0] and "step 1" in said[0]
    later = watch_judge(trainer, 1, ANTI[4:])
    assert later["judge_dropped"] and later["judge_below_chance"] and len(said) == 1  # said once
    assert trainer.monitor.summary()["dropped_at_step"] == 1

    warn, said = _trainer(BlendedReward(0.8), "warn", tmp_path)
    out = watch_judge(warn, 0, ANTI[:4])
    assert "judge_dropped" not in out and isinstance(warn.reward, BlendedReward)
    assert "its share of the reward" in said[0] and "dropped" not in said[0]

    # judge-only with the guard off: nothing would be left to train on, so it only warns
    only, said = _trainer(JudgeReward(), "drop", tmp_path)
    only.monitor.guard_on = False
    out = watch_judge(only, 0, ANTI[:4])
    assert "judge_dropped" not in out and isinstance(only.reward, JudgeReward)
    assert "its share of the reward" in said[0]


def test_a_blended_run_drops_an_anti_correlated_judge_trains_on_the_verifier_and_resumes_so(
    tiny,  # noqa: F811
    fake,  # noqa: F811
    tmp_path,
):
    fake.script = [mark_judge(anti_after=0)]  # inverted from the first call
    said: list[str] = []
    raw = _raw(tiny, tmp_path / "run", steps=2, reward={"kind": "judge+verifiable"})
    raw["monitor"]["below_chance"] = "drop"
    summary = Trainer(validate_config(raw, TrainConfig), progress=False, echo=said.append).run()
    assert summary["steps_run"] == 2 and summary["reward"] == "judge+verifiable"
    assert summary["monitor"]["dropped_at_step"] == 1 and summary["monitor"]["below_chance"]
    dropped = [line for line in said if "dropped from the reward" in line]
    assert len(dropped) == 1 and "step 1:" in dropped[0] and "verifier alone" in dropped[0]
    assert not any("its share of the reward" in line for line in said)  # dropped, not warned
    assert sum("JUDGE DROPPED (verifier only)" in line for line in said) == 2
    assert monitor_fields(summary["monitor"])["judge_dropped_at_step"] == 1
    assert "dropped from the reward at step 1" in monitor_sentence(summary["monitor"])
    with Store(tmp_path / "run" / "store.db", readonly=True) as s:
        rows = [r["metrics"] for r in s.steps(summary["run_id"])]
        judged = [g.judgement for g in s.iter_groups(run_id=summary["run_id"])]
    assert [r["judge_dropped"] for r in rows] == [True, True]
    # the reward is the verifier's alone from the dropping step on; the judge still judged
    assert all(r["reward_mean"] == pytest.approx(r["verifiable_mean"]) for r in rows)
    assert all(r["trained_trajectories"] > 0 for r in rows) and all(judged)
    assert all(r["monitor_pairs"] > 0 for r in rows)  # the monitor kept measuring

    said.clear()
    raw["steps"] = 3
    again = Trainer(validate_config(raw, TrainConfig), progress=False, echo=said.append,
                    resume=True).run()  # fmt: skip
    assert again["start_step"] == 2 and again["monitor"]["dropped_at_step"] == 1
    assert not any("dropped from the reward" in line for line in said)  # dropped before
    with Store(tmp_path / "run" / "store.db", readonly=True) as s:
        last = [r["metrics"] for r in s.steps(again["run_id"])][2]
    assert last["judge_dropped"] and last["reward_mean"] == pytest.approx(last["verifiable_mean"])


def test_the_demo_drops_a_judge_below_chance():
    raw = demo_config("runs/x", steps=1, reward="judge+verifiable", seed=0)
    assert validate_config(raw, TrainConfig).monitor.below_chance == "drop"
    assert MonitorSection().below_chance == "warn"  # `rankgym train` warns unless told
