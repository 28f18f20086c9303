"""Tie pairs in judge data: equally good trajectories become pairs with a soft target of 0.5."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankgym.judges.judge_data import (
    build_dataset,
    cap_ties,
    tie_pair,
    tie_pairs,
)
from rankgym.judges.pair_files import read_jsonl, write_jsonl
from rankgym.store import Store
from rankgym.types import Group, Message, ToolCall, ToolCallFunction, Trajectory


def traj(task: str, text: str, reward: float | None, calls: int = 0, truncated: bool = False) -> Trajectory:  # fmt: skip
    msgs = [Message(role="user", content=f"task {task}")]
    msgs += [
        Message(role="assistant", content="", tool_calls=[
            ToolCall(id=f"c{k}", function=ToolCallFunction(name="calc", arguments=f'{{"x": {k}}}'))])
        for k in range(calls)
    ]  # fmt: skip
    msgs.append(Message(role="assistant", content=text))
    return Trajectory(
        env_id="e/Env-v0",
        task_id=task,
        messages=msgs,
        verifiable_reward=reward,
        truncated=truncated,
    )


def _store(path: Path, n_tasks: int = 10) -> Path:
    with Store(path) as s:
        for k in range(n_tasks):
            t = f"t{k}"
            s.put_group(Group(env_id="e/Env-v0", task_id=t, trajectories=[
                traj(t, f"right {k}", 1.0, calls=2),
                traj(t, "wrong", 0.0),                                 # a short wrong answer
                traj(t, "still working on it", None, calls=3, truncated=True),  # cut at the limit
            ]))  # fmt: skip
    return path


def test_equal_verifier_rewards_make_a_tie_pair_with_the_longer_in_the_winner_slot(tmp_path: Path):
    with Store(_store(tmp_path / "s.db", n_tasks=1), readonly=True) as s:
        ties = tie_pairs({"s": s})
    # the short wrong answer and the truncated chain both count 0.0: one tie, none with the success
    assert len(ties) == 1
    p = ties[0]
    assert p.tie and p.label == "tie" and p.gap == 0.0 and p.source == "verifier"
    assert (
        p.winner.truncated and p.loser.messages[-1].content == "wrong"
    )  # longer first, by convention
    assert p.to_dict()["label"] == "tie"


def test_identical_trajectories_are_not_a_tie_and_a_human_equal_rank_is(tmp_path: Path):
    a, b, c = traj("q", "same", 1.0), traj("q", "same", 1.0), traj("q", "other", 0.0)
    with Store(tmp_path / "h.db") as s:
        g = Group(env_id="e/Env-v0", task_id="q", trajectories=[a, b, c])
        s.put_group(g)
        s.add_human_ranking(g.id, "ann", {a.id: 1, c.id: 1, b.id: 2})
    with Store(tmp_path / "h.db", readonly=True) as s:
        verifier = tie_pairs({"h": s}, sources=("verifier",))
        human = tie_pairs({"h": s}, sources=("human",))
    assert verifier == []  # a and b are the same content: counted once
    assert len(human) == 1 and human[0].source == "human" and human[0].tie


def test_tie_ratio_adds_capped_ties_without_changing_the_decided_pairs_or_their_split(tmp_path: Path):  # fmt: skip
    with Store(_store(tmp_path / "s.db"), readonly=True) as s:
        plain = build_dataset({"s": s}, max_per_task=4, seed=3)
        with_ties = build_dataset({"s": s}, max_per_task=4, seed=3, tie_ratio=0.5)
    assert [p.id for p in with_ties.train] == [p.id for p in plain.train]
    assert [p.id for p in with_ties.heldout] == [p.id for p in plain.heldout]
    assert plain.train_ties == [] and plain.heldout_ties == []
    assert 0 < len(with_ties.train_ties) <= round(0.5 * len(plain.train))
    held_tasks = {p.task_key for p in plain.heldout}
    assert all(p.task_key not in held_tasks for p in with_ties.train_ties)
    assert all(p.task_key in held_tasks for p in with_ties.heldout_ties)
    assert with_ties.stats["train"]["ties"] == len(with_ties.train_ties)
    write_jsonl(tmp_path / "t.jsonl", with_ties.train_ties)
    back = read_jsonl(tmp_path / "t.jsonl")
    assert [p.id for p in back] == [p.id for p in with_ties.train_ties] and all(p.tie for p in back)


def test_a_tie_and_a_decided_pair_of_the_same_trajectories_have_different_ids():
    w, lo = traj("q", "a longer answer", 0.0), traj("q", "short", 0.0)
    tie = tie_pair("e/Env-v0", "q", w, lo, "verifier", "s")
    decided = type(tie)("e/Env-v0", "q", w, lo, "verifier", "s", 1.0)
    assert tie.id != decided.id


def test_cap_ties_prefers_the_policys_store_then_ties_whose_call_counts_differ():
    mk = tie_pair
    same = mk("e/Env-v0", "q", traj("q", "aaaa", 0.0), traj("q", "b", 0.0), "verifier", "policy")
    differ = mk("e/Env-v0", "q", traj("q", "a", 0.0, calls=1), traj("q", "b", 0.0), "verifier", "policy")  # fmt: skip
    other = mk("e/Env-v0", "q", traj("q", "c", 0.0, calls=2), traj("q", "d", 0.0), "verifier", "scripted")  # fmt: skip
    assert cap_ties([same, other, differ], 1, seed=0, prefer={"policy"}) == [differ]
    assert cap_ties([same, other, differ], 2, seed=0, prefer={"policy"}) == [same, differ]


@pytest.mark.parametrize("ratio", [-0.1, float("nan"), 101.0])
def test_build_dataset_rejects_a_tie_ratio_outside_zero_to_one_hundred(tmp_path: Path, ratio: float):  # fmt: skip
    with Store(_store(tmp_path / "s.db", 2), readonly=True) as s, pytest.raises(ValueError, match="tie_ratio"):  # fmt: skip
        build_dataset({"s": s}, tie_ratio=ratio)


def test_judge_train_with_tie_ratio_trains_on_ties_and_reports_the_held_out_tie_lean(tmp_path: Path):  # fmt: skip
    import json
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))
    from trainer_helpers import save_tiny_model

    from rankgym.trainer.judge_pipeline import JudgeTrainJob, run_judge_train
    from rankgym.trainer.judge_train import JudgeTrainConfig

    base = save_tiny_model(tmp_path / "tiny")
    store = _store(tmp_path / "s.db", n_tasks=8)
    train = JudgeTrainConfig(samples=1, reason_tokens=0, epochs=1, batch_size=4, bf16=False)
    job = JudgeTrainJob(tmp_path / "out", stores=[str(store)], base=str(base), train=train,
                        max_train_pairs=4, max_heldout_pairs=2, tie_ratio=1.0,
                        compare_with=())  # fmt: skip
    summary = run_judge_train(job)
    rows = [json.loads(x) for x in (tmp_path / "out/data/train.jsonl").read_text().splitlines()]
    assert summary["train_ties"] == sum(r["label"] == "tie" for r in rows) > 0
    assert summary["train_presentations"] == 2 * len(rows)
    ties = summary["ties"][summary["judge"]]
    assert ties["pairs"] > 0 and 0.0 <= ties["prefers_shorter"] <= 1.0
    assert 0.0 <= ties["mean_abs_dev"] <= 0.5
    assert json.loads((tmp_path / "out/ties.json").read_text()) == summary["ties"]
    meta = json.loads((tmp_path / "out/adapter/judge_train.json").read_text())
    assert meta["tie_ratio"] == 1.0
    # continuing from that adapter: the same LoRA shape, trained further
    again = run_judge_train(JudgeTrainJob(tmp_path / "more", stores=[str(store)], base=str(base),
                                          train=train, max_train_pairs=4, max_heldout_pairs=2,
                                          tie_ratio=1.0, compare=False,
                                          init_adapter=summary["adapter"]))  # fmt: skip
    assert again["train_steps"] > 0
    cfg = json.loads((tmp_path / "more/adapter/adapter_config.json").read_text())
    assert cfg["r"] == json.loads((tmp_path / "out/adapter/adapter_config.json").read_text())["r"]


def test_bad_tie_ratio_and_init_adapter_are_one_line_errors(tmp_path: Path, capsys):
    from rankgym.cli import main
    from rankgym.errors import UserError
    from rankgym.trainer.judge_pipeline import JudgeTrainJob, check_job

    store = str(_store(tmp_path / "s.db", 2))
    assert main(["judge-train", "--store", store, "--out", str(tmp_path / "o"), "--tie-ratio", "-1"]) == 2  # fmt: skip
    assert "--tie-ratio must be a finite number" in capsys.readouterr().err
    with pytest.raises(UserError, match="--init-adapter .* is not a peft adapter directory"):
        check_job(JudgeTrainJob(tmp_path / "o", stores=[store], init_adapter=str(tmp_path)))
    with pytest.raises(UserError, match="--tie-ratio must be a number in"):
        check_job(JudgeTrainJob(tmp_path / "o", stores=[store], tie_ratio=float("nan")))


def test_the_judge_train_stage_passes_its_tie_ratio_key_and_rejects_a_negative_one(tmp_path: Path):  # fmt: skip
    from rankgym.config import validate_config
    from rankgym.errors import UserError
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.demo import demo_config
    from rankgym.trainer.judge_stage import _job

    raw = demo_config(str(tmp_path / "run"), 1, "judge", 0, judge_split=True)
    raw["judge_train"] = {"tie_ratio": 0.5, "tie_loss": "served-logit", "lambda_tie": 10.0,
                          "max_context_tokens": 1024}  # fmt: skip
    cfg = validate_config(raw, TrainConfig)
    assert cfg.judge_train is not None
    job = _job(cfg, cfg.judge_train, tmp_path / "jt", [])
    assert job.tie_ratio == 0.5 and job.train.tie_loss == "served-logit"
    assert job.train.lambda_tie == 10.0 and job.train.max_context_tokens == 1024
    default = validate_config({**raw, "judge_train": {}}, TrainConfig).judge_train
    assert default is not None
    assert _job(cfg, default, tmp_path / "jt", []).train.max_context_tokens == 768
    raw["judge_train"] = {"tie_ratio": -1}
    with pytest.raises((UserError, ValueError), match="tie_ratio"):
        validate_config(raw, TrainConfig)
