"""Judge data from the policy's own groups: near misses kept, label sources, runs, human labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankgym.judges.judge_data import (
    PairItem,
    baselines,
    build_dataset,
    is_near_miss,
    length_balance,
    tool_call_count,
    verifier_pairs,
)
from rankgym.judges.pair_files import read_jsonl, write_jsonl
from rankgym.store import Store
from rankgym.types import Group, Message, ToolCall, ToolCallFunction, Trajectory


def chain(task: str, calls: int, reward: float, answer: str = "42") -> Trajectory:
    """A fluent tool chain of ``calls`` calls, then an answer."""
    msgs = [Message(role="user", content=f"task {task}")]
    for k in range(calls):
        msgs.append(Message(role="assistant", content="", tool_calls=[
            ToolCall(id=f"c{k}", function=ToolCallFunction(name="lookup", arguments=f'{{"key": "step {k}"}}'))]))  # fmt: skip
        msgs.append(Message(role="tool", content=f"value {k}", tool_call_id=f"c{k}", name="lookup"))
    msgs.append(Message(role="assistant", content=f"The answer is {answer}."))
    return Trajectory(env_id="e/Env-v0", task_id=task, messages=msgs, verifiable_reward=reward)


def test_a_chain_that_stops_one_call_early_is_a_near_miss():
    done, early = chain("t", 3, 1.0), chain("t", 2, 0.0, answer="7")
    assert tool_call_count(done) == 3 and tool_call_count(early) == 2
    assert is_near_miss(done, early) and not is_near_miss(done, chain("t", 1, 0.0))


def test_near_misses_are_taken_first_under_the_cap_and_survive_length_balance(tmp_path: Path):
    with Store(tmp_path / "s.db") as s:
        for k in range(6):
            s.put_group(Group(env_id="e/Env-v0", task_id=f"t{k}", trajectories=[
                chain(f"t{k}", 3, 1.0), chain(f"t{k}", 2, 0.0, "7"), chain(f"t{k}", 0, 0.0, "x"),
                chain(f"t{k}", 0, 0.0, "y")]))  # fmt: skip
        pairs = verifier_pairs({"s": s}, max_per_task=1)
    assert len(pairs) == 6 and all(p.near_miss for p in pairs)
    # every near miss here has the longer trajectory winning: balancing would drop them all
    kept, dropped = length_balance(pairs)
    assert kept == pairs and dropped == 0
    write_jsonl(tmp_path / "p.jsonl", pairs)
    assert all(p.near_miss for p in read_jsonl(tmp_path / "p.jsonl"))


def test_near_misses_count_in_the_length_balance_and_the_others_on_their_side_go_first():
    def nm(task: str, winner_longer: bool) -> PairItem:
        long, short = chain(task, 3, 1.0), chain(task, 2, 0.0)  # one call apart
        if not winner_longer:  # the loser kept calling tools past the answer
            long, short = chain(task, 3, 0.0, "made up"), chain(task, 2, 1.0)
        w, lo = (long, short) if winner_longer else (short, long)
        return PairItem("e/Env-v0", task, w, lo, "verifier", "s", 1.0, near_miss=True)

    def other(task: str, winner_longer: bool) -> PairItem:
        long, short = chain(task, 4, 1.0), chain(task, 0, 0.0, "x")
        w, lo = (long, short) if winner_longer else (short, long)
        return PairItem("e/Env-v0", task, w, lo, "verifier", "s", 1.0)

    near = [nm(f"n{k}", True) for k in range(4)]
    longer_others = [other(f"l{k}", True) for k in range(5)]
    shorter_others = [other(f"s{k}", False) for k in range(6)]
    kept, dropped = length_balance(near + longer_others + shorter_others, seed=0)
    assert all(p in kept for p in near)  # never dropped
    assert sum(p in kept for p in longer_others) == 2 and dropped == 3
    assert baselines(kept)["longer_wins"] == 0.5
    # near misses alone on one side: every other pair there goes, the rest stays tilted
    kept, _ = length_balance(near + longer_others + shorter_others[:1], seed=0)
    assert kept == near + shorter_others[:1]
    assert baselines(kept)["longer_wins"] == 0.8


def _store_with_runs_and_ranking(path: Path) -> tuple[str, str]:
    with Store(path) as s:
        a = Group(run_id="train-run", step=3, env_id="e/Env-v0", task_id="t1",
                  trajectories=[chain("t1", 2, 1.0), chain("t1", 0, 0.0, "no")])  # fmt: skip
        b = Group(run_id="other", env_id="e/Env-v0", task_id="t2",
                  trajectories=[chain("t2", 2, 1.0), chain("t2", 0, 0.0, "no")])  # fmt: skip
        s.put_groups([a, b])
    return a.id, b.id


def test_runs_select_a_training_runs_stored_groups(tmp_path: Path):
    _store_with_runs_and_ranking(tmp_path / "s.db")
    with Store(tmp_path / "s.db", readonly=True) as s:
        ds = build_dataset({"s": s}, heldout_fraction=0.0, balance_length=False, runs=["train-run"])
    assert {p.task_id for p in ds.train} == {"t1"}


def test_a_ranking_submitted_through_the_dashboard_becomes_human_judge_data(tmp_path: Path):
    from rankgym.dashboard.data import write_label
    from rankgym.dashboard.labeling import ranking_from_choices

    path = tmp_path / "s.db"
    gid, _ = _store_with_runs_and_ranking(path)
    with Store(path, readonly=True) as s:
        g = s.get_group(gid)
    good, bad = g.trajectories
    # the labeler disagrees with the verifier: the failed answer ranked first
    write_label(path, gid, "ana", ranking_from_choices({bad.id: 1, good.id: 2}))
    with Store(path, readonly=True) as s:
        ds = build_dataset({"s": s}, heldout_fraction=0.0, balance_length=False, sources=["human"])
    (p,) = ds.train
    assert p.source == "human" and p.winner.id == bad.id and p.loser.id == good.id
    assert ds.stats["train"]["by_env_source"] == {"e/Env-v0/human": 1}
    with Store(path, readonly=True) as s:  # both sources: the verifier's pairs too, each marked
        both = build_dataset({"s": s}, heldout_fraction=0.0, balance_length=False)
    assert sorted(p.source for p in both.train if p.task_id == "t1") == ["human", "verifier"]


def test_an_unknown_label_source_is_refused(tmp_path: Path):
    with Store(tmp_path / "s.db") as s, pytest.raises(ValueError, match="unknown label sources"):
        build_dataset({"s": s}, sources=["crowd"])


def test_human_pairs_get_their_weight_in_the_training_examples():
    from rankgym.trainer.judge_pipeline import examples_of
    from rankgym.trainer.judge_train import JudgeTrainConfig

    class Tok:  # enough of a tokenizer for examples_of: one id per character, " A"/" B" single
        def __call__(self, text, add_special_tokens=False):
            ids = {" A": [1], " B": [2]}.get(text)
            return {"input_ids": ids or [ord(c) % 250 for c in text]}

        def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True):
            return "".join(m["content"] for m in msgs)

    human = PairItem(
        "e/Env-v0", "t", chain("t", 2, 1.0), chain("t", 0, 0.0, "n"), "human", "s", 1.0
    )
    verifier = PairItem("e/Env-v0", "u", chain("u", 2, 1.0), chain("u", 0, 0.0, "n"), "verifier", "s", 1.0)  # fmt: skip
    cfg = JudgeTrainConfig(max_context_tokens=100_000)
    examples, skipped = examples_of(Tok(), [human, verifier], cfg, human_weight=3.0)
    assert skipped == 0
    assert [e.weight for e in examples] == [3.0, 3.0, 1.0, 1.0]


def test_the_pair_cap_takes_the_policys_store_first_and_keeps_the_length_balance():
    from rankgym.trainer.judge_pipeline import cap_pairs

    def pair(task: str, store: str, winner_longer: bool) -> PairItem:
        long, short = chain(task, 4, 1.0), chain(task, 0, 0.0, "x")
        if not winner_longer:
            long, short = chain(task, 4, 0.0, "wrong"), chain(task, 0, 1.0)
        w, lo = (long, short) if winner_longer else (short, long)
        return PairItem("e/Env-v0", task, w, lo, "verifier", store, 1.0)

    scripted = [pair(f"s{k}", "scripted.db", True) for k in range(20)]
    scripted += [pair(f"t{k}", "scripted.db", False) for k in range(6)]
    policy = [pair(f"p{k}", "grpo.db", k % 2 == 0) for k in range(4)]
    capped = cap_pairs(scripted + policy, 12, seed=0, prefer={"grpo.db"})
    assert len(capped) == 12 and all(p in capped for p in policy)
    assert baselines(capped)["longer_wins"] == 0.5
    assert baselines(cap_pairs(scripted + policy, 12, seed=0))["longer_wins"] == 0.5
