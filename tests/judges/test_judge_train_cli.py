"""`rankgym judge-train` end to end on a tiny random base: data, sampling, LoRA, serving, resume."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from judge_fakes import rambling

from rankgym.cli import main
from rankgym.store import Store
from rankgym.types import Group, Message, Trajectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))
from trainer_helpers import save_tiny_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _traj(task: str, text: str, reward: float) -> Trajectory:
    return Trajectory(env_id="e/Env-v0", task_id=task, verifiable_reward=reward, messages=[
        Message(role="user", content=f"What is {task}?"), Message(role="assistant", content=text)])  # fmt: skip


def _store(path: Path, n_tasks: int = 12) -> Path:
    with Store(path) as s:
        for k in range(n_tasks):
            bad = "no" if k % 2 else "a long wrong and rambling answer"
            s.put_group(Group(env_id="e/Env-v0", task_id=f"q{k}",
                              trajectories=[_traj(f"q{k}", f"the answer is {k}", 1.0), _traj(f"q{k}", bad, 0.0)]))  # fmt: skip
    return path


ARGS = ["--max-train-pairs", "6", "--max-heldout-pairs", "3", "--samples", "2", "--reason-tokens",
        "2", "--epochs", "1", "--batch-size", "4", "--compare-with", "", "--json", "-q"]  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("jt")
    base = save_tiny_model(root / "tiny")
    store = _store(root / "s.db")
    out = root / "out"
    argv = ["judge-train", "--store", str(store), "--base", str(base), "--out", str(out), *ARGS]
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return out, store, json.loads(buf.getvalue().strip().splitlines()[-1])


def test_judge_train_writes_a_peft_adapter_with_its_metadata_and_a_report(trained):
    out, _, summary = trained
    adapter = out / "adapter"
    assert (adapter / "adapter_config.json").is_file()
    assert (adapter / "adapter_model.safetensors").is_file()
    meta = json.loads((adapter / "judge_train.json").read_text())
    assert meta["pair_format"] == 1 and meta["config"]["samples"] == 2
    assert summary["judge"] == f"local/smollm2@{adapter}"
    assert summary["train_pairs"] == 6 and summary["train_presentations"] == 12
    assert summary["train_steps"] == 3 == summary["planned_steps"]
    assert not (out / "adapter.tmp").exists() and not (out / "work" / "checkpoint.tmp").exists()
    report = json.loads((out / "report.json").read_text())
    row = report["comparison"]["judges"][summary["judge"]]["all"]
    assert row["pairs"] == 3 and row["errors"] == 0
    assert 0.0 <= row["pairwise_accuracy"] <= 1.0 and 0.0 <= row["position_consistency"] <= 1.0
    # held-out tasks are not training tasks
    keys = lambda f: {json.loads(x)["task_id"] for x in (out / "data" / f).read_text().splitlines()}  # noqa: E731
    assert keys("train.jsonl").isdisjoint(keys("heldout.jsonl"))


def test_a_rerun_reuses_samples_and_the_checkpoint(trained):
    out, store, first = trained
    samples = (out / "work" / "samples.jsonl").read_text()
    base = Path(json.loads((out / "adapter" / "judge_train.json").read_text())["base"])
    argv = ["judge-train", "--store", str(store), "--base", str(base), "--out", str(out), *ARGS,
            "--no-compare"]  # fmt: skip
    assert main(argv) == 0
    assert (out / "work" / "samples.jsonl").read_text() == samples  # nothing re-sampled
    again = json.loads((out / "report.json").read_text())
    assert again["train_steps"] == first["train_steps"]  # resumed at the end: no new steps
    assert again["final_train"] == first["final_train"]


def test_the_served_judge_scores_a_group_of_three_through_litellm(trained):
    import litellm

    from rankgym.judges.prompt import build_prompt, default_rubric
    from rankgym.judges.spec import ensure_provider

    out, _, summary = trained
    ensure_provider(summary["judge"])
    g = Group(env_id="e/Env-v0", task_id="q1",
              trajectories=[_traj("q1", "1", 1.0), _traj("q1", "no", 0.0), _traj("q1", "maybe", 0.0)])  # fmt: skip
    p = build_prompt(g, default_rubric())
    r = litellm.completion(model=summary["judge"], messages=p.messages, max_tokens=64)
    scores = {
        s["trajectory_id"]: s["score"] for s in json.loads(r.choices[0].message.content)["scores"]
    }
    assert set(scores) == {"T1", "T2", "T3"}
    assert sum(scores.values()) == pytest.approx(1.5, abs=3e-4)  # mean win rates of 3 pairs


def test_a_pair_longer_than_the_context_is_a_context_window_error(trained):
    import litellm

    from rankgym.judges.prompt import build_prompt, default_rubric
    from rankgym.judges.spec import ensure_provider

    _, _, summary = trained
    ensure_provider(summary["judge"])
    long = _traj("q1", "x", 0.0)
    long.messages[1:] = rambling()
    g = Group(env_id="e/Env-v0", task_id="q1", trajectories=[_traj("q1", "1", 1.0), long])
    with pytest.raises(litellm.ContextWindowExceededError, match="pair prompt has"):
        litellm.completion(model=summary["judge"], messages=build_prompt(g, default_rubric()).messages, max_tokens=8)  # fmt: skip


def test_missing_store_and_unlabelled_store_are_one_line_errors(tmp_path: Path, capsys):
    assert (
        main(["judge-train", "--store", str(tmp_path / "nope.db"), "--out", str(tmp_path / "o")])
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    with Store(tmp_path / "u.db") as s:
        s.put_group(Group(env_id="e/Env-v0", task_id="q", trajectories=[_traj("q", "a", 1.0), _traj("q", "b", 1.0)]))  # fmt: skip
    assert (
        main(["judge-train", "--store", str(tmp_path / "u.db"), "--out", str(tmp_path / "o")]) == 2
    )
    err = capsys.readouterr().err
    assert "labelled pairs" in err and "Traceback" not in err


def test_compare_only_reuses_cached_judgements_of_the_held_out_pairs(trained):
    out, _, summary = trained
    cached = sorted((out / "work" / "judged").iterdir())
    assert len(cached) == 1  # the trained judge's rows from the training run
    before = cached[0].stat().st_mtime_ns
    assert (
        main(["judge-train", "--out", str(out), "--compare-only", "--compare-with", "", "-q"]) == 0
    )
    assert cached[0].stat().st_mtime_ns == before  # nothing judged again
    report = json.loads((out / "comparison-only.json").read_text())
    assert report["judges"] == summary["comparison"]["judges"]
    assert main(["judge-train", "--out", str(out / "none"), "--compare-only"]) == 2


def test_the_commands_default_flags_make_the_library_jobs_defaults():
    import argparse

    from rankgym.trainer import judge_train_command as jtc
    from rankgym.trainer.judge_pipeline import JudgeTrainJob

    p = argparse.ArgumentParser()
    jtc.JUDGE_TRAIN.add_arguments(p)
    assert jtc._job(p.parse_args(["--out", "o"])) == JudgeTrainJob(Path("o"))


def test_judge_training_runs_as_a_library_call_without_argparse(tmp_path: Path):
    from rankgym.trainer.judge_pipeline import JudgeTrainJob, run_judge_train
    from rankgym.trainer.judge_train import JudgeTrainConfig

    base = save_tiny_model(tmp_path / "tiny")
    store = _store(tmp_path / "s.db")
    train = JudgeTrainConfig(samples=2, reason_tokens=0, epochs=1, batch_size=4)
    job = JudgeTrainJob(tmp_path / "out", stores=[str(store)], base=str(base), train=train,
                        max_train_pairs=4, max_heldout_pairs=2, compare=False)  # fmt: skip
    summary = run_judge_train(job)
    assert summary["judge"] == f"local/smollm2@{tmp_path / 'out' / 'adapter'}"
    assert summary["train_pairs"] == 4 and "comparison" not in summary
    assert json.loads((tmp_path / "out" / "report.json").read_text())["judge"] == summary["judge"]


def test_a_job_without_any_labels_is_a_one_line_error(tmp_path: Path):
    from rankgym.errors import UserError
    from rankgym.trainer.judge_pipeline import JudgeTrainJob, run_judge_train

    with pytest.raises(UserError, match="pass at least one --store"):
        run_judge_train(JudgeTrainJob(tmp_path / "out"))
    with pytest.raises(UserError, match=r"store '.*nope.db' does not exist"):
        run_judge_train(JudgeTrainJob(tmp_path / "out", stores=[str(tmp_path / "nope.db")]))
