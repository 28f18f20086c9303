"""Answer agreement: final answers read from a group prompt, the agreement line of a pointwise
judge (`judge-train --objective pointwise --agreement`), its training and serving, and its
check, which shows each held-out pair among other attempts of its task."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from judge_fakes import answer_traj

from rankgym.cli import main
from rankgym.judge_adapter import reads_group
from rankgym.judges.answers import agreement_counts, agreement_line, answer_key, final_answer
from rankgym.judges.judge_compare import judge_pairs
from rankgym.judges.judge_data import PairItem
from rankgym.judges.point_judge import QUESTION, point_messages
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.store import Store
from rankgym.types import Group, Message, ToolCall, ToolCallFunction, Trajectory

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))
from trainer_helpers import save_tiny_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _prompt(trajs: list[Trajectory]) -> list[dict]:
    return build_prompt(Group(env_id="e/Env-v0", task_id="t", trajectories=trajs), default_rubric()).messages  # fmt: skip


def test_answer_keys_compare_the_last_number_or_else_the_words():
    assert answer_key("The answer is 1,037.") == answer_key("1037") == answer_key("so: 1037.0")
    assert answer_key("The answer is 12.5") != answer_key("The answer is 12.")
    assert answer_key("Monday!") == answer_key("  monday ") != answer_key("Tuesday")


def test_only_a_reply_that_ended_the_episode_is_a_final_answer():
    call = Message(role="assistant", tool_calls=[ToolCall(id="c0", function=ToolCallFunction(name="f", arguments="{}"))])  # fmt: skip
    done = answer_traj("t", "The answer is 4.", 1.0)
    calling = Trajectory(env_id="e/Env-v0", task_id="t", verifiable_reward=0.0, messages=[*done.messages[:2], call])  # fmt: skip
    cut = answer_traj("t", "thinking...", None, truncated=True)
    counts = agreement_counts(_prompt([done, answer_traj("t", "It is 4", 0.5), calling, cut]))
    assert counts == {"T1": (1, 3), "T2": (1, 3), "T3": None, "T4": None}
    assert final_answer('call "f" {}\nresult: "4"') is None
    assert agreement_line(None) == "Agreement: this attempt gave no final answer."
    assert agreement_line((2, 5)) == "Agreement: 2 of the 5 other attempts at this task gave the same final answer."  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=60).filter(str.strip))
def test_the_final_answer_is_the_reply_as_written_whatever_it_holds(text):
    # two attempts, so the reply is a block of its own, not the common prefix
    msgs = _prompt([answer_traj("t", text, 1.0), answer_traj("t", "other " + text, 0.0)])
    from rankgym.judges.pair_judge import parse_group_prompt

    context, _, blocks = parse_group_prompt(msgs[-1]["content"])
    assert final_answer(blocks["T1"], context) == text


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["4", "four", "The answer is 4.", "5", "x"]), min_size=2, max_size=7), st.randoms())  # fmt: skip
def test_agreement_counts_the_others_with_the_same_key_in_any_order(replies, rnd):
    trajs = [answer_traj("t", r, 0.0) for r in replies]
    counts = agreement_counts(_prompt(trajs))
    by_id = {t.id: counts[f"T{i + 1}"] for i, t in enumerate(trajs)}
    for i, t in enumerate(trajs):
        same = sum(answer_key(r) == answer_key(replies[i]) for r in replies) - 1
        assert by_id[t.id] == (same, len(replies) - 1)
    rnd.shuffle(trajs)
    again = agreement_counts(_prompt(trajs))
    assert {t.id: again[f"T{i + 1}"] for i, t in enumerate(trajs)} == by_id


def test_the_point_prompt_states_agreement_only_when_asked():
    msgs = _prompt(
        [answer_traj("t", "4", 1.0), answer_traj("t", "4.0", 1.0), answer_traj("t", "5", 0.0)]
    )
    plain = point_messages(msgs, "T3")[1]["content"]
    counted = point_messages(msgs, "T3", agreement=agreement_counts(msgs))[1]["content"]
    assert "Agreement" not in plain and plain.endswith(QUESTION)
    assert counted == plain.replace(QUESTION, agreement_line((0, 2)) + "\n\n" + QUESTION)


def test_a_checked_pair_is_shown_with_its_peers_and_only_its_two_scores_are_read():
    win, lose = answer_traj("t", "4", 1.0), answer_traj("t", "5", 0.0)
    peers = [
        answer_traj("t", "4", 1.0),
        answer_traj("t", "4", 1.0),
        win,
    ]  # the pair's own copy is left out
    pair = PairItem("e/Env-v0", "t", win, lose, "verifier", "s", 1.0)
    seen: list[list[str]] = []

    def respond(messages: list[dict[str, str]]) -> str:
        from rankgym.judges.pair_judge import parse_group_prompt

        _, _, blocks = parse_group_prompt(messages[-1]["content"])
        seen.append(list(blocks))
        counts = agreement_counts(messages)
        scores = [{"trajectory_id": k, "rationale": ".", "score": (c or (0, 1))[0] / 4}
                  for k, c in counts.items()]  # fmt: skip
        return json.dumps({"scores": scores})

    rows = judge_pairs(respond, [pair], default_rubric(), peers=lambda p: peers)
    assert seen == [["T1", "T2", "T3", "T4"]] * 2  # the pair, then its two other peers
    assert [(r["winner"], r["loser"]) for r in rows] == [(0.5, 0.0), (0.5, 0.0)]
    alone = judge_pairs(respond, [pair], default_rubric())
    assert [(r["winner"], r["loser"]) for r in alone] == [(0.0, 0.0)] * 2


def _store(path: Path, n_tasks: int = 10) -> Path:
    with Store(path) as s:
        for k in range(n_tasks):
            t = f"q{k}"
            s.put_group(Group(env_id="e/Env-v0", task_id=t, trajectories=[
                answer_traj(t, f"the answer is {k}", 1.0), answer_traj(t, f"it is {k}", 1.0),
                answer_traj(t, f"maybe {k + 1}", 0.0), answer_traj(t, "still thinking", None, truncated=True)]))  # fmt: skip
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("agree")
    base = save_tiny_model(root / "tiny")
    argv = ["judge-train", "--store", str(_store(root / "s.db")), "--base", str(base), "--out", str(root / "out"),
            "--objective", "pointwise", "--agreement", "--no-length-balance", "--max-heldout-pairs", "4",
            "--epochs", "1", "--batch-size", "4", "--compare-with", "", "--json", "-q"]  # fmt: skip
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return root / "out", json.loads(buf.getvalue().strip().splitlines()[-1])


def test_an_agreement_judge_is_recorded_served_on_the_group_and_checked_among_peers(trained):
    import litellm

    from rankgym.judges.spec import ensure_provider

    out, summary = trained
    meta = json.loads((out / "adapter" / "judge_train.json").read_text())
    assert meta["objective"] == "pointwise" and meta["agreement"] is True and summary["agreement"]
    assert reads_group(summary["judge"]) and not reads_group("local/smollm2-yesno")
    row = summary["comparison"]["judges"][summary["judge"]]["all"]
    assert row["pairs"] > 0 and row["errors"] == 0
    cached = list((out / "work" / "judged").glob("*.json"))
    assert cached  # the check's rows, under a key of their own (pairs shown among peers)
    ensure_provider(summary["judge"])

    def score_of_first(texts: list[str]) -> float:
        g = Group(env_id="e/Env-v0", task_id="q1", trajectories=[answer_traj("q1", x, 0.0) for x in texts])  # fmt: skip
        r = litellm.completion(model=summary["judge"], messages=build_prompt(g, default_rubric()).messages, max_tokens=8)  # fmt: skip
        return json.loads(r.choices[0].message.content)["scores"][0]["score"]

    # the same attempt, its answer shared by the others or by none: two different prompts
    assert score_of_first(["it is 1", "1", "the answer is 1"]) != score_of_first(
        ["it is 1", "2", "3"]
    )
    # ... and the same score wherever the agreeing others stand
    assert score_of_first(["it is 1", "1", "3"]) == score_of_first(["it is 1", "3", "1"])


def test_task_peers_are_other_attempts_of_the_pairs_task(trained):
    from rankgym.trainer.judge_heldout import task_peers
    from rankgym.trainer.judge_job import JudgeTrainJob

    out, _ = trained
    store = out.parent / "s.db"
    with Store(store, readonly=True) as s:
        trajs = [t for g in s.iter_groups() if g.task_id == "q3" for t in g.trajectories]
    pair = PairItem("e/Env-v0", "q3", trajs[0], trajs[2], "verifier", str(store), 1.0)
    got = task_peers(JudgeTrainJob(out, stores=[str(store)]), [pair], n=6)(pair)
    assert {t.id for t in got} == {trajs[1].id, trajs[3].id}
    assert task_peers(JudgeTrainJob(out, stores=[str(store)]), [pair], n=1)(pair) == [got[0]]


def test_agreement_without_a_pointwise_judge_is_a_one_line_error(tmp_path: Path, capsys):
    argv = ["judge-train", "--store", str(_store(tmp_path / "s.db", 2)), "--out", str(tmp_path / "o"), "--agreement"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--objective pointwise" in err and "Traceback" not in err
