"""The pointwise judge: its prompt, its training data, `judge-train --objective pointwise`
end to end on a tiny random base, and serving it through LiteLLM."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from judge_fakes import answer_traj, rambling

from rankgym.cli import main
from rankgym.judges.point_judge import QUESTION, SYSTEM, point_messages
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.store import Store
from rankgym.trainer.judge_train import JudgeTrainConfig
from rankgym.types import Group

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))
from trainer_helpers import save_tiny_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _store(path: Path, n_tasks: int = 12) -> Path:
    with Store(path) as s:
        for k in range(n_tasks):
            t = f"q{k}"
            s.put_group(Group(env_id="e/Env-v0", task_id=t, trajectories=[
                answer_traj(t, f"the answer is {k}", 1.0), answer_traj(t, "no idea", 0.0),
                answer_traj(t, "still thinking", None, truncated=True)]))  # fmt: skip
        # a task whose attempts all succeed: no pair, but two pointwise examples
        s.put_group(Group(env_id="e/Env-v0", task_id="easy", trajectories=[
            answer_traj("easy", "1", 1.0), answer_traj("easy", "one", 1.0)]))  # fmt: skip
    return path


def test_the_point_prompt_holds_the_task_and_one_attempt_only():
    g = Group(env_id="e/Env-v0", task_id="t",
              trajectories=[answer_traj("t", "4", 1.0), answer_traj("t", "five", 0.0), answer_traj("t", "x", 0.0)])  # fmt: skip
    msgs = build_prompt(g, default_rubric()).messages
    pm = point_messages(msgs, "T2")
    assert pm[0] == {"role": "system", "content": SYSTEM}
    user = pm[1]["content"]
    assert "What is t?" in user and "five" in user and '"4"' not in user and '"x"' not in user
    assert user.endswith(QUESTION) and "T2" not in user and "<trajectory" not in user
    with pytest.raises(ValueError, match="T9"):
        point_messages(msgs, "T9")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=5), st.data())
def test_a_point_prompt_quotes_its_own_attempt_and_none_of_the_others(texts, data):
    trajs = [answer_traj("t", f"<{i}>{x}", 0.0) for i, x in enumerate(texts)]
    msgs = build_prompt(Group(env_id="e/Env-v0", task_id="t", trajectories=trajs), default_rubric()).messages  # fmt: skip
    k = data.draw(st.integers(0, len(texts) - 1))
    user = point_messages(msgs, f"T{k + 1}", max_line_chars=10_000)[1]["content"]
    assert f"<{k}>" in user
    assert all(f"<{i}>" not in user for i in range(len(texts)) if i != k)


def test_point_examples_label_full_marks_yes_and_balance_the_two_classes(tmp_path: Path):
    from rankgym.model import load_causal_lm
    from rankgym.trainer.judge_points import point_examples

    store = _store(tmp_path / "s.db", n_tasks=3)
    _, tok = load_causal_lm(str(save_tiny_model(tmp_path / "tiny")))
    exs, counts = point_examples(tok, [str(store)], {("e/Env-v0", "q0")}, JudgeTrainConfig())
    assert counts == {"trajectories": 8, "success": 4, "failure": 4, "tasks": 3, "too_long": 0, "ties": 0}  # fmt: skip
    yes = tok(" yes", add_special_tokens=False)["input_ids"][0]
    by_text = {ex.key: ex for ex in exs}
    with Store(store, readonly=True) as s:
        trajs = {t.id: t for g in s.iter_groups() for t in g.trajectories}
    for key, ex in by_text.items():
        t = trajs[key.rsplit("|", 1)[1]]  # keyed by store and trajectory id
        assert t.task_id != "q0"  # held out: no example
        assert (ex.correct == yes) == (t.verifiable_reward == 1.0)  # truncated and 0.0 are "no"
    assert sum(e.weight for e in exs if e.correct == yes) == pytest.approx(
        sum(e.weight for e in exs if e.correct != yes)
    )


def test_tie_pairs_become_partner_rows_whose_yes_logits_the_served_loss_pulls_together(tmp_path: Path):  # fmt: skip
    import torch

    from rankgym.judges.judge_data import build_dataset
    from rankgym.model import load_causal_lm
    from rankgym.trainer.judge_loss import pair_losses, tie_partners
    from rankgym.trainer.judge_points import point_examples

    store = _store(tmp_path / "s.db", n_tasks=3)
    _, tok = load_causal_lm(str(save_tiny_model(tmp_path / "tiny")))
    with Store(store, readonly=True) as s:
        ties = build_dataset(
            {"s": s}, heldout_fraction=0.0, balance_length=False, tie_ratio=10.0
        ).train_ties
    exs, counts = point_examples(tok, [str(store)], set(), JudgeTrainConfig(), ties=ties)
    rows = [e for e in exs if e.tie]
    assert counts["ties"] == len(ties) > 0 and len(rows) == 2 * len(ties)
    yes = tok(" yes", add_special_tokens=False)["input_ids"][0]
    assert all(e.correct == yes for e in rows)  # each row reads its own yes-logit
    partner = tie_partners(rows)
    assert sorted(partner) == list(range(len(rows)))  # every row has its pair's other row
    # served-logit: zero when the two yes-logits agree, positive when they differ
    batch = {"tie": torch.ones(2, dtype=torch.bool), "tie_partner": torch.tensor([1, 0])}
    same = pair_losses(torch.tensor([0.7, 0.7]), batch, 2.0, "served-logit")["tie"]
    apart = pair_losses(torch.tensor([2.0, -1.0]), batch, 2.0, "served-logit")["tie"]
    assert float(same) == pytest.approx(0.0, abs=1e-6) and float(apart) > 0.1


ARGS = ["--objective", "pointwise", "--no-length-balance", "--max-heldout-pairs", "3", "--epochs", "1", "--batch-size",
        "4", "--compare-with", "", "--json", "-q"]  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("pj")
    base = save_tiny_model(root / "tiny")
    out = root / "out"
    argv = ["judge-train", "--store", str(_store(root / "s.db")), "--base", str(base), "--out", str(out), *ARGS]  # fmt: skip
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return out, json.loads(buf.getvalue().strip().splitlines()[-1])


def test_a_pointwise_judge_trains_on_every_trajectory_outside_the_held_out_tasks(trained):
    out, summary = trained
    meta = json.loads((out / "adapter" / "judge_train.json").read_text())
    assert meta["objective"] == "pointwise" and meta["point_format"] == 1
    held = {json.loads(x)["task_id"] for x in (out / "data" / "heldout.jsonl").read_text().splitlines()}  # fmt: skip
    points = summary["pointwise"]
    # every task but the held-out ones, the all-success task included; 3 or 2 attempts each
    assert points["tasks"] == 13 - len(held) and "easy" not in held
    assert points["trajectories"] == 3 * (12 - len(held)) + 2 == summary["train_presentations"]
    assert summary["sft_targets"] == 0 and summary["train_steps"] > 0
    assert not (out / "work" / "samples.jsonl").exists()  # no rejection sampling
    row = summary["comparison"]["judges"][summary["judge"]]["all"]
    assert row["pairs"] == 3 and row["errors"] == 0  # checked on held-out pairs


def test_a_rerun_prints_what_the_pointwise_judge_learned_from(trained, capsys):
    out, summary = trained
    root = out.parent
    args = [a for a in ARGS if a != "--json"]
    argv = ["judge-train", "--store", str(root / "s.db"), "--base", str(root / "tiny"), "--out", str(out), *args, "--no-compare"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    p = summary["pointwise"]
    assert (
        f"pointwise: {p['trajectories']} trajectories of {p['tasks']} training-side tasks" in text
    )
    assert f"({p['success']} with full marks = yes, {p['failure']} = no" in text


def test_the_served_pointwise_judge_scores_each_attempt_alone(trained):
    import litellm

    from rankgym.judges.spec import ensure_provider

    _, summary = trained
    ensure_provider(summary["judge"])

    def scores(texts: list[str]) -> dict[str, float]:
        g = Group(env_id="e/Env-v0", task_id="q1", trajectories=[answer_traj("q1", x, 0.0) for x in texts])  # fmt: skip
        r = litellm.completion(model=summary["judge"], messages=build_prompt(g, default_rubric()).messages, max_tokens=8)  # fmt: skip
        return {s["trajectory_id"]: s["score"] for s in json.loads(r.choices[0].message.content)["scores"]}  # fmt: skip

    three = scores(["1", "no", "maybe"])
    assert set(three) == {"T1", "T2", "T3"} and all(0.0 <= v <= 1.0 for v in three.values())
    # a score reads its attempt only: the same attempt scores the same beside others, anywhere
    assert scores(["maybe", "1"]) == {"T1": three["T3"], "T2": three["T1"]}


def test_an_attempt_longer_than_the_context_is_a_context_window_error(trained):
    import litellm

    from rankgym.judges.spec import ensure_provider

    _, summary = trained
    ensure_provider(summary["judge"])
    long = answer_traj("q1", "x", 0.0)
    long.messages[2:] = rambling()
    g = Group(env_id="e/Env-v0", task_id="q1", trajectories=[answer_traj("q1", "1", 1.0), long])
    with pytest.raises(litellm.ContextWindowExceededError, match="pointwise prompt of T2"):
        litellm.completion(model=summary["judge"], messages=build_prompt(g, default_rubric()).messages, max_tokens=8)  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--sources", "human"], "verifier rewards"),
        (["--answer-swaps", "2"], "set them to 0"),
    ],  # fmt: skip
)
def test_pointwise_with_human_labels_only_or_counterfactuals_is_a_one_line_error(
    tmp_path: Path, capsys, extra: list[str], needle: str
):
    store = _store(tmp_path / "s.db", n_tasks=2)
    argv = ["judge-train", "--store", str(store), "--out", str(tmp_path / "o"), "--objective", "pointwise", *extra]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_the_stage_section_passes_its_objective():
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.demo import demo_config
    from rankgym.trainer.judge_stage import _job

    raw = demo_config("/tmp/unused", 2, "judge+verifiable", 0, judge_train=True)
    raw["judge_train"]["objective"] = "pointwise"
    cfg = TrainConfig.model_validate(raw)
    assert cfg.judge_train is not None
    assert _job(cfg, cfg.judge_train, Path("/tmp/unused/jt"), []).objective == "pointwise"
    raw["judge_train"]["objective"] = "listwise"
    with pytest.raises(ValueError, match="pointwise"):
        TrainConfig.model_validate(raw)
