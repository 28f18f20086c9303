"""The ``[judge_train]`` stage: after SFT, a judge trained on the SFT policy's judge-split groups
judges GRPO's groups; it is checked on held-out tasks of the same policy and reused on resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainer_helpers import install_fake_judge, labelled_store, save_tiny_model, tiny_config

from rankgym.config import validate_config
from rankgym.envs.judge_split import in_judge_split
from rankgym.store import Store
from rankgym.trainer.config import TrainConfig
from rankgym.types import Group, Message, Trajectory

pytestmark = pytest.mark.usefixtures("one_torch_thread")


_SAID: list[str] = []
"""What the module's trainer said (its ``echo``)."""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    from rankgym.trainer.loop import Trainer

    root = tmp_path_factory.mktemp("stage")
    model_dir = save_tiny_model(root / "tiny")
    install_fake_judge()
    cfg = tiny_config(model_dir, root / "run", steps=1)
    # a judge-only reward stops on a failed check; "fit": each judge's cut is fitted
    cfg["reward"] = {"kind": "judge+verifiable", "judge_threshold": "fit"}
    cfg["sft"] = {"steps": 2, "batch_size": 2, "tasks": 4}
    cfg["judge_train"] = {"tasks": 2, "group_size": 2, "max_turns": 1, "epochs": 1,
                          "max_train_pairs": 6, "max_heldout_pairs": 3,
                          "stores": [str(labelled_store(root / "labels.db"))]}  # fmt: skip
    tc = validate_config(cfg, TrainConfig)
    t = Trainer(tc, out_dir=str(root / "run"), progress=False, echo=_SAID.append)
    t.setup()
    yield t, root
    t.store.close()


def test_the_stage_trains_a_judge_on_the_sft_policys_judge_split_and_grpo_uses_it(run):
    t, root = run
    res = t.judge_train
    adapter = root / "run" / "judge_train" / "adapter"
    assert (
        res["judge"] == f"local/smollm2@{adapter}" and (adapter / "adapter_config.json").is_file()
    )
    assert t.spec.model == res["judge"]  # GRPO's groups are judged by the trained judge
    (roll,) = res["rollout"]
    assert roll["env"] == "rankgym/ToolUse-v0" and roll["groups"] == 2
    with Store(root / "run" / "judge_train" / "data" / "rollout.db", readonly=True) as s:
        tasks = {s.get_group(g).task_id for g in s.group_ids()}
    assert tasks and all(in_judge_split(task) for task in tasks)  # tasks GRPO never draws
    meta = json.loads((adapter / "judge_train.json").read_text())
    assert meta["base"] == str(root / "tiny")  # the policy's own base model
    # `judge_threshold = "fit"`: the new judge scored its rollout, where the tiny policy passes
    # nothing, so no cut is fitted and GRPO keeps the graded score
    (no_cut,) = [m for m in _SAID if "no cut fitted" in m]
    assert str(root / "run" / "judge_train" / "data" / "rollout.db") in no_cut
    assert res["cut"] is None and t.reward.judge_threshold is None


def test_the_stage_checks_the_judge_on_held_out_tasks_with_a_ci(run):
    t, root = run
    check = t.judge_train["check"]
    assert check["heldout_pairs"] == 3 and check["heldout_tasks"] >= 1
    assert 0.0 <= check["pairwise_accuracy"] <= 1.0
    assert isinstance(check["passed"], bool) and check["min_pairwise"] == 0.5
    stage = json.loads((root / "run" / "judge_train" / "stage.json").read_text())
    assert stage["check"] == check


def test_a_resumed_run_reuses_the_trained_judge(run, monkeypatch):
    from rankgym.trainer import judge_stage

    t, root = run
    monkeypatch.setattr(judge_stage, "run_judge_train", None)  # training again would fail
    again = judge_stage.run_judge_train_stage(t.cfg, root / "run" / "sft", root / "run", reuse=True)
    assert again["judge"] == t.judge_train["judge"]


def test_init_judge_starts_the_stage_from_an_existing_judge(run, tmp_path: Path):
    from rankgym.trainer import judge_stage

    t, root = run
    first = root / "run" / "judge_train" / "adapter"
    jt = t.cfg.judge_train.model_copy(update={"init_judge": f"local/smollm2@{first}"})
    said: list[str] = []
    res = judge_stage.run_judge_train_stage(t.cfg.model_copy(update={"judge_train": jt}),
                                            root / "run" / "sft", tmp_path, echo=said.append)  # fmt: skip
    adapter = tmp_path / "judge_train" / "adapter"
    assert res["judge"] == f"local/smollm2@{adapter}"
    meta = json.loads((adapter / "judge_train.json").read_text())
    assert meta["init_adapter"] == str(first)  # trained further, not a fresh LoRA
    assert any("training" in m and "init_judge" in m for m in said)
    assert isinstance(res["check"]["passed"], bool)  # checked like a fresh judge


def test_train_false_checks_the_init_judge_on_this_policys_groups_without_training_it(
    run, tmp_path: Path
):
    from rankgym.judges.pair_files import read_jsonl
    from rankgym.trainer import judge_stage

    t, root = run
    first = root / "run" / "judge_train" / "adapter"
    before = (first / "adapter_model.safetensors").read_bytes()
    jt = t.cfg.judge_train.model_copy(update={"init_judge": f"local/smollm2@{first}", "train": False})  # fmt: skip
    said: list[str] = []
    res = judge_stage.run_judge_train_stage(t.cfg.model_copy(update={"judge_train": jt}),
                                            root / "run" / "sft", tmp_path, echo=said.append)  # fmt: skip
    assert res["judge"] == f"local/smollm2@{first}"  # the judge itself, not a retrained copy
    assert not (tmp_path / "judge_train" / "adapter").exists()
    assert (first / "adapter_model.safetensors").read_bytes() == before
    checked = read_jsonl(tmp_path / "judge_train" / "data" / "heldout.jsonl")
    assert len(checked) == res["check"]["heldout_pairs"] == 3  # every pair, up to max_heldout_pairs
    assert res["summary"]["train_pairs"] == 0 and res["summary"]["trained"] is False
    assert isinstance(res["check"]["passed"], bool)
    assert any("checking" in m for m in said) and any("no training pairs" in m for m in said)


def test_train_false_needs_an_init_judge():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="set init_judge"):
        TrainConfig.model_validate({"judge_train": {"train": False}})


@pytest.mark.parametrize(
    ("judge", "match"),
    [("local/smollm2-yesno", "not a trained local judge"),
     ("local/smollm2@pairwise", "not a trained local judge"),
     ("/nonexistent/judge", "holds no judge adapter")],
)  # fmt: skip
def test_an_init_judge_without_an_adapter_is_refused_before_the_rollout(
    run, tmp_path: Path, judge: str, match: str
):
    from rankgym.errors import UserError
    from rankgym.trainer import judge_stage

    t, root = run
    cfg = t.cfg.model_copy(update={"judge_train": t.cfg.judge_train.model_copy(update={"init_judge": judge})})  # fmt: skip
    with pytest.raises(UserError, match=f"judge_train.init_judge: .*{match}"):
        judge_stage.run_judge_train_stage(cfg, root / "run" / "sft", tmp_path)
    assert not (tmp_path / "judge_train" / "data").exists()  # no rollout was wasted on it


def test_online_refresh_is_due_every_k_steps():
    from rankgym.trainer.judge_refresh import refresh_due

    cfg = TrainConfig.model_validate({"judge_train": {"refresh_every": 2}})
    assert [refresh_due(cfg, k) for k in range(4)] == [False, True, False, True]
    last = cfg.model_copy(
        update={"steps": 4}
    )  # a judge refreshed after the last step judges nothing
    assert [refresh_due(last, k) for k in range(4)] == [False, True, False, False]
    assert not refresh_due(TrainConfig.model_validate({"judge_train": {}}), 1)


def test_the_stage_needs_an_sft_adapter_to_roll_out(tmp_path: Path):
    from types import SimpleNamespace

    from rankgym.errors import UserError
    from rankgym.trainer.judge_stage import judge_train_stage

    cfg = TrainConfig.model_validate({"judge_train": {}})
    fake = SimpleNamespace(cfg=cfg, init_adapter=None, out=tmp_path)
    with pytest.raises(UserError, match=r"add an \[sft\] section"):
        judge_train_stage(fake)


def test_a_grpo_step_is_judged_by_the_trained_judge(run):
    t, _ = run
    m = t.step(0)
    gids = json.loads(next((t.out / "steps").glob("*.json")).read_text())["group_ids"]
    for gid in gids:
        j = t.store.get_group(gid, t.spec.spec_hash).judgement
        assert j is not None and j.status == "ok" and j.spec_hash == t.spec.spec_hash
    assert m is not None


def test_judge_train_rolls_an_adapter_out_on_the_judge_split_from_the_command_line(run, capsys):
    from rankgym.cli import main

    _, root = run
    out = root / "cli"
    argv = ["judge-train", "--rollout-adapter", str(root / "run" / "sft"), "--rollout-env",
            "rankgym/ToolUse-v0", "--rollout-tasks", "2", "--rollout-group-size", "2",
            "--rollout-max-turns", "1", "--store", str(root / "labels.db"), "--base",
            str(root / "tiny"), "--out", str(out), "--max-train-pairs", "4", "--max-heldout-pairs",
            "2", "--epochs", "1", "--batch-size", "4", "--reason-tokens", "0", "--no-compare",
            "--sources", "verifier", "--json", "-q"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    stats = json.loads((out / "data" / "dataset.json").read_text())
    (env,) = stats["rollout"]["envs"]
    assert env["groups"] == 2 and env["run_id"] == "judge-split:rankgym/ToolUse-v0"
    with Store(out / "data" / "rollout.db", readonly=True) as s:
        assert all(in_judge_split(s.get_group(g).task_id) for g in s.group_ids())
    assert main([*argv[:-2], "--sources", "crowd", "--json", "-q"]) == 2  # a one-line UserError
    assert "--sources 'crowd'" in capsys.readouterr().err


def test_an_online_refresh_retrains_the_judge_on_the_runs_groups_and_switches_to_it(run):
    from types import SimpleNamespace

    from rankgym.trainer.judge_refresh import maybe_refresh

    t, root = run
    jt = t.cfg.judge_train.model_copy(update={"refresh_every": 1})
    cfg = t.cfg.model_copy(update={"judge_train": jt, "steps": 2})
    fake = SimpleNamespace(cfg=cfg, spec=t.spec, dist=t.dist, run_id=t.run_id, out=t.out,
                           echo=lambda _m: None, judge_train=dict(t.judge_train),
                           judge_check=None)  # fmt: skip
    maybe_refresh(fake, 0)
    adapter = root / "run" / "judge_train" / "refresh-1" / "adapter"
    assert fake.judge_train["refresh"]["judge"] == f"local/smollm2@{adapter}"
    assert fake.spec.model == f"local/smollm2@{adapter}" != t.spec.model
    stores = json.loads((adapter / "judge_train.json").read_text())["stores"]
    assert stores[0] == t.cfg.store_path  # the run's own groups come first


def test_a_failed_online_refresh_keeps_the_current_judge_and_says_so(monkeypatch):
    from types import SimpleNamespace

    from rankgym.errors import UserError
    from rankgym.trainer import judge_refresh

    def fail(*_a, **_k):
        raise UserError("judge-train: 0 training pairs")

    monkeypatch.setattr(judge_refresh, "refresh_judge", fail)
    said: list[str] = []
    cfg = SimpleNamespace(
        judge_train=SimpleNamespace(refresh_every=1, use=True), steps=2, store_path="s.db"
    )
    spec = SimpleNamespace(model="local/smollm2@old")
    dist = SimpleNamespace(main=True, broadcast=lambda obj: obj)
    fake = SimpleNamespace(cfg=cfg, spec=spec, dist=dist, run_id="r",
                           out=Path("o"), echo=said.append, judge_train=None)  # fmt: skip
    judge_refresh.maybe_refresh(fake, 0)
    assert fake.spec is spec and fake.judge_train is None
    assert (
        len(said) == 1
        and "refresh after step 1 failed" in said[0]
        and "0 training pairs" in said[0]
    )


def test_a_judge_split_refresh_rolls_the_current_policy_out_and_trains_the_judge_further(run):
    from types import SimpleNamespace

    from rankgym.judges.pair_files import read_jsonl
    from rankgym.trainer import checkpoint as ckpt
    from rankgym.trainer.judge_refresh import maybe_refresh

    t, root = run
    if ckpt.latest_checkpoint(t.out) is None:
        t.step(0)
    stage_judge = t.judge_train["judge"]
    jt = t.cfg.judge_train.model_copy(update={"refresh_every": 1, "refresh_data": "judge_split",
                                              "refresh_max_train_minutes": 3.0})  # fmt: skip
    cfg = t.cfg.model_copy(update={"judge_train": jt, "steps": 2})
    said: list[str] = []
    fake = SimpleNamespace(cfg=cfg, spec=t.spec.model_copy(update={"model": stage_judge}),
                           dist=t.dist, run_id=t.run_id, out=t.out, echo=said.append,
                           judge_train=dict(t.judge_train), judge_check=None)  # fmt: skip
    maybe_refresh(fake, 0)
    (line,) = [m for m in said if "held-out pairs" in m]
    assert "training pairs" in line and "newest judge-split groups" in line
    assert ("; passed" in line) != ("NOT passed" in line)
    here = root / "run" / "judge_train"
    adapter = here / "refresh-1" / "adapter"
    assert fake.spec.model == f"local/smollm2@{adapter}" != stage_judge
    meta = json.loads((adapter / "judge_train.json").read_text())
    assert meta["init_adapter"] == str(here / "adapter")  # the current judge, trained further
    assert meta["config"]["max_train_seconds"] == 180.0  # the refresh's own time cap
    assert t.cfg.store_path not in meta["stores"]  # never the verifier on GRPO's own groups
    with Store(here / "data" / "refresh-1.db", readonly=True) as s:
        groups = [s.get_group(g) for g in s.group_ids()]
    assert groups and all(in_judge_split(g.task_id) for g in groups)
    policies = {turn.policy for g in groups for tr in g.trajectories for turn in tr.turns}
    assert policies == {"judge-data-policy@step1"}  # the policy as it is now, not the SFT start
    with Store(t.cfg.store_path, readonly=True) as s:
        grpo_tasks = {s.get_group(g).task_id for g in s.group_ids(run_id=t.run_id)}
    data = here / "refresh-1" / "data"
    pairs = read_jsonl(data / "train.jsonl") + read_jsonl(data / "heldout.jsonl")
    assert pairs and not {p.task_id for p in pairs} & grpo_tasks
    assert fake.judge_train["refresh"]["rollout"][0]["groups"] == len(groups)
    with Store(here / "data" / "rollout.db", readonly=True) as s:
        stage_tasks = {s.get_group(g).task_id for g in s.group_ids()}
    assert {g.task_id for g in groups} == stage_tasks  # `tasks = 2`: the stage's draw again
    drift = fake.judge_train["refresh"]["judge_split"]  # compared task by task with the stage
    assert drift["tasks"] == len({g.task_id for g in groups}) >= 2
    assert drift["diff"] == pytest.approx(drift["now"] - drift["start"])
    assert any(m.startswith("judge split (train tasks GRPO never draws") for m in said)
    # the cut is fitted on the refresh's own rollout; the tiny policy passes nothing there
    (no_cut,) = [m for m in said if "no cut fitted" in m]
    assert str(here / "data" / "refresh-1.db") in no_cut and "all failures" in no_cut
    assert fake.judge_train["refresh"]["cut"] is None


def test_a_judge_split_refresh_needs_a_trained_local_judge():
    from rankgym.errors import UserError
    from rankgym.trainer.judge_refresh import _judge_adapter

    for judge in ("openai/gpt-4o-mini", "local/smollm2-yesno", None):
        with pytest.raises(UserError, match="refresh_data = 'run'"):
            _judge_adapter(judge)
    with pytest.raises(UserError, match="holds no judge adapter"):  # a warning, not a crash
        _judge_adapter("local/smollm2@/nonexistent/judge")


def _other_runs_groups(store_path: str) -> None:
    """Another run's labelled groups in the training store (a refresh must not learn from them)."""
    with Store(store_path) as s:
        s.create_run(name="other", kind="train", config={}, run_id="other-run")
        for k in range(6):
            s.put_group(Group(env_id="e/Env-v0", task_id=f"other-{k}", run_id="other-run",
                              trajectories=[
                Trajectory(env_id="e/Env-v0", task_id=f"other-{k}", verifiable_reward=r,
                           messages=[Message(role="user", content=f"other {k}?"),
                                     Message(role="assistant", content=f"answer {r}")])
                for r in (1.0, 0.0)]))  # fmt: skip


def test_a_refresh_learns_only_from_this_runs_groups_and_a_resumed_run_judges_with_it(
    run, monkeypatch
):
    from types import SimpleNamespace

    from rankgym.judges.pair_files import read_jsonl
    from rankgym.trainer import checkpoint as ckpt
    from rankgym.trainer import judge_refresh, loop, preflight
    from rankgym.trainer.loop import Trainer

    t, root = run
    if ckpt.latest_checkpoint(t.out) is None:
        t.step(0)
    _other_runs_groups(t.cfg.store_path)
    jt = t.cfg.judge_train.model_copy(update={"refresh_every": 1})
    cfg = t.cfg.model_copy(update={"judge_train": jt, "steps": 2})
    fake = SimpleNamespace(cfg=cfg, spec=t.spec, dist=t.dist, run_id=t.run_id, out=t.out,
                           echo=lambda _m: None, judge_train=dict(t.judge_train),
                           judge_check=None)  # fmt: skip
    judge_refresh.maybe_refresh(fake, 0)
    data = root / "run" / "judge_train" / "refresh-1" / "data"
    pairs = read_jsonl(data / "train.jsonl") + read_jsonl(data / "heldout.jsonl")
    assert pairs and not any(p.task_id.startswith("other-") for p in pairs)
    (rec,) = json.loads((root / "run" / "judge_train" / "refreshes.json").read_text())
    assert rec["after_step"] == 1 and rec["judge"] == fake.spec.model

    checked: list[str] = []

    def record(cfg, spec, **_k):
        checked.append(spec.model)
        return {"judge": spec.model, "kendall_tau": {"value": 0.5, "ci_low": 0.2}}

    monkeypatch.setattr(loop, "judge_preflight", record)
    monkeypatch.setattr(preflight, "judge_preflight", record)
    # a cut fitted at that refresh (`judge_threshold = "fit"`) is the one the resumed run cuts at
    rows = json.loads((root / "run" / "judge_train" / "refreshes.json").read_text())
    rows[0]["cut"] = {"cut": 0.42, "judge": rec["judge"]}
    (root / "run" / "judge_train" / "refreshes.json").write_text(json.dumps(rows))
    again = Trainer(t.cfg, out_dir=str(root / "run"), progress=False, resume=True)
    again.setup()
    try:
        assert again.reward.judge_threshold == 0.42
        assert again.spec.model == rec["judge"] != t.judge_train["judge"]
        assert checked == [rec["judge"]]  # the judge GRPO uses, not the config's judge
        saved = json.loads((root / "run" / "judge_check.json").read_text())
        assert saved["judge"] == rec["judge"] and saved["on_policy"] == rec["check"]
        assert again.judge_check["on_policy"] == rec["check"]
    finally:
        again.store.close()


def test_preflight_checks_the_trained_judge_and_a_judge_only_reward_stops_on_a_failed_check(
    monkeypatch,
):
    from types import SimpleNamespace

    from rankgym.errors import UserError
    from rankgym.trainer import judge_stage, preflight
    from rankgym.trainer.monitor import check_failed

    checked: list[str] = []
    monkeypatch.setattr(preflight, "judge_preflight", lambda cfg, spec, **_k: checked.append(
        (cfg.judge.model, spec.model)) or {"kendall_tau": {"value": 0.4, "ci_low": 0.1}})  # fmt: skip
    failed = {"passed": False, "pairwise_accuracy": 0.48, "pairwise_accuracy_ci": [0.35, 0.6],
              "heldout_pairs": 40, "min_pairwise": 0.5}  # fmt: skip
    said: list[str] = []
    for kind in ("judge+verifiable", "judge"):
        cfg = TrainConfig.model_validate({"judge_train": {}, "reward": {"kind": kind}})
        fake = SimpleNamespace(cfg=cfg, spec=SimpleNamespace(model="local/smollm2@/j"),
                               force=False, echo=said.append)  # fmt: skip
        if kind == "judge":
            with pytest.raises(UserError, match=r"pairwise 0.48 \[0.35, 0.60\].*--force"):
                judge_stage._preflight_trained(fake, failed)
        else:
            report = judge_stage._preflight_trained(fake, failed)
            assert report["on_policy"] == failed and check_failed(report)  # refuses no-signal steps
    assert checked == [("local/smollm2@/j", "local/smollm2@/j")] * 2
    assert said and "not above min_pairwise 0.5" in said[0]


def test_reward_when_passed_makes_grpo_judge_only_only_for_a_judge_that_passed(
    monkeypatch, tmp_path: Path
):
    from types import SimpleNamespace

    from rankgym.trainer import judge_stage, preflight

    checked: list[str] = []
    monkeypatch.setattr(preflight, "judge_preflight", lambda cfg, spec, **_k: checked.append(
        spec.model) or {"decision": "ok"})  # fmt: skip
    raw = {"judge": {"model": "local/smollm2-yesno"}, "reward": {"kind": "judge+verifiable"},
           "judge_train": {"reward_when_passed": "judge"}}  # fmt: skip
    said: list[str] = []

    def trainer(decision: str) -> SimpleNamespace:
        cfg = TrainConfig.model_validate(raw)
        return SimpleNamespace(cfg=cfg, spec=SimpleNamespace(model="local/smollm2@/trained"),
                               judge_check={"decision": decision}, force=False,
                               echo=said.append, dist=SimpleNamespace(main=True,
                               broadcast=lambda o: o), out=tmp_path)  # fmt: skip

    passed = {"passed": True, "pairwise_accuracy": 0.8, "pairwise_accuracy_ci": [0.7, 0.9],
              "heldout_pairs": 60, "min_pairwise": 0.5}  # fmt: skip
    t = trainer("ok")
    judge_stage._maybe_judge_only(t, passed)
    assert t.cfg.reward.kind == "judge" and t.spec.model == "local/smollm2@/trained"
    assert "GRPO's reward is 'judge'" in said[-1] and not checked
    for decision, check in (("ok", {**passed, "passed": False}), ("warn", passed)):
        t = trainer(decision)
        judge_stage._maybe_judge_only(t, check)
        assert t.cfg.reward.kind == "judge+verifiable"  # the configured reward and judge stay
        assert t.spec.model == "local/smollm2-yesno" and checked[-1] == "local/smollm2-yesno"
        assert "the reward stays 'judge+verifiable'" in said[-1]
    assert "not above min_pairwise 0.5" in said[-2] and "calibration judge-check" in said[-1]


def test_demo_judge_train_adds_the_stage_and_its_numbers_reach_the_json():
    from rankgym.trainer.demo import JUDGE_TRAIN, demo_config, judge_train_fields

    cfg = validate_config(demo_config("runs/d", 4, "judge+verifiable", 0, judge_train=True), TrainConfig)  # fmt: skip
    jt = cfg.judge_train
    assert jt is not None and jt.reward_when_passed == "judge" and jt.use
    assert jt.group_size == JUDGE_TRAIN["group_size"]
    assert validate_config(demo_config("runs/d", 4, "judge", 0), TrainConfig).judge_train is None
    # the judge split is carved only for the stage that reads it: SFT and GRPO of the plain
    # demo use every train task, the --judge-train demo's leave the judge's tasks out
    assert cfg.env.kwargs.get("judge_split", True) is True
    plain = validate_config(demo_config("runs/d", 4, "judge", 0), TrainConfig)
    assert plain.env.kwargs["judge_split"] is False and plain.sft is not None
    assert plain.sft.env_kwargs is not None and plain.sft.env_kwargs["judge_split"] is False
    check = {"passed": True, "pairwise_accuracy": 0.8, "pairwise_accuracy_ci": [0.7, 0.9],
             "heldout_pairs": 60}  # fmt: skip
    assert judge_train_fields({"check": check}) == {
        "judge_train_passed": True, "judge_train_heldout_pairwise": 0.8,
        "judge_train_heldout_pairwise_ci": [0.7, 0.9], "judge_train_heldout_pairs": 60}  # fmt: skip
    assert set(judge_train_fields(None).values()) == {None}


def test_an_episode_that_never_answered_is_a_losing_judge_pair_not_dropped(tmp_path: Path):
    from rankgym.judges.judge_data import verifier_pairs

    def traj(text: str, reward: float | None, truncated: bool) -> Trajectory:
        return Trajectory(env_id="e/Env-v0", task_id="q", verifiable_reward=reward,
                          truncated=truncated, messages=[Message(role="user", content="q?"),
                          Message(role="assistant", content=text)])  # fmt: skip

    with Store(tmp_path / "s.db") as s:
        s.put_group(Group(env_id="e/Env-v0", task_id="q", trajectories=[
            traj("the answer is 4", 1.0, False), traj("calling a tool again", None, True),
            traj("no check for this one", None, False)]))  # fmt: skip
        (pair,) = verifier_pairs({"s": s})
    assert pair.winner.verifiable_reward == 1.0 and pair.loser.truncated and pair.gap == 1.0
