"""The ``[judge_train]`` stage: after SFT, a judge trained on the SFT policy's judge-split groups
judges GRPO's groups; it is checked on held-out tasks of the same policy and reused on resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainer_helpers import install_fake_judge, save_tiny_model, tiny_config

from rankgym.config import validate_config
from rankgym.envs.judge_split import in_judge_split
from rankgym.store import Store
from rankgym.trainer.config import TrainConfig
from rankgym.types import Group, Message, Trajectory

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _labelled_store(path: Path, n: int = 12) -> Path:
    """Tasks whose verifier tells a right answer from a wrong one (the tiny policy solves none)."""

    def traj(task: str, text: str, reward: float) -> Trajectory:
        return Trajectory(env_id="e/Env-v0", task_id=task, verifiable_reward=reward, messages=[
            Message(role="user", content=f"What is {task}?"),
            Message(role="assistant", content=text)])  # fmt: skip

    with Store(path) as s:
        for k in range(n):
            bad = "no" if k % 2 else "a long wrong and rambling answer"  # length says nothing
            s.put_group(Group(env_id="e/Env-v0", task_id=f"q{k}", trajectories=[
                traj(f"q{k}", f"the answer is {k}", 1.0), traj(f"q{k}", bad, 0.0)]))  # fmt: skip
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    from rankgym.trainer.loop import Trainer

    root = tmp_path_factory.mktemp("stage")
    model_dir = save_tiny_model(root / "tiny")
    install_fake_judge()
    cfg = tiny_config(model_dir, root / "run", steps=1)
    cfg["sft"] = {"steps": 2, "batch_size": 2, "tasks": 4}
    cfg["judge_train"] = {"tasks": 2, "group_size": 2, "max_turns": 1, "epochs": 1,
                          "max_train_pairs": 6, "max_heldout_pairs": 3,
                          "stores": [str(_labelled_store(root / "labels.db"))]}  # fmt: skip
    tc = validate_config(cfg, TrainConfig)
    t = Trainer(tc, out_dir=str(root / "run"), progress=False)
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
    monkeypatch.setattr(judge_stage, "_run", None, raising=False)  # training again would fail
    again = judge_stage.run_judge_train_stage(t.cfg, root / "run" / "sft", root / "run", reuse=True)
    assert again["judge"] == t.judge_train["judge"]


def test_online_refresh_is_due_every_k_steps():
    from rankgym.trainer.judge_stage import refresh_due

    cfg = TrainConfig.model_validate({"judge_train": {"refresh_every": 2}})
    assert [refresh_due(cfg, k) for k in range(4)] == [False, True, False, True]
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

    from rankgym.trainer.judge_stage import maybe_refresh

    t, root = run
    jt = t.cfg.judge_train.model_copy(update={"refresh_every": 1})
    cfg = t.cfg.model_copy(update={"judge_train": jt})
    fake = SimpleNamespace(cfg=cfg, spec=t.spec, dist=t.dist, run_id=t.run_id, out=t.out,
                           echo=lambda _m: None, judge_train=dict(t.judge_train))  # fmt: skip
    maybe_refresh(fake, 0)
    adapter = root / "run" / "judge_train" / "refresh-1" / "adapter"
    assert fake.judge_train["refresh"]["judge"] == f"local/smollm2@{adapter}"
    assert fake.spec.model == f"local/smollm2@{adapter}" != t.spec.model
    stores = json.loads((adapter / "judge_train.json").read_text())["stores"]
    assert stores[0] == t.cfg.store_path  # the run's own groups come first


def test_a_failed_online_refresh_keeps_the_current_judge_and_says_so(monkeypatch):
    from types import SimpleNamespace

    from rankgym.errors import UserError
    from rankgym.trainer import judge_stage

    def fail(*_a, **_k):
        raise UserError("judge-train: 0 training pairs")

    monkeypatch.setattr(judge_stage, "refresh_judge", fail)
    said: list[str] = []
    cfg = SimpleNamespace(judge_train=SimpleNamespace(refresh_every=1, use=True), store_path="s.db")
    spec = SimpleNamespace(model="local/smollm2@old")
    fake = SimpleNamespace(cfg=cfg, spec=spec, dist=SimpleNamespace(main=True), run_id="r",
                           out=Path("o"), echo=said.append, judge_train=None)  # fmt: skip
    judge_stage.maybe_refresh(fake, 0)
    assert fake.spec is spec and fake.judge_train is None
    assert (
        len(said) == 1
        and "refresh after step 1 failed" in said[0]
        and "0 training pairs" in said[0]
    )
