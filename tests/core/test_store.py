"""The SQLite store: round trips, filters, migrations, labels, export, concurrency, crashes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rankgym.store import MIGRATIONS, SCHEMA_VERSION, Store, StoreError, _statements
from rankgym.types import Group, Judgement, JudgeSpec, Message, Trajectory, TrajectoryScore, Turn


def make_group(
    run_id: str = "r1", step: int = 0, n: int = 3, text: str = "hello", signals=()
) -> Group:
    trs = [
        Trajectory(
            env_id="rankgym/ToolUse-v0",
            task_id=f"task-{step}",
            messages=[
                Message(role="user", content=f"{text} question {i}"),
                Message(role="assistant", content=f"answer {i} ✓"),
            ],
            turns=[
                Turn(
                    message_index=1,
                    prompt_token_ids=[1, 2, 3],
                    completion_token_ids=[4, 5],
                    completion_logprobs=[-0.1, -0.2],
                )
            ],
            verifiable_reward=i / max(n - 1, 1),
            hack_signals=list(signals) if i == 0 else [],
        )
        for i in range(n)
    ]
    return Group(
        run_id=run_id,
        step=step,
        env_id="rankgym/ToolUse-v0",
        task_id=f"task-{step}",
        trajectories=trs,
    )


def test_group_round_trip_and_filters(store_path):
    s = Store(store_path)
    g1 = make_group(step=0, text="alpha", signals=["judge_top_verifier_failed"])
    g2 = make_group(step=1, text="beta <script>")
    s.put_groups([g1, g2])
    back = s.get_group(g1.id)
    assert back.trajectories == [
        t.model_copy(update={"hack_signals": t.hack_signals}) for t in g1.trajectories
    ]
    assert s.count_groups() == 2
    assert [r["id"] for r in s.list_groups(search="alpha")] == [g1.id]
    assert [r["id"] for r in s.list_groups(search="<script>")] == [g2.id]
    assert [r["id"] for r in s.list_groups(hack_flagged=True)] == [g1.id]
    assert [r["id"] for r in s.list_groups(step=1)] == [g2.id]
    assert s.list_groups(limit=1, offset=0)[0]["id"] == g2.id  # newest first
    spec = JudgeSpec(model="m", rubric="r")
    h = s.put_judge_spec(spec)
    assert s.unjudged_group_ids(h) == [g1.id, g2.id]
    j = Judgement(
        group_id=g1.id,
        spec_hash=h,
        scores=[TrajectoryScore(trajectory_id=t.id, score=0.5) for t in g1.trajectories],
    )
    s.put_judgement(j)
    assert s.unjudged_group_ids(h) == [g2.id]
    assert s.get_group(g1.id).judgement.score_map() == j.score_map()
    assert s.list_groups(judged=True)[0]["id"] == g1.id


def test_label_queue_filters_skip_the_labelers_groups_and_single_trajectory_groups(store_path):
    s = Store(store_path)
    mine, other, single = make_group(step=0), make_group(step=1), make_group(step=2, n=1)
    s.put_groups([mine, other, single])
    s.add_human_ranking(mine.id, "ann", {}, skipped=True)  # a skip counts as seen
    queue = {"not_labeled_by": "ann", "min_trajectories": 2}
    assert s.group_ids_page(10, 0, **queue) == [other.id]
    assert s.label_strata(**queue) == [{"run_id": "r1", "env_id": "rankgym/ToolUse-v0", "n": 1}]
    assert s.group_ids_page(10, 0, not_labeled_by="bob", min_trajectories=2) == [mine.id, other.id]


def test_judge_top_below_threshold_lists_the_judges_strict_favourite_that_failed(store_path):
    s = Store(store_path)
    g = make_group(n=3)  # verifiable rewards 0.0, 0.5, 1.0
    s.put_group(g)
    h = s.put_judge_spec(JudgeSpec(model="m", rubric="r"))
    scores = [0.9, 0.1, 0.1]  # the judge prefers the trajectory with reward 0.0
    s.put_judgement(
        Judgement(
            group_id=g.id,
            spec_hash=h,
            scores=[
                TrajectoryScore(trajectory_id=t.id, score=x)
                for t, x in zip(g.trajectories, scores, strict=True)
            ],
        )
    )
    rows = s.judge_top_below_threshold(0.5)
    assert [(r["trajectory_id"], r["judge_score"]) for r in rows] == [(g.trajectories[0].id, 0.9)]
    assert s.judge_top_below_threshold(0.0) == []  # reward 0.0 is not below 0.0
    assert s.judge_spec_counts()[0]["groups"] == 1


def test_rewriting_same_group_keeps_labels_and_scores(store_path):
    s = Store(store_path)
    g = make_group()
    s.put_group(g)
    ranking = {t.id: i + 1 for i, t in enumerate(g.trajectories)}
    s.add_human_ranking(g.id, "ann", ranking)
    s.put_group(g)
    assert len(s.human_rankings(g.id)) == 1
    assert s.count_groups() == 1


def test_labels_validated_and_concurrent_labelers_both_kept(store_path):
    s = Store(store_path)
    g = make_group()
    s.put_group(g)
    ids = [t.id for t in g.trajectories]
    with pytest.raises(StoreError, match="not in group"):
        s.add_human_ranking(g.id, "ann", {"nope": 1})
    with pytest.raises(StoreError, match="every trajectory"):
        s.add_human_ranking(g.id, "ann", {ids[0]: 1})
    other = Store(store_path)  # a second writer, as a second dashboard session would be
    s.add_human_ranking(g.id, "ann", {ids[0]: 1, ids[1]: 1, ids[2]: 2})
    other.add_human_ranking(g.id, "bob", {ids[0]: 2, ids[1]: 1, ids[2]: 3})
    s.add_human_ranking(g.id, "cy", {}, skipped=True)
    rows = s.human_rankings(g.id)
    assert [r["labeler"] for r in rows] == ["ann", "bob"]
    assert rows[0]["ranking"][ids[0]] == 1.0
    assert len(s.human_rankings(g.id, include_skipped=True)) == 3
    assert s.count_groups(labeled=True) == 1


def test_judgement_needs_known_spec(store_path):
    s = Store(store_path)
    g = make_group()
    s.put_group(g)
    with pytest.raises(StoreError, match="put_judge_spec"):
        s.put_judgement(Judgement(group_id=g.id, spec_hash="missing"))


def test_cache_steps_runs(store_path):
    s = Store(store_path)
    s.cache_put("spec", "grp", {"scores": [1, 2]})
    assert s.cache_get("spec", "grp") == {"scores": [1, 2]}
    assert s.cache_get("spec", "other") is None
    rid = s.create_run("train-1", kind="train", config={"lr": 1e-4})
    s.log_step(rid, 0, {"reward_mean": 0.5})
    s.log_step(rid, 1, {"reward_mean": 0.7})
    assert [r["metrics"]["reward_mean"] for r in s.steps(rid)] == [0.5, 0.7]
    assert s.runs()[0]["config"] == {"lr": 1e-4}


def test_readonly_store(store_path):
    with pytest.raises(StoreError, match="does not exist"):
        Store(store_path, readonly=True)
    Store(store_path).put_group(make_group())
    ro = Store(store_path, readonly=True)
    assert ro.count_groups() == 1
    with pytest.raises(StoreError, match="read-only"):
        ro.create_run("x")


def test_migration_from_v1(store_path):
    conn = sqlite3.connect(store_path)
    for stmt in _statements(MIGRATIONS[0]):
        conn.execute(stmt)
    now = time.time()
    conn.execute("INSERT INTO runs VALUES ('r', 'r', 'rollout', '{}', ?)", (now,))
    conn.execute("INSERT INTO groups VALUES ('g', 'r', 0, 'e', 't', 1, 'h', ?)", (now,))
    msgs = json.dumps([{"role": "user", "content": "old store"}])
    conn.execute(
        "INSERT INTO trajectories (id, group_id, idx, env_id, task_id, messages) VALUES ('t1','g',0,'e','t',?)",
        (msgs,),
    )
    conn.execute("INSERT INTO hack_signals (trajectory_id, name) VALUES ('t1', 'early_exit')")
    conn.execute(
        "INSERT INTO human_rankings (group_id, labeler, ranking, created_at) VALUES ('g','ann','{\"t1\": 1}',?)",
        (now,),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    ro = Store(store_path, readonly=True)  # a reader migrates a writable old file once
    assert ro.schema_version == SCHEMA_VERSION and ro.readonly
    ro.close()
    s = Store(store_path)
    assert s.schema_version == SCHEMA_VERSION >= 3
    g = s.get_group("g")
    assert g.trajectories[0].messages[0].content == "old store"
    assert s.count_groups(search="old store") == 1  # v4 indexed the text of old rows
    assert g.trajectories[0].hack_signals == ["early_exit"]
    assert s.count_groups(hack_flagged=True) == 1
    assert s.human_rankings("g")[0]["skipped"] is False
    s.cache_put("a", "b", {"ok": True})


def test_export_jsonl_and_parquet(store_path, tmp_path):
    s = Store(store_path)
    groups = [make_group(step=i) for i in range(3)]
    s.put_groups(groups)
    n = s.export(tmp_path / "out.jsonl", "jsonl").records
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert n == 3 and Group.from_json(lines[0]).trajectories == groups[0].trajectories
    n = s.export(tmp_path / "out.parquet", "parquet").records
    table = pq.read_table(tmp_path / "out.parquet")
    assert n == table.num_rows == 9
    assert json.loads(table.column("messages")[0].as_py())[0]["role"] == "user"
    with pytest.raises(StoreError, match="unknown export format"):
        s.export(tmp_path / "x", "csv")


def test_export_cli(store_path, tmp_path):
    Store(store_path).put_group(make_group())
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rankgym.cli",
            "export",
            "--store",
            str(store_path),
            "--format",
            "jsonl",
            "--out",
            str(tmp_path / "e.jsonl"),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["records"] == 1
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "rankgym.cli",
            "export",
            "--store",
            str(tmp_path / "nope.db"),
            "--out",
            "x",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "does not exist" in bad.stderr and "Traceback" not in bad.stderr


WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from core.test_store import make_group
    from rankgym.store import Store
    s = Store({path!r})
    deadline = time.time() + {seconds}
    i = 0
    while time.time() < deadline:
        g = make_group(run_id="w", step=i, n=4, text="w" * 50)
        s.put_group(g)
        print("committed", g.id, flush=True)
        i += 1
    """
)

READER = textwrap.dedent(
    """
    import sys, time, json
    from rankgym.store import Store
    s = Store({path!r}, readonly=True)
    deadline = time.time() + {seconds}
    n = errors = 0
    while time.time() < deadline:
        try:
            rows = s.list_groups(limit=20)
            if rows:
                s.get_group(rows[0]["id"])
            s.count_groups(search="question")
            n += 1
        except Exception as e:
            errors += 1
            print("ERR", repr(e), file=sys.stderr, flush=True)
    print(json.dumps({{"reads": n, "errors": errors}}))
    """
)


def _spawn(code: str) -> subprocess.Popen:
    """Run ``code`` in a fresh Python with tests/ importable; text pipes for its output."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_one_writer_four_readers_30s(store_path):
    Store(store_path).create_run("w")
    tests_dir = str(Path(__file__).resolve().parents[1])
    writer = _spawn(WRITER.format(tests=tests_dir, path=str(store_path), seconds=30))
    time.sleep(0.5)
    readers = [_spawn(READER.format(path=str(store_path), seconds=29)) for _ in range(4)]
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    committed = [line.split()[1] for line in out.splitlines() if line.startswith("committed")]
    for r in readers:
        rout, rerr = r.communicate(timeout=120)
        assert r.returncode == 0, rerr
        stats = json.loads(rout.strip().splitlines()[-1])
        assert stats["errors"] == 0, rerr
        assert stats["reads"] > 10
        assert "locked" not in rerr
    s = Store(store_path)
    assert set(s.group_ids(run_id="w")) == set(committed)
    assert len(committed) > 50
    assert s.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"


def test_sigkill_mid_batch_keeps_committed_groups(store_path):
    tests_dir = str(Path(__file__).resolve().parents[1])
    writer = _spawn(WRITER.format(tests=tests_dir, path=str(store_path), seconds=60))
    committed: list[str] = []
    assert writer.stdout is not None
    while len(committed) < 40:
        line = writer.stdout.readline()
        if not line:
            break
        if line.startswith("committed"):
            committed.append(line.split()[1])
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert len(committed) == 40
    s = Store(store_path)
    assert s.query("PRAGMA integrity_check")[0]["integrity_check"] == "ok"
    ids = set(s.group_ids(run_id="w"))
    assert set(committed) <= ids
    for gid in ids:  # no half-written group: every group has all its trajectories
        assert len(s.get_group(gid).trajectories) == 4


def test_reading_an_existing_store_imports_no_sqlite_utils_pandas_or_pyarrow(store_path):
    Store(store_path).close()  # created here: the migrations (which need sqlite-utils) ran
    code = textwrap.dedent(
        f"""
        import sys
        from rankgym.store import Store
        with Store({str(store_path)!r}, readonly=True) as s:
            s.count_groups()
        print(sorted({{"sqlite_utils", "pandas", "pyarrow", "torch"}} & set(sys.modules)))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
