"""Dashboard pages under streamlit.testing.v1.AppTest, on the sample store, plus the pieces
behind them (escaping, the blind-ranking queue, the CLI command)."""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from rankgym.dashboard import commands, labeling
from rankgym.dashboard.render import letter, md_escape
from rankgym.dashboard.sample import XSS_GROUP_ID, XSS_TEXT, build_sample_store
from rankgym.errors import UserError
from rankgym.store import Store

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    summary = build_sample_store(path)
    return path, summary


@pytest.fixture
def store(sample: tuple[Path, dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the sample store (tests may write labels), set as RANKGYM_STORE."""
    src, _ = sample
    dst = tmp_path / "store.db"
    with Store(src) as s:  # checkpoint the WAL so one file is the whole store
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(src, dst)
    monkeypatch.setenv("RANKGYM_STORE", str(dst))
    return dst


def app(page: str | None = None, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    if page:
        if query:
            at.query_params.update(query)
        at.switch_page(f"views/{page}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def markdown_values(at: AppTest) -> list[str]:
    """Every string Streamlit renders as Markdown on the page."""
    out = []
    for kind in ("markdown", "caption", "title", "subheader", "header"):
        out += [e.value for e in at.get(kind)]
    for kind in ("info", "warning", "error", "success"):
        out += [e.value for e in at.get(kind)]
    return out


def settle(at: AppTest, timeout: float = 60.0) -> AppTest:
    """Rerun until background agreement results are in and fresh."""
    deadline = time.monotonic() + timeout
    while True:
        texts = [e.value for e in at.info] + [e.value for e in at.caption]
        busy = any(
            "Computing" in t or "updating" in t or "still being computed" in t for t in texts
        )
        if not busy:
            return at
        assert time.monotonic() < deadline, texts
        time.sleep(0.2)
        at.run()
        assert not at.exception, [e.value for e in at.exception]


def shown_gid(at: AppTest, labeler: str) -> str:
    """The group the blind-ranking page shows ``labeler`` right now."""
    return at.session_state["blind_queues"][labeler]["gid"]


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


# ------------------------------------------------------------------------------ pages


def test_runs_page_draws_curves_for_the_chosen_run(store: Path) -> None:
    at = settle(app())
    assert at.title[0].value == "Runs"
    assert at.selectbox(key="w_run1").value == "demo-train"  # a train run by default
    charts = at.get("vega_lite_chart")
    assert len(charts) >= 5  # reward, latency, cost, KL, zero-variance (+ other metrics)
    assert not [i for i in at.info if "KL" in i.value]
    at.selectbox(key="w_run1").select("baseline-eval").run()
    settle(at)
    assert any("No KL logged" in i.value for i in at.info)


def test_groups_filters_search_and_paging(store: Path) -> None:
    at = app("groups")
    assert "23 groups match" in at.caption[0].value
    at.radio(key="f_labeled").set_value("yes").run()
    assert "5 groups match" in at.caption[0].value
    at.radio(key="f_labeled").set_value("any").run()
    at.radio(key="f_hack").set_value("yes").run()
    hacked = {r for r in at.dataframe[0].value["id"]}
    assert XSS_GROUP_ID in hacked and "grp-train-s0-e2" in hacked
    assert all(at.dataframe[0].value["n_hack"] > 0)
    at.radio(key="f_hack").set_value("any").run()
    at.text_input(key="f_search").input("Harbor Loft").run()
    ids = list(at.dataframe[0].value["id"])
    assert ids and all("-e1" in i or i in ("grp-base-1",) for i in ids)
    at.text_input(key="f_search").input("").run()
    at.selectbox(key="w_run").select("demo-train").run()
    at.selectbox(key="f_step").select(3).run()
    assert "3 groups match" in at.caption[0].value
    assert at.number_input[0].max == 1  # one page of results


def test_group_link_opens_group_and_renders_injection_as_text(store: Path) -> None:
    at = app("groups", {"group": XSS_GROUP_ID})
    assert at.subheader[0].value == "Group " + md_escape(XSS_GROUP_ID)
    texts = [t.value for t in at.text]
    assert XSS_TEXT in texts  # whole payload, verbatim, through st.text (no Markdown, no HTML)
    assert any("<img src=x onerror=alert(2)>" in t for t in texts)  # rationale, as text
    codes = [c.value for c in at.code]
    assert "<script>alert('tool')</script> 42" in codes  # tool result in a code block
    assert any('"expression"' in c for c in codes)  # tool call arguments, pretty JSON
    for md in markdown_values(at):  # nothing untrusted reaches Markdown unescaped
        assert "<img" not in md and "<script" not in md and "](http" not in md
    assert len(at.columns) >= 3  # 3 trajectories side by side
    assert any(m.label == "judge" and m.value == "0.95" for m in at.metric)


def test_large_groups_use_tabs(store: Path) -> None:
    at = app("groups", {"group": "grp-train-s1-e0"})  # 4 trajectories
    assert [t.label for t in at.tabs] == [f"Trajectory {x}" for x in "ABCD"]


def test_blind_ranking_writes_a_label_and_agreement_updates(store: Path) -> None:
    at = settle(app("agreement"))
    assert metric(at, "labeled by people") == "5"
    before = len(Store(store, readonly=True).human_rankings(labeler="carol"))
    assert before == 0

    at.switch_page("views/label.py").run()
    assert any("Enter your name" in i.value for i in at.info)
    at.text_input(key="w_labeler").input("carol").run()
    assert not at.exception
    # Blind: no scores, rewards, rationales or trajectory ids on the page.
    assert not at.metric
    assert not [t for t in at.text if t.value.startswith("Judge rationale")]
    rank_boxes = [b for b in at.selectbox if b.key and b.key.startswith("rank_")]
    assert len(rank_boxes) >= 2
    gid = shown_gid(at, "carol")
    group = Store(store, readonly=True).get_group(gid)
    page_text = " ".join(markdown_values(at))
    for t in group.trajectories:
        assert t.id not in page_text and md_escape(t.id) not in page_text

    at.button(key="submit_ranking").click().run()  # nothing ranked yet
    assert any("have no rank yet" in e.value for e in at.error)
    rank_boxes = [b for b in at.selectbox if b.key and b.key.startswith("rank_")]
    for i, box in enumerate(rank_boxes):
        box.select(1 if i < 2 else i)  # A and B tied first
    at.button(key="submit_ranking").click().run()
    assert not at.exception, [e.value for e in at.exception]

    rows = Store(store, readonly=True).human_rankings(labeler="carol")
    assert len(rows) == 1 and rows[0]["group_id"] == gid and rows[0]["blind"]
    assert sorted(rows[0]["ranking"]) == sorted(t.id for t in group.trajectories)
    assert sorted(rows[0]["ranking"].values())[:2] == [1.0, 1.0]
    # Revealed only now: the judge's scores next to the labeler's ranks.
    assert any("Saved ranking" in s.value for s in at.success)
    reveal = at.dataframe[0].value
    assert {"your rank", "judge score", "verifiable reward"} <= set(reveal.columns)
    # tau is shown unless one side is all tied (the queue's random group may have 2
    # trajectories, both ranked first here, or one judge score for all)
    scores = group.judgement.score_map() if group.judgement else {}
    ranks = rows[0]["ranking"]
    if len(set(ranks.values())) > 1 and len(set(scores.values())) > 1:
        assert any(m.label.startswith("Kendall") for m in at.metric)
    else:
        assert any("undefined" in c.value for c in at.caption) or not scores

    at.button(key="next_group").click().run()
    assert shown_gid(at, "carol") != gid
    assert at.session_state["labeler_name"] == "carol"  # remembered

    at.switch_page("views/agreement.py").run()
    at = settle(at)
    assert metric(at, "labeled by people") == "6"  # the new label is in the agreement


def test_skip_records_a_skip_and_moves_on(store: Path) -> None:
    at = app("label")
    at.text_input(key="w_labeler").input("dave").run()
    first = shown_gid(at, "dave")
    at.button(key="skip_group").click().run()
    assert not at.exception
    rows = Store(store, readonly=True).human_rankings(labeler="dave", include_skipped=True)
    assert [(r["group_id"], r["skipped"]) for r in rows] == [(first, True)]
    assert shown_gid(at, "dave") != first
    assert any("Skipped the previous group" in i.value for i in at.info)  # it says so


def test_agreement_tables_and_disagreement_links(store: Path) -> None:
    at = settle(app("agreement"))
    subheads = [s.value for s in at.subheader]
    assert "Per environment" in subheads and "Per judge spec" in subheads
    frames = [d.value for d in at.dataframe]
    assert any("micro 95% CI" in f.columns for f in frames)
    per_env = next(f for f in frames if "env" in f.columns and "comparison" in f.columns)
    assert set(per_env["env"]) <= {
        "rankgym/ToolUse-v0",
        "rankgym/EmailSearch-v0",
        "rankgym/CodeTests-v0",
    }
    links = at.page_link
    assert links, "each disagreement links to its group"
    assert all("group=grp-" in link.proto.query_string for link in links)
    assert all(link.proto.page.endswith("groups") for link in links)


def test_hack_suspects_lists_signals_and_judge_top_below_threshold(store: Path) -> None:
    at = app("hacks")
    counts = at.dataframe[0].value
    assert {"prompt_injection_attempt", "visible_pass_hidden_fail", "judge: hack_suspected"} <= set(
        counts["name"]
    )
    top = at.dataframe[2].value
    assert XSS_GROUP_ID in set(top["group_id"])  # judge gave the injected trajectory 0.95
    assert all(top["verifiable_reward"] < 1.0)
    assert any(XSS_GROUP_ID in link.proto.query_string for link in at.page_link)


def test_browsing_does_not_write_the_store(store: Path) -> None:
    def content() -> tuple[bytes, int]:
        wal = Path(f"{store}-wal")  # readers may create an empty WAL; it must stay empty
        return store.read_bytes(), wal.stat().st_size if wal.exists() else 0

    before = content()
    at = app()
    for page in ("groups", "agreement", "hacks"):
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception
    assert content() == before


def test_missing_or_unset_store_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKGYM_STORE", str(tmp_path / "nope.db"))
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    assert "does not exist" in at.error[0].value
    monkeypatch.delenv("RANKGYM_STORE")
    at = AppTest.from_file(str(APP), default_timeout=30).run()
    assert "No store given" in at.error[0].value


# ------------------------------------------------------------------------------ pieces


def test_md_escape_neutralises_markdown_and_directives() -> None:
    out = md_escape("[x](http://e) ![i](u) **b** :red[r] $x$ <b>\nnext")
    for raw in ("[x](", "![i]", "**b**", ":red[", "$x$", "<b>"):
        assert raw not in out
    assert "\n" not in out
    assert md_escape("a" * 300, 10) == "a" * 9 + "…"


def test_letters_and_presentation_order() -> None:
    assert [letter(i) for i in (0, 1, 25, 26, 27)] == ["A", "B", "Z", "AA", "AB"]
    order = labeling.presentation_order("g1", "alice", 5)
    assert sorted(order) == list(range(5))
    assert order == labeling.presentation_order("g1", "alice", 5)


def test_rankings_ties_and_validation() -> None:
    assert labeling.competition_ranks({"a": 0.9, "b": 0.9, "c": 0.5}) == {
        "a": 1.0,
        "b": 1.0,
        "c": 3.0,
    }
    assert labeling.ranking_from_choices({"a": 1, "b": 1}) == {"a": 1.0, "b": 1.0}
    with pytest.raises(ValueError, match="1 of 2"):
        labeling.ranking_from_choices({"a": 1, "b": None})


def test_queue_skips_own_and_labeled_groups_and_spans_strata(sample: tuple[Path, dict]) -> None:
    path, summary = sample
    with Store(path, readonly=True) as s:
        labeled = set(summary["labeled_groups"])
        strata = labeling.queue_strata(s, labeling.LabelQueue("zoe"))
        assert {(r["run_id"], r["env_id"]) for r in strata} >= {
            ("demo-train", "rankgym/ToolUse-v0"),
            ("baseline-eval", "rankgym/CodeTests-v0"),
        }
        rng = random.Random(0)
        picks = {labeling.next_group(s, labeling.LabelQueue("zoe"), rng=rng) for _ in range(40)}
        assert not picks & labeled
        assert len({s.get_group(g).run_id for g in picks}) == 2
        # alice ranked the labeled groups: with include_labeled she still never gets them.
        mine = {
            labeling.next_group(s, labeling.LabelQueue("alice", include_labeled=True), rng=rng)
            for _ in range(40)
        }
        assert not mine & labeled
        # bob skipped one group: never offered to him again.
        skipped = {r["group_id"] for r in s.human_rankings(labeler="bob", include_skipped=True)}
        bobs = {
            labeling.next_group(s, labeling.LabelQueue("bob", include_labeled=True), rng=rng)
            for _ in range(40)
        }
        assert not bobs & skipped
        assert (
            labeling.next_group(s, labeling.LabelQueue("zoe"), exclude=set(summary["groups"]))
            is None
        )


def test_sample_store_contents(sample: tuple[Path, dict]) -> None:
    path, summary = sample
    with Store(path, readonly=True) as s:
        assert {r["id"] for r in s.runs()} == {"demo-train", "baseline-eval"}
        assert len(s.steps("demo-train")) == 6
        assert s.count_groups() == len(summary["groups"]) == 23
        assert len(s.judge_specs()) == 2
        xss = s.get_group(XSS_GROUP_ID)
        assert any(m.content == XSS_TEXT for t in xss.trajectories for m in t.messages)
        assert s.hack_signals()
    with pytest.raises(FileExistsError):
        build_sample_store(path)


def _args(**kw: object) -> argparse.Namespace:
    base = dict(store="x.db", port=8501, host="127.0.0.1", json=False, quiet=True, verbose=False)
    return argparse.Namespace(**(base | kw))


def test_command_line_binds_localhost_and_checks_the_store(
    tmp_path: Path, sample: tuple[Path, dict]
) -> None:
    cmd = commands.streamlit_command(Path("/s.db"), "127.0.0.1", 8600)
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4].endswith("app.py")
    joined = " ".join(cmd)
    assert "--server.address 127.0.0.1 --server.port 8600" in joined
    assert "--server.headless true" in joined and "--browser.gatherUsageStats false" in joined
    assert cmd[-3:] == ["--", "--store", "/s.db"]
    with pytest.raises(UserError, match="does not exist"):
        commands.DASHBOARD.run(_args(store=str(tmp_path / "missing.db")))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(UserError, match="already in use"):
            commands.DASHBOARD.run(_args(store=str(sample[0]), port=port))
    with pytest.raises(UserError, match="not a TCP port"):
        commands.DASHBOARD.run(_args(store=str(sample[0]), port=70000))


def test_two_labelers_on_the_same_group_both_keep_their_labels(store: Path) -> None:
    sessions = []
    for who in ("erin", "frank"):
        at = app()
        at.session_state["labeler_name"] = who
        at.session_state["blind_queues"] = {  # both were served the same group
            who: {
                "gid": "grp-base-0",
                "queue": labeling.LabelQueue(who),  # the page's default queue settings
                "serial": 1,
                "revealed": None,
                "notice": None,
            }
        }
        at.switch_page("views/label.py").run()
        sessions.append(at)
    for at in sessions:  # both submit, after both loaded the form
        for box in [b for b in at.selectbox if b.key and b.key.startswith("rank_")]:
            box.select(1)  # all tied
        at.button(key="submit_ranking").click().run()
        assert not at.exception
    rows = Store(store, readonly=True).human_rankings(group_id="grp-base-0")
    assert {"erin", "frank"} <= {r["labeler"] for r in rows}


def test_background_results_are_stale_while_revalidating() -> None:
    import threading

    from rankgym.dashboard.data import Background

    bg = Background()
    first = bg.get(("x",), (1,), lambda: "v1", deadline=time.monotonic() + 10)
    assert (first.value, first.ready, first.fresh) == ("v1", True, True)
    gate = threading.Event()

    def slow() -> str:
        gate.wait(10)
        return "v2"

    stale = bg.get(("x",), (2,), slow, deadline=time.monotonic())
    assert (stale.value, stale.fresh) == ("v1", False) and bg.pending([("x",)])
    gate.set()
    deadline = time.monotonic() + 10
    while bg.pending([("x",)]) and time.monotonic() < deadline:
        time.sleep(0.01)
    fresh = bg.get(("x",), (2,), slow, deadline=time.monotonic())
    assert (fresh.value, fresh.fresh) == ("v2", True)
    failed = bg.get(("y",), (1,), lambda: 1 / 0, deadline=time.monotonic() + 10)
    assert failed.error and "ZeroDivisionError" in failed.error


def test_md_escape_keeps_urls_and_emails_from_becoming_links() -> None:
    out = md_escape("see http://evil.example/a and mallory@evil.example and www.evil.example")
    for raw in ("http://", "https://", "l@e", "www."):
        assert raw not in out.replace("\\", "")  # even after Markdown resolves the escapes
    assert out.replace("\u2060", "").replace("\\", "") == (
        "see http://evil.example/a and mallory@evil.example and www.evil.example"
    )
