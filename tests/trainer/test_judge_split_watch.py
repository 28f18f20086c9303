"""The judge split watched through a judge-only run: a ``judge_split`` refresh compares the
policy's verifier reward on tasks GRPO never draws with the SFT start's, and the guard stops
a run whose policy is shown worse there, before that refresh trains a judge."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trainer_helpers import runs_page

from rankgym.store import Store
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.judge_split_watch import split_drift, split_fields, task_rewards
from rankgym.types import Group, Message, Trajectory

ENV = TrainConfig().env.id
RUN = f"judge-split:{ENV}"


def _rollout(path: Path, rewards: dict[str, list[float | None]]) -> Path:
    """A judge-split rollout store: one group per task with these verifier rewards."""
    with Store(path) as s:
        s.create_run(name=RUN, run_id=RUN)
        for task, rs in rewards.items():
            trajs = [Trajectory(env_id=ENV, task_id=task, verifiable_reward=r,
                                messages=[Message(role="assistant", content=f"{task} {i}")])
                     for i, r in enumerate(rs)]  # fmt: skip
            s.put_group(Group(run_id=RUN, env_id=ENV, task_id=task, trajectories=trajs))
    return path


def test_the_same_rewards_do_not_drift_and_a_collapse_is_shown_lower():
    start = {f"t{k}": [1.0, 0.0, 1.0, 0.0] for k in range(10)}
    same = split_drift(start, dict(start))
    assert same is not None and same.diff == 0.0 and same.ci == (0.0, 0.0)
    assert not same.lower_shown
    worse = split_drift(start, {t: [0.0] * 4 for t in start})
    assert worse is not None and worse.start == 0.5 and worse.now == 0.0
    assert worse.diff == -0.5 and worse.lower_shown and worse.tasks == 10


def test_only_tasks_both_rollouts_have_are_compared():
    start = {"a": [1.0], "b": [0.0], "c": [1.0, 1.0], "gone": [1.0]}
    now = {"a": [0.0], "b": [0.0, 1.0], "c": [1.0], "new": [0.0]}
    d = split_drift(start, now)
    assert d is not None and d.tasks == 3 and d.episodes == (4, 4)
    assert d.diff == pytest.approx(((0 - 1) + (0.5 - 0) + (1 - 1)) / 3)
    assert split_drift({"a": [1.0]}, {"a": [0.0]}) is None  # one task: nothing to resample


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=4),
                  st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=1, max_size=4)),
        min_size=2, max_size=12,
    )
)  # fmt: skip
def test_swapping_the_rollouts_mirrors_the_drift(pairs):
    start = {f"t{k}": a for k, (a, _) in enumerate(pairs)}
    now = {f"t{k}": b for k, (_, b) in enumerate(pairs)}
    d, back = split_drift(start, now, seed=3), split_drift(now, start, seed=3)
    assert d is not None and back is not None
    assert back.diff == pytest.approx(-d.diff) and d.diff == pytest.approx(d.now - d.start)
    assert back.ci == pytest.approx((-d.ci[1], -d.ci[0]))
    assert d.ci[0] <= d.ci[1] and not (d.lower_shown and back.lower_shown)


def test_an_episode_without_a_verifier_reward_counts_as_a_failure(tmp_path: Path):
    db = _rollout(tmp_path / "r.db", {"a": [1.0, None], "b": [0.5]})
    assert task_rewards(db, RUN) == {"a": [1.0, 0.0], "b": [0.5]}
    assert task_rewards(db, "another-run") == {}


def _fake_trainer(tmp_path: Path, guard: bool, said: list[str]) -> SimpleNamespace:
    cfg = TrainConfig.model_validate({
        "steps": 3, "store": str(tmp_path / "train.db"),
        "judge_train": {"refresh_every": 1, "refresh_data": "judge_split"},
    })  # fmt: skip
    dist = SimpleNamespace(main=True, broadcast=lambda obj: obj)
    return SimpleNamespace(
        cfg=cfg, spec=SimpleNamespace(model="local/smollm2@judge"), dist=dist, run_id="r",
        out=tmp_path, echo=said.append, judge_train=None, judge_check=None,
        monitor=SimpleNamespace(guard_on=guard),
    )  # fmt: skip


def _refresh_doubles(monkeypatch, tmp_path: Path, trained: list[bool]) -> None:
    """The stage's rollout succeeded on every task; the policy now fails them all."""
    from rankgym.errors import UserError
    from rankgym.trainer import checkpoint, judge_refresh

    tasks = [f"task-{k}" for k in range(8)]
    _rollout(tmp_path / "judge_train" / "data" / "rollout.db", {t: [1.0, 1.0] for t in tasks})

    def rollout_now(_cfg, _adapter, db, *_a, **_k):
        _rollout(db, {t: [0.0, 0.0] for t in tasks})
        return [{"env": ENV, "groups": len(tasks)}]

    def train(_job):
        trained.append(True)
        raise UserError("judge-train: stopped here by the test")

    monkeypatch.setattr(judge_refresh, "_judge_adapter", lambda _j: tmp_path / "judge")
    monkeypatch.setattr(judge_refresh, "_rollout_now", rollout_now)
    monkeypatch.setattr(judge_refresh, "run_judge_train", train)
    monkeypatch.setattr(checkpoint, "latest_checkpoint", lambda _out: tmp_path / "step-1")


def test_the_guard_stops_a_run_whose_policy_fails_the_judge_split_before_training_a_judge(
    monkeypatch, tmp_path: Path
):
    from rankgym.trainer.judge_refresh import REFRESH_FILE, maybe_refresh
    from rankgym.trainer.monitor import JudgeGuardStop

    trained: list[bool] = []
    _refresh_doubles(monkeypatch, tmp_path, trained)
    said: list[str] = []
    fake = _fake_trainer(tmp_path, guard=True, said=said)
    with pytest.raises(JudgeGuardStop) as e:
        maybe_refresh(fake, 0)
    msg = str(e.value)
    assert "1.00 at the start, 0.00 after step 1 (-1.00, 99% interval" in msg and "8 tasks" in msg
    assert "teaching it to fail" in msg and 'guard = "off"' in msg
    assert e.value.report["reason"] == "judge_split_lower"
    assert e.value.report["judge_split"]["lower_shown"] is True
    assert not trained  # no judge trained for a run that stops
    assert not (tmp_path / "judge_train" / REFRESH_FILE).exists()
    assert any("shown LOWER" in m for m in said)


def test_with_the_guard_off_the_drift_is_reported_and_the_refresh_goes_on(
    monkeypatch, tmp_path: Path
):
    from rankgym.trainer.judge_refresh import maybe_refresh

    trained: list[bool] = []
    _refresh_doubles(monkeypatch, tmp_path, trained)
    said: list[str] = []
    maybe_refresh(_fake_trainer(tmp_path, guard=False, said=said), 0)
    assert trained == [True]  # the refresh trained (and the test double failed it)
    (line,) = [m for m in said if m.startswith("judge split")]
    assert "shown LOWER" in line
    assert "refresh after step 1 failed" in said[-1]


def test_a_finished_refresh_records_its_judge_split_numbers(tmp_path: Path):
    from rankgym.trainer.judge_refresh import _record_refresh, refreshes

    drift = split_drift({"a": [1.0], "b": [0.0]}, {"a": [1.0], "b": [1.0]})
    assert drift is not None
    _record_refresh(tmp_path, 1, {"judge": "local/smollm2@x", "check": {"passed": True},
                                  "judge_split": drift.to_dict()})  # fmt: skip
    (row,) = refreshes(tmp_path)
    assert row["judge_split"]["now"] == 1.0 and row["judge_split"]["lower_shown"] is False
    assert json.loads(json.dumps(row)) == row


def test_watch_is_due_every_k_steps_except_where_a_judge_split_refresh_compares_anyway():
    from rankgym.trainer.judge_refresh import watch_due

    def cfg(**jt):
        return TrainConfig.model_validate({"steps": 6, "judge_train": jt})

    assert [watch_due(cfg(watch_every=2), k) for k in range(6)] == [
        False,
        True,
        False,
        True,
        False,
        False,
    ]  # fmt: skip (none after the last step)
    both = cfg(watch_every=1, refresh_every=2, refresh_data="judge_split")
    assert [watch_due(both, k) for k in range(5)] == [True, False, True, False, True]
    run_refresh = cfg(watch_every=1, refresh_every=2)  # a "run" refresh rolls nothing out
    assert all(watch_due(run_refresh, k) for k in range(5))
    assert not any(watch_due(cfg(), k) for k in range(6))


def test_a_watch_rolls_out_compares_and_stops_without_training_a_judge(monkeypatch, tmp_path: Path):
    from rankgym.trainer.judge_refresh import maybe_refresh
    from rankgym.trainer.judge_split_watch import watched
    from rankgym.trainer.monitor import JudgeGuardStop

    trained: list[bool] = []
    _refresh_doubles(monkeypatch, tmp_path, trained)
    said: list[str] = []
    fake = _fake_trainer(tmp_path, guard=True, said=said)
    fake.cfg = fake.cfg.model_copy(update={"judge_train": fake.cfg.judge_train.model_copy(
        update={"refresh_every": 0, "watch_every": 1})})  # fmt: skip
    with pytest.raises(JudgeGuardStop) as e:
        maybe_refresh(fake, 0)
    assert "after step 1" in str(e.value) and not trained
    assert (tmp_path / "judge_train" / "data" / "watch-1.db").is_file()
    (row,) = watched(tmp_path)
    assert row["after_step"] == 1 and row["by"] == "watch" and row["judge_split"]["now"] == 0.0
    assert fake.spec.model == "local/smollm2@judge"  # the judge is not switched by a watch
    said.clear()
    off = _fake_trainer(tmp_path, guard=False, said=said)
    off.cfg = fake.cfg
    maybe_refresh(off, 1)  # guard off: reported, the run goes on
    assert any("shown LOWER" in m for m in said) and not trained
    assert [r["after_step"] for r in watched(tmp_path)] == [1, 2]


def test_rankgym_train_stops_on_a_watch_that_shows_the_policy_worse(
    monkeypatch, tmp_path: Path, capsys
):
    """End to end on the tiny model: the [judge_train] stage, one GRPO step, a watch rollout on
    the judge split; the comparison is forced to a collapse (the tiny policy solves nothing,
    so it cannot fall), and the run stops with exit code 2, its numbers and the last adapter."""
    from trainer_helpers import (
        install_fake_judge,
        labelled_store,
        save_tiny_model,
        tiny_config,
        to_toml,
    )

    from rankgym.cli import main
    from rankgym.trainer import judge_split_watch

    real = judge_split_watch.split_drift
    collapsed = {f"t{k}": [1.0] for k in range(6)}, {f"t{k}": [0.0] for k in range(6)}

    def drift(start, now, **kw):
        assert set(start) == set(now) and len(start) >= 2  # the same judge-split tasks
        return real(*collapsed, **kw)

    monkeypatch.setattr(judge_split_watch, "split_drift", drift)
    install_fake_judge()
    out = tmp_path / "run"
    raw = tiny_config(save_tiny_model(tmp_path / "tiny"), out, steps=3)
    raw["reward"] = {"kind": "judge+verifiable"}
    raw["monitor"] = {"guard": "on"}
    raw["sft"] = {"steps": 2, "batch_size": 2, "tasks": 4}
    raw["judge_train"] = {"tasks": 2, "group_size": 2, "max_turns": 1, "epochs": 1,
                          "max_train_pairs": 6, "max_heldout_pairs": 3, "watch_every": 1,
                          "stores": [str(labelled_store(tmp_path / "labels.db"))]}  # fmt: skip
    cfg = tmp_path / "train.toml"
    cfg.write_text(to_toml(raw))
    assert main(["train", "--config", str(cfg), "--out", str(out), "-q", "--force"]) == 2
    err = capsys.readouterr().err
    assert "teaching it to fail" in err and "after step 1" in err
    report = json.loads((out / "guard_stop.json").read_text())
    assert report["reason"] == "judge_split_lower" and report["after_step"] == 1
    assert (out / "adapter" / "adapter_config.json").is_file()  # step 1's adapter kept
    assert (out / "judge_train" / "data" / "watch-1.db").is_file()
    with Store(out / "store.db", readonly=True) as s:
        assert [r["step"] for r in s.steps(s.runs()[0]["id"])] == [0]  # step 2 never ran


def test_the_runs_page_charts_the_judge_split_and_says_when_the_policy_fell(
    tmp_path: Path, monkeypatch
):
    path = tmp_path / "s.db"
    with Store(path) as s:
        s.create_run(name="t", kind="train", run_id="t")
        for step in range(3):
            s.put_groups([Group(run_id="t", step=step, env_id=ENV, task_id="q", trajectories=[
                Trajectory(env_id=ENV, task_id="q", verifiable_reward=r,
                           messages=[Message(role="assistant", content=f"a{r}")])
                for r in (1.0, 0.0)])])  # fmt: skip
            row = {"reward_mean": 0.5, "judge_pairwise": 1.0, "judge_pairwise_run": 1.0,
                   "monitor_pairs_run": 2 * (step + 1)}  # fmt: skip
            if step:  # watched after steps 1 and 2 (0-based), the policy fell at step 2
                row |= split_fields(split_drift({"a": [1.0], "b": [1.0]},
                                                {"a": [1.0 if step == 1 else 0.0], "b": [0.0 if step == 2 else 1.0]}).to_dict())  # fmt: skip
            s.log_step("t", step, row)
    at = runs_page(path, monkeypatch)
    (err,) = [e.value for e in at.error if "judge split" in e.value]
    assert err.startswith("At step 2 (after its update) the policy was shown to do worse")
