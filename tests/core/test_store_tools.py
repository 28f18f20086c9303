"""Tool schemas stored once per group (schema v5), and when a store says it is migrating."""

from __future__ import annotations

import logging
import sqlite3
import time

from rankgym.store import MIGRATIONS, SCHEMA_VERSION, Store, _statements
from rankgym.types import Group, Message, Trajectory

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_emails",
            "description": "Search the inbox.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def _group(tools: list | None = None, gid: str = "g1") -> Group:
    trs = [
        Trajectory(id=f"{gid}-t{i}", env_id="e", task_id="t",
                   messages=[Message(role="user", content=f"hi {i}")])
        for i in range(3)
    ]  # fmt: skip
    return Group(id=gid, run_id="r", env_id="e", task_id="t", trajectories=trs, tools=tools or [])


def test_a_groups_tools_are_stored_once_on_the_group_and_read_back(store_path):
    with Store(store_path) as s:
        s.put_group(_group(TOOLS))
        assert s.get_group("g1").tools == TOOLS
        rows = s.query("SELECT tools FROM groups")
        assert len(rows) == 1 and '"search_emails"' in rows[0]["tools"]
        per_traj = s.query("SELECT messages FROM trajectories")
        assert all("search_emails" not in r["messages"] for r in per_traj)


def test_rewriting_a_group_with_tools_adds_them_and_keeps_its_labels(store_path):
    with Store(store_path) as s:
        s.put_group(_group())
        s.add_human_ranking("g1", "ann", {"g1-t0": 1, "g1-t1": 2, "g1-t2": 3})
        s.put_group(_group(TOOLS))  # same content (tools are not part of the content hash)
        assert s.get_group("g1").tools == TOOLS and len(s.human_rankings("g1")) == 1
        s.put_group(_group())  # a writer that does not know the tools does not erase them
        assert s.get_group("g1").tools == TOOLS


def _v4_store(path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("BEGIN")
    for step in MIGRATIONS[:4]:
        if callable(step):
            step(conn)
        else:
            for stmt in _statements(step):
                conn.execute(stmt)
    now = time.time()
    conn.execute("INSERT INTO runs VALUES ('r', 'r', 'rollout', '{}', ?)", (now,))
    conn.execute("INSERT INTO groups VALUES ('old', 'r', 0, 'e', 't', 1, 'h', ?)", (now,))
    conn.execute(
        "INSERT INTO trajectories (id, group_id, idx, env_id, task_id, messages) "
        "VALUES ('o1', 'old', 0, 'e', 't', '[]')"
    )
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()


def test_an_existing_store_logs_one_migrating_line_and_a_new_one_logs_none(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="rankgym.store")
    Store(tmp_path / "new.db").close()
    assert not [r for r in caplog.records if "migrat" in r.getMessage()]
    _v4_store(tmp_path / "old.db")
    with Store(tmp_path / "old.db") as s:
        assert s.schema_version == SCHEMA_VERSION == 5
        assert s.get_group("old").tools == []  # groups stored before v5 have none
    lines = [r.getMessage() for r in caplog.records if "migrat" in r.getMessage()]
    assert len(lines) == 1 and "from schema version 4 to 5" in lines[0]
