"""Issue 25 on the dashboard, under AppTest and as units: the blind view has no tells, the queue
state is per labeler, others-ranked groups come first, the reveal and the Groups page speak of
the page's letters, code arguments are Python blocks, and judge latency is split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from rankgym.dashboard import labeling
from rankgym.dashboard.render import split_arguments
from rankgym.dashboard.sample import build_labeling_store
from rankgym.judges.record import judge_summary, judge_timing
from rankgym.store import Store
from rankgym.types import Judgement, TrajectoryScore

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


@pytest.fixture
def practice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    path = tmp_path / "practice.db"
    summary = build_labeling_store(path)
    monkeypatch.setenv("RANKGYM_STORE", str(path))
    return path, summary


def label_page(name: str | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    at.switch_page("views/label.py").run()
    if name:
        at.text_input(key="w_labeler").input(name).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def page_text(at: AppTest) -> str:
    parts = []
    for kind in ("markdown", "caption", "title", "info", "success", "error", "text", "code"):
        parts += [str(e.value) for e in at.get(kind)]
    parts += [t.label for t in at.tabs] + [b.label for b in at.selectbox]
    return "\n".join(parts)


def shown(at: AppTest, name: str) -> str:
    return at.session_state["blind_queues"][name]["gid"]


def rank_all(at: AppTest, rank: int = 1) -> None:
    for box in [b for b in at.selectbox if b.key and b.key.startswith("rank_")]:
        box.select(rank)
    at.button(key="submit_ranking").click().run()
    assert not at.exception, [e.value for e in at.exception]


def caption_left(at: AppTest) -> str:
    return next(c.value for c in at.caption if "groups left" in c.value)


def test_the_blind_view_shows_no_token_counts_ids_run_or_judge_wording(practice) -> None:
    path, summary = practice
    at = label_page("zed")
    text = page_text(at)
    gid = shown(at, "zed")
    group = Store(path, readonly=True).get_group(gid)
    assert "completion tokens" not in text and "prompt tokens" not in text
    for t in group.trajectories:
        assert t.id not in text
    assert gid not in text and "label-practice" not in text and "embedded@" not in text
    assert "ahead of" not in text and "rationale" not in text.lower()  # judge wording
    assert not at.metric
    # nor in widget keys (Streamlit writes them into the page as CSS classes)
    keys = [w.key for w in (*at.selectbox, *at.button) if w.key]
    assert keys and not any(gid in k or "grp-" in k for k in keys)


def test_the_caption_counts_what_the_next_clicks_give(practice) -> None:
    path, _ = practice
    at = label_page("zed")
    assert "4 groups left" in caption_left(at) and "this one included" in caption_left(at)
    for left in (3, 2, 1, 0):
        rank_all(at)
        assert f"{left} groups left" in caption_left(at)
        assert "this one included" not in caption_left(at)
        at.button(key="next_group").click().run()
        if left:
            assert f"{left} groups left" in caption_left(at)
    assert any("Queue empty" in s.value for s in at.success)
    assert len(Store(path, readonly=True).human_rankings(labeler="zed")) == 4


def test_a_name_change_starts_that_names_own_queue(practice) -> None:
    path, summary = practice
    at = label_page("alice")
    first = shown(at, "alice")
    rank_all(at)
    at.text_input(key="w_labeler").input("bob").run()
    assert "bob" in at.session_state["blind_queues"]
    assert "3 groups left" in caption_left(at)  # bob's queue: all but the 3 others ranked
    at.checkbox(key="q_include_labeled").check().run()
    # with the box ticked: 6 groups, and the first ones bob gets are the ones others ranked
    assert "6 groups left" in caption_left(at)
    others = set(summary["ranked"]) | {first}
    got = []
    for _ in range(len(others)):
        got.append(shown(at, "bob"))
        rank_all(at)
        at.button(key="next_group").click().run()
    assert set(got) == others
    assert shown(at, "bob") not in others  # then unlabeled ones
    at.text_input(key="w_labeler").input("alice").run()  # back to alice: her own queue
    assert "5 groups left" in caption_left(at)  # box still ticked: all but the one she ranked


def test_others_ranked_groups_come_first_in_the_queue(practice) -> None:
    import random

    path, summary = practice
    with Store(path, readonly=True) as s:
        q = labeling.LabelQueue("dora", include_labeled=True)
        picks = {labeling.next_group(s, q, rng=random.Random(i)) for i in range(20)}
        assert picks <= set(summary["ranked"])
        plain = {labeling.next_group(s, labeling.LabelQueue("dora"), rng=random.Random(i)) for i in range(20)}  # fmt: skip
        assert not plain & set(summary["ranked"])


def test_each_group_opens_on_fresh_widgets_and_skip_confirms(practice) -> None:
    at = label_page("zed")
    keys = {b.key for b in at.selectbox if b.key and b.key.startswith("rank_")}
    at.selectbox(key=sorted(keys)[0]).select(2).run()
    at.button(key="skip_group").click().run()
    assert any("Skipped the previous group" in i.value for i in at.info)
    new_keys = {b.key for b in at.selectbox if b.key and b.key.startswith("rank_")}
    assert new_keys.isdisjoint(keys)  # new widgets: no rank and no tab carried over
    assert all(b.value is None for b in at.selectbox if b.key in new_keys)


def test_the_reveal_names_trajectories_by_the_labelers_letters(practice) -> None:
    path, _ = practice
    at = label_page("zed")
    gid = shown(at, "zed")
    rank_all(at)
    reveal = at.dataframe[0].value
    group = Store(path, readonly=True).get_group(gid)
    order = labeling.presentation_order(gid, "zed", len(group.trajectories))
    assert list(reveal["trajectory"]) == ["A", "B", "C", "D"]
    for pos, i in enumerate(order):
        row = reveal.iloc[pos]
        assert row["id"] == group.trajectories[i].id
        # the sample judge wrote "T{k+1} is ..." about trajectory k of the group's order
        assert f"{'ABCD'[pos]} is " in row["judge rationale"], row["judge rationale"]
        assert "T1" not in row["judge rationale"] and f"T{i + 1}" not in row["judge rationale"]


def test_rationale_letters_follow_the_presentation_that_wrote_them() -> None:
    j = Judgement(
        group_id="g",
        spec_hash="h",
        scores=[TrajectoryScore(trajectory_id="x", score=0.5, rationale="T2 beats T1; T9 ?")],
        presentations=[{"order": ["y", "x"]}],
    )
    labels = labeling.judge_labels(j, "x")
    assert labels == {"T1": "y", "T2": "x"}
    out = labeling.rationale_letters("T2 beats T1; T9 ?", labels, {"x": "A", "y": "B"})
    assert out == "A beats B; T9 ?"  # unknown labels stay
    split = j.model_copy(
        update={
            "presentations": [
                {
                    "order": ["x", "y", "z"],
                    "subsets": [{"order": ["z", "y"]}, {"order": ["y", "x"]}],
                }
            ]
        }
    )
    assert labeling.judge_labels(split, "x") == {"T1": "y", "T2": "x"}  # the part holding x
    assert labeling.judge_labels(None, "x") == {}


def test_the_groups_page_table_of_rankings_is_in_letter_order(practice) -> None:
    names = {"t1": "A", "t2": "B", "t3": "C", "t4": "D"}
    rows = [
        {"labeler": "l", "blind": True, "ranking": {"t2": 1.0, "t3": 2.0, "t1": 3.0, "t4": 4.0}},
        {"labeler": "m", "blind": True, "ranking": {"t4": 1.0, "gone": 2.0}},
    ]
    df = labeling.human_rankings_table(rows, names)
    assert list(df.columns) == ["labeler", "blind", "A", "B", "C", "D", "gone"]
    assert list(df.iloc[0][["A", "B", "C", "D"]]) == [3.0, 1.0, 2.0, 4.0]

    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    at.query_params["group"] = "grp-lab-0"  # carol ranked it
    at.switch_page("views/groups.py").run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "labeler" in d.value.columns)
    assert list(table.columns) == ["labeler", "blind", "A", "B", "C", "D"]
    assert list(table.iloc[0][["A", "B", "C", "D"]]) == [1.0, 2.0, 3.0, 4.0]
    captions = " ".join(c.value for c in at.caption)
    assert "judge service +" in captions and "queued" in captions  # the latency split
    texts = [t.value for t in at.text if t.value.startswith("Judge rationale")]
    assert texts and not any("T1" in t or "T2" in t for t in texts)  # the page's letters


def test_code_arguments_are_python_blocks_and_long_strings_text_blocks() -> None:
    code = "def f(n):\n    return n + 1\n"
    blocks = split_arguments("submit", json.dumps({"code": code}))
    assert blocks == [("code", code, "python")]  # real newlines, not an escaped JSON string
    long = "word " * 40
    blocks = split_arguments("search", json.dumps({"query": long, "limit": 3}))
    assert blocks == [(None, '{\n  "limit": 3\n}', "json"), ("query", long, None)]
    assert split_arguments("calc", '{"expression": "2*3"}') == [
        (None, '{\n  "expression": "2*3"\n}', "json")
    ]
    assert split_arguments("x", "not json") == [(None, "not json", None)]
    assert split_arguments("x", "[1, 2]") == [(None, "[\n  1,\n  2\n]", "json")]
    assert split_arguments("anything", json.dumps({"code": "x = 1"}))[0][2] == "python"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["submit", "run_python", "search", "calc"]))
def test_split_arguments_never_raises_and_keeps_every_string(raw: str, tool: str) -> None:
    blocks = split_arguments(tool, raw)
    assert blocks and all(isinstance(text, str) for _, text, _ in blocks)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=120),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(max_size=10), json_values, max_size=5), st.sampled_from(["submit", "q"])
)
def test_split_arguments_shows_every_argument_exactly_once(args: dict, tool: str) -> None:  # fmt: skip
    blocks = split_arguments(tool, json.dumps(args))
    named = [k for k, _, _ in blocks if k is not None]
    rest = [json.loads(t) for k, t, lang in blocks if k is None and lang == "json"]
    assert len(named) == len(set(named))
    shown_keys = set(named) | {k for r in rest for k in r}
    assert shown_keys == set(args)
    for k, text, _ in blocks:
        if k is not None:
            assert text == args[k]


def test_judge_timing_and_summary_split_service_from_queue() -> None:
    j = Judgement(
        group_id="g",
        spec_hash="h",
        presentations=[
            {"order": [], "service_s": 2.0, "queue_s": 40.0},
            {"order": [], "service_s": 1.0, "queue_s": 3.0},
            {"order": [], "service_s": 9.0, "queue_s": 9.0, "cached": True},  # not paid again
        ],
        latency_s=46.0,
    )
    assert judge_timing(j) == (3.0, 43.0)
    old = Judgement(group_id="g", spec_hash="h", presentations=[{"order": []}], latency_s=5.0)
    assert judge_timing(old) is None  # written before the split was measured
    s = judge_summary([j, old], "h")
    assert s["service_s_mean"] == 3.0 and s["queue_s_mean"] == 43.0


def test_the_runs_page_data_split_judge_latency_per_step(practice) -> None:
    from rankgym.dashboard.data import compute_store_curves

    path, _ = practice
    with Store(path, readonly=True) as s:
        ops = compute_store_curves(s, "label-practice")["judge_ops"]
    assert {"latency_s", "service_s", "queue_s"} <= set(ops.columns)
    row = ops.iloc[0]
    assert 0 < row["service_s"] <= row["latency_s"] and row["queue_s"] >= 0
    assert abs(row["service_s"] + row["queue_s"] - row["latency_s"]) < 0.05


def test_a_run_without_no_signal_groups_says_so_instead_of_an_empty_chart(practice) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    said = [s.value for s in at.success if "Groups without learning signal" in s.value]
    assert said == ["Groups without learning signal: none in 1 step(s); every group's rewards differed."]  # fmt: skip
    assert not any("kl_coef" in i.value for i in at.info)
