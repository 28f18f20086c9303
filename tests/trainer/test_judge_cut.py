"""``[reward] judge_threshold = "fit"``: the cut of each trained judge, fitted on its labelled
judge-split episodes, is what GRPO's reward cuts the judge's scores at."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trainer_helpers import install_fake_judge, labelled_store

from rankgym.config import validate_config
from rankgym.errors import UserError
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.judge_cut import apply_cut, cut_line, fit_cut, fit_judge_cut, labelled_scores
from rankgym.trainer.rewards import build_reward


def _errors(scores: list[float], passed: list[bool], cut: float) -> int:
    return sum((s >= cut) != p for s, p in zip(scores, passed, strict=True))


def test_a_separable_set_is_cut_between_its_highest_failure_and_lowest_pass():
    f = fit_cut([0.1, 0.3, 0.8, 0.9], [False, False, True, True])
    assert f.cut == pytest.approx(0.55) and f.accuracy == 1.0 and f.auroc == 1.0
    assert (f.passes, f.failures, f.passes_missed, f.failures_passed) == (2, 2, 0, 0)


def test_among_equally_accurate_cuts_the_one_passing_fewest_wins():
    # one error either way: pass all but miss nothing, or pass none; the highest cut wins
    f = fit_cut([0.4, 0.6], [True, False])
    assert f.cut > 0.6 and f.failures_passed == 0 and f.passes_missed == 1 and f.auroc == 0.0


def test_scores_that_tie_across_classes_count_half_in_the_auroc():
    f = fit_cut([0.5, 0.5, 0.5], [True, False, False])
    assert f.auroc == 0.5 and f.failures_passed == 0 and f.cut > 0.5


@pytest.mark.parametrize(
    ("scores", "passed", "msg"),
    [
        ([], [], "no labelled episodes"),
        ([0.1], [True, False], "1 scores but 2 labels"),
        ([float("nan")], [True], "finite"),
    ],  # fmt: skip
)
def test_bad_inputs_are_refused_by_name(scores, passed, msg):
    with pytest.raises(ValueError, match=msg):
        fit_cut(scores, passed)


@given(
    st.lists(
        st.tuples(st.floats(0.0, 1.0, allow_nan=False), st.booleans()), min_size=1, max_size=40
    )
)
def test_the_fitted_cut_is_as_accurate_as_any_cut(rows):
    scores, passed = [s for s, _ in rows], [p for _, p in rows]
    f = fit_cut(scores, passed)
    errs = _errors(scores, passed, f.cut)
    assert f.passes_missed + f.failures_passed == errs
    assert f.accuracy == pytest.approx(1 - errs / len(rows))
    for c in [*scores, 0.0, 1.0, 1.5]:  # no threshold does better
        assert _errors(scores, passed, c) >= errs
    assert f.passes == sum(passed) and f.failures == len(rows) - sum(passed)


def _config(tmp_path: Path, **reward) -> dict:
    return {
        "out_dir": str(tmp_path / "run"),
        "reward": {"kind": "judge", **reward},
        "sft": {"steps": 1},
        "judge_train": {"tasks": 2},
    }


def test_fit_needs_a_judge_train_stage_that_is_used(tmp_path: Path):
    cfg = _config(tmp_path, judge_threshold="fit")
    assert validate_config(cfg, TrainConfig).reward.judge_threshold == "fit"
    del cfg["judge_train"]
    with pytest.raises(UserError, match=r'judge_threshold = "fit".*\[judge_train\]'):
        validate_config(cfg, TrainConfig)
    cfg["judge_train"] = {"tasks": 2, "use": False}
    with pytest.raises(UserError, match="use = true"):
        validate_config(cfg, TrainConfig)
    with pytest.raises(UserError, match="judge_threshold"):
        validate_config(_config(tmp_path, judge_threshold="half"), TrainConfig)


def test_a_fit_reward_is_graded_until_a_cut_is_fitted_then_cuts_there(tmp_path: Path):
    cfg = validate_config(_config(tmp_path, judge_threshold="fit"), TrainConfig)
    reward = build_reward(cfg.reward)
    assert reward.judge_threshold is None
    trainer = SimpleNamespace(cfg=cfg, reward=reward, spec=SimpleNamespace(model="local/smollm2@J"))
    apply_cut(trainer, None)  # nothing fitted: still graded
    assert reward.judge_threshold is None
    apply_cut(trainer, {"cut": 0.7, "judge": "local/smollm2@J"})
    assert reward.judge_threshold == 0.7
    apply_cut(trainer, None)  # a refresh that fitted none: the last cut stays
    assert reward.judge_threshold == 0.7
    fixed = validate_config(_config(tmp_path, judge_threshold=0.5), TrainConfig)
    trainer = SimpleNamespace(cfg=fixed, reward=build_reward(fixed.reward), spec=trainer.spec)
    apply_cut(trainer, {"cut": 0.7, "judge": "local/smollm2@J"})  # a fixed cut is never refitted
    assert trainer.reward.judge_threshold == 0.5


def test_labelled_episodes_are_judged_in_their_groups_and_the_cut_fitted_on_them(tmp_path: Path):
    install_fake_judge()
    store = labelled_store(tmp_path / "labels.db", n=6)
    cfg = validate_config(_config(tmp_path, judge_threshold="fit"), TrainConfig)
    scores, passed = labelled_scores(cfg, "trainerfake/judge", store)
    assert len(scores) == 12 and sum(passed) == 6 and all(0.0 <= s <= 1.0 for s in scores)
    said: list[str] = []
    fitted = fit_judge_cut(cfg, "trainerfake/judge", store, said.append)
    assert fitted is not None
    assert fitted["cut"] == fit_cut(scores, passed).cut
    assert fitted["judge"] == "trainerfake/judge" and fitted["store"] == str(store)
    assert said == [cut_line(fitted)] and "12 labelled judge-split episodes" in said[0]
    graded = validate_config(_config(tmp_path), TrainConfig)
    assert fit_judge_cut(graded, "trainerfake/judge", store, said.append) is None  # not asked


def test_no_cut_is_fitted_when_every_episode_fails(tmp_path: Path):
    from rankgym.store import Store
    from rankgym.types import Group, Message, Trajectory

    install_fake_judge()
    path = tmp_path / "fails.db"
    with Store(path) as s:
        s.put_group(Group(env_id="e/Env-v0", task_id="q", trajectories=[
            Trajectory(env_id="e/Env-v0", task_id="q", verifiable_reward=r,
                       messages=[Message(role="user", content="q"),
                                 Message(role="assistant", content=f"a{r}")])
            for r in (0.0, 0.2)]))  # fmt: skip
    cfg = validate_config(_config(tmp_path, judge_threshold="fit"), TrainConfig)
    said: list[str] = []
    assert fit_judge_cut(cfg, "trainerfake/judge", path, said.append) is None
    assert "no cut fitted" in said[0] and "all failures" in said[0]


def test_a_refresh_records_its_cut_and_grpo_trains_at_it_from_then_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The wiring after a refresh: its fitted cut replaces the stage's in the reward and is
    recorded in ``refreshes.json``, where a resumed run reads it (the fit itself: the tests
    above; a real refresh fitting on its rollout: tests/trainer/test_judge_stage.py)."""
    from rankgym.trainer import judge_refresh

    cfg = validate_config(_config(tmp_path, judge_threshold="fit"), TrainConfig)
    jt = cfg.judge_train.model_copy(update={"refresh_every": 1, "refresh_data": "judge_split"})
    cfg = cfg.model_copy(update={"judge_train": jt, "steps": 3})
    out = Path(cfg.out_dir)
    reward = build_reward(cfg.reward)
    trainer = SimpleNamespace(cfg=cfg, reward=reward, spec=SimpleNamespace(model="local/smollm2@A"),
                              dist=_Main(), run_id="r", out=out, echo=print, judge_train={},
                              judge_check=None)  # fmt: skip
    apply_cut(trainer, {"cut": 0.65, "judge": "local/smollm2@A"})
    assert reward.judge_threshold == 0.65  # the stage's cut

    def refresh_double(cfg, store_path, run_id, step, out_dir, **kw):  # no training here
        return {"judge": "local/smollm2@B", "check": {"passed": True}, "summary": {},
                "cut": {"cut": 0.8, "judge": "local/smollm2@B"}}  # fmt: skip

    monkeypatch.setattr(judge_refresh, "refresh_judge", refresh_double)
    monkeypatch.setattr(judge_refresh, "_use_judge", lambda t, m: setattr(t, "spec", SimpleNamespace(model=m)))  # fmt: skip
    judge_refresh.maybe_refresh(trainer, 0)
    assert trainer.spec.model == "local/smollm2@B" and reward.judge_threshold == 0.8
    (row,) = json.loads((out / "judge_train" / "refreshes.json").read_text())
    assert row["cut"] == {"cut": 0.8, "judge": "local/smollm2@B"}


class _Main:
    main = True

    def broadcast(self, value):
        return value


def test_the_cut_a_step_trained_at_is_in_its_metrics_row_and_step_line(tmp_path: Path):
    from dataclasses import replace

    from trainer_helpers import save_tiny_model, tiny_config

    from rankgym.step_metrics import StepMetrics
    from rankgym.trainer.loop import Trainer
    from rankgym.trainer.step_report import step_line

    install_fake_judge()
    raw = tiny_config(save_tiny_model(tmp_path / "tiny"), tmp_path / "run", steps=1,
                      reward={"kind": "judge", "judge_threshold": 0.4},
                      monitor={"guard": "off"})  # fmt: skip
    t = Trainer(validate_config(raw, TrainConfig), progress=False, echo=lambda _m: None)
    t.setup()
    try:
        m = t.step(0)
        (row,) = t.store.steps(t.run_id)
        groups = [t.store.get_group(g) for g in t.store.group_ids(run_id=t.run_id, step=0)]
    finally:
        t.store.close()
    assert m.judge_cut == 0.4 and row["metrics"]["judge_cut"] == 0.4
    # the monitor's signal row reads the judge's scores at that cut, as the reward did
    from rankgym.trainer.monitor_signal import judge_signal, signal_unit

    at = {c: judge_signal([u for g in groups if (u := signal_unit(g, 0, c)) is not None]) for c in (0.4, None)}  # fmt: skip
    assert m.judge_signal == at[0.4] and row["metrics"]["judge_signal"] == at[0.4]
    assert "  cut 0.40" in step_line(m, 0, 1)
    assert StepMetrics.from_dict(m.to_dict()).judge_cut == 0.4
    graded = replace(m, judge_cut=None)
    assert "judge_cut" not in graded.to_dict() and " cut " not in step_line(graded, 0, 1)


@pytest.mark.parametrize(
    ("on_policy", "calibration", "fits"),
    [(True, "ok", True), (False, "ok", False), (True, "warn", False)],
)
def test_the_cut_is_fitted_only_for_a_judge_the_run_will_use_and_kept_for_resume(
    on_policy: bool, calibration: str, fits: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """``reward_when_passed``: a judge that fails its on-policy check or its calibration
    judge-check leaves GRPO on the configured judge, so no judging pass is spent fitting its cut;
    a used judge's cut is fitted once, kept in stage.json, and read from there on resume (test
    doubles for the stage, the fit and the calibration check; the fit's own path: above)."""
    from rankgym.trainer import judge_stage, preflight

    raw = _config(tmp_path, judge_threshold="fit")
    raw["reward"]["kind"] = "judge+verifiable"
    raw["judge_train"]["reward_when_passed"] = "judge"
    cfg = validate_config(raw, TrainConfig)
    out, sft = tmp_path / "run", tmp_path / "sft"
    (out / "judge_train").mkdir(parents=True)
    sft.mkdir()
    (sft / "adapter_config.json").write_text("{}")
    check = {"passed": on_policy, "pairwise_accuracy": 0.9, "pairwise_accuracy_ci": [0.8, 1.0],
             "heldout_pairs": 30, "min_pairwise": 0.5}  # fmt: skip
    stage_file = out / "judge_train" / "stage.json"

    def stage(*_a, reuse: bool = False, **_k):
        if reuse and stage_file.is_file():
            return json.loads(stage_file.read_text())
        res = {"judge": "local/smollm2@J", "check": check}
        stage_file.write_text(json.dumps(res))
        return res

    fitted: list[str] = []
    monkeypatch.setattr(judge_stage, "run_judge_train_stage", stage)
    monkeypatch.setattr(judge_stage, "fit_judge_cut", lambda *a: fitted.append(a[1]) or {"cut": 0.61})  # fmt: skip
    monkeypatch.setattr(preflight, "judge_preflight", lambda *_a, **_k: {"decision": calibration})

    def run(resume: bool) -> SimpleNamespace:
        t = SimpleNamespace(cfg=cfg, reward=build_reward(cfg.reward), out=out, init_adapter=sft,
                            resume=resume, progress=False, echo=lambda _m: None, force=False,
                            spec=None, judge_train=None, judge_check=None,
                            dist=SimpleNamespace(main=True, broadcast=lambda o: o))  # fmt: skip
        judge_stage.judge_train_stage(t)
        return t

    t = run(resume=False)
    assert fitted == (["local/smollm2@J"] if fits else [])
    assert t.reward.judge_threshold == (0.61 if fits else None)
    assert t.spec.model == ("local/smollm2@J" if fits else cfg.judge.model)
    if fits:
        assert json.loads(stage_file.read_text())["cut"] == {"cut": 0.61} == t.judge_train["cut"]
        again = run(resume=True)  # read from stage.json, not fitted again
        assert fitted == ["local/smollm2@J"] and again.reward.judge_threshold == 0.61
    else:
        assert "cut" not in json.loads(stage_file.read_text())
