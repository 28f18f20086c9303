"""The store's schema: numbered migrations kept in ``PRAGMA user_version``.

``MIGRATIONS[v]`` upgrades a file from version ``v`` to ``v + 1`` (an SQL script, or a
function for a step SQL alone cannot do); :func:`apply_migrations` applies the missing ones in
one transaction. A file newer than this code is refused, never downgraded. The tables are
documented in docs/store.md.

Full-text search is set up the way sqlite-utils does it (``enable_fts``: an external-content
FTS5 table ``trajectories_fts`` over ``trajectories.text``, kept in step by triggers), so
``sqlite-utils search`` and Datasette's search box work on a store as they are.

What this module does not do: it never rewrites or drops user data; a migration that needs
to reshape a table must copy it (sqlite-utils' ``table.transform`` does that safely).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from rankgym.store.rows import search_text

log = logging.getLogger(__name__)

Migration = str | Callable[[sqlite3.Connection], None]


def enable_fts(conn: sqlite3.Connection) -> None:
    """(Re)create ``trajectories_fts`` over ``trajectories.text`` with sqlite-utils' triggers."""
    import sqlite_utils  # lazy: it imports pandas and pyarrow (~0.5 s); only migrations need it

    db = sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)
    db.table("trajectories").enable_fts(
        ["text"], fts_version="FTS5", tokenize="unicode61", create_triggers=True, replace=True
    )
    if not conn.in_transaction:  # sqlite-utils < 4.2 commits inside executescript
        raise RuntimeError("sqlite-utils committed mid-migration; install sqlite-utils>=4.2")


def _v4_text_column(conn: sqlite3.Connection) -> None:
    """v4: each trajectory's searchable text in a ``text`` column, FTS5 over it (see top)."""
    conn.execute("ALTER TABLE trajectories ADD COLUMN text TEXT NOT NULL DEFAULT ''")
    last = -(2**63)
    while rows := conn.execute(
        "SELECT rowid, messages FROM trajectories WHERE rowid > ? ORDER BY rowid LIMIT 1000",
        (last,),
    ).fetchall():
        conn.executemany(
            "UPDATE trajectories SET text = ? WHERE rowid = ?",
            [(search_text(r[1]), r[0]) for r in rows],
        )
        last = rows[-1][0]
    conn.execute("DROP TABLE trajectories_fts")
    enable_fts(conn)


MIGRATIONS: list[Migration] = [
    # v1: the first released layout.
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY, name TEXT, kind TEXT NOT NULL DEFAULT 'rollout',
        config TEXT NOT NULL DEFAULT '{}', created_at REAL NOT NULL
    );
    CREATE TABLE steps (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, step INTEGER NOT NULL,
        metrics TEXT NOT NULL DEFAULT '{}', created_at REAL NOT NULL,
        PRIMARY KEY (run_id, step)
    );
    CREATE TABLE groups (
        id TEXT PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        step INTEGER NOT NULL DEFAULT 0, env_id TEXT NOT NULL, task_id TEXT NOT NULL,
        n_trajectories INTEGER NOT NULL, content_hash TEXT NOT NULL, created_at REAL NOT NULL
    );
    CREATE INDEX groups_run_step ON groups(run_id, step);
    CREATE INDEX groups_env ON groups(env_id);
    CREATE TABLE trajectories (
        id TEXT PRIMARY KEY, group_id TEXT NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL, env_id TEXT NOT NULL, task_id TEXT NOT NULL, seed INTEGER,
        messages TEXT NOT NULL, turns TEXT NOT NULL DEFAULT '[]', verifiable_reward REAL,
        metrics TEXT NOT NULL DEFAULT '{}', truncated INTEGER NOT NULL DEFAULT 0, error TEXT,
        schema_version INTEGER NOT NULL DEFAULT 1
    );
    CREATE INDEX trajectories_group ON trajectories(group_id, idx);
    CREATE VIRTUAL TABLE trajectories_fts USING fts5(text, tokenize = 'unicode61');
    CREATE TABLE judge_specs (
        hash TEXT PRIMARY KEY, model TEXT NOT NULL, spec TEXT NOT NULL, created_at REAL NOT NULL
    );
    CREATE TABLE judgements (
        id TEXT PRIMARY KEY, group_id TEXT NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
        spec_hash TEXT NOT NULL REFERENCES judge_specs(hash), status TEXT NOT NULL,
        error TEXT, raw_response TEXT, presentations TEXT NOT NULL DEFAULT '[]',
        input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL, latency_s REAL NOT NULL DEFAULT 0, calls INTEGER NOT NULL DEFAULT 0,
        cached INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL
    );
    CREATE INDEX judgements_group ON judgements(group_id, spec_hash, created_at);
    CREATE TABLE scores (
        judgement_id TEXT NOT NULL REFERENCES judgements(id) ON DELETE CASCADE,
        trajectory_id TEXT NOT NULL REFERENCES trajectories(id) ON DELETE CASCADE,
        score REAL NOT NULL, rationale TEXT NOT NULL DEFAULT '',
        hack_suspected INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (judgement_id, trajectory_id)
    );
    CREATE INDEX scores_trajectory ON scores(trajectory_id);
    CREATE TABLE human_rankings (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        group_id TEXT NOT NULL REFERENCES groups(id) ON DELETE CASCADE,
        labeler TEXT NOT NULL, ranking TEXT NOT NULL, blind INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL
    );
    CREATE INDEX human_rankings_group ON human_rankings(group_id);
    CREATE TABLE hack_signals (
        trajectory_id TEXT NOT NULL REFERENCES trajectories(id) ON DELETE CASCADE,
        name TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (trajectory_id, name)
    );
    """,
    # v2: a judge response cache, skipped labels, and group ids on hack signals (fast filters).
    """
    CREATE TABLE judge_cache (
        spec_hash TEXT NOT NULL, group_hash TEXT NOT NULL, value TEXT NOT NULL,
        created_at REAL NOT NULL, PRIMARY KEY (spec_hash, group_hash)
    );
    ALTER TABLE human_rankings ADD COLUMN skipped INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE hack_signals ADD COLUMN group_id TEXT;
    UPDATE hack_signals SET group_id =
        (SELECT t.group_id FROM trajectories t WHERE t.id = hack_signals.trajectory_id);
    CREATE INDEX hack_signals_group ON hack_signals(group_id);
    CREATE INDEX groups_created ON groups(created_at);
    """,
    # v3: covering indexes for the dashboard's per-step reward and agreement queries.
    """
    CREATE INDEX trajectories_group_reward ON trajectories(group_id, verifiable_reward, id);
    CREATE INDEX scores_judgement_score ON scores(judgement_id, score);
    """,
    # v4: trajectory text in a column; sqlite-utils-style FTS5 over it.
    _v4_text_column,
    # v5: the env's tool schemas, once per group (what the judge is shown; '[]' = none kept).
    """
    ALTER TABLE groups ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


def statements(script: str) -> list[str]:
    """Split a migration script into its statements (no ``;`` inside literals, by rule)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the file (0 for a new, empty file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def apply_migrations(conn: sqlite3.Connection, path: object) -> None:
    """Bring ``conn`` to :data:`SCHEMA_VERSION`; call inside a write transaction.

    Logs one "migrating" line when an existing store (schema version >= 1) is upgraded; a new,
    empty file is created at the current version without a word.
    """
    start = user_version(conn)
    if 0 < start < SCHEMA_VERSION:
        log.info("migrating store %s from schema version %d to %d", path, start, SCHEMA_VERSION)
    for v in range(start, SCHEMA_VERSION):
        step = MIGRATIONS[v]
        if callable(step):
            step(conn)
        else:
            for stmt in statements(step):
                conn.execute(stmt)
        conn.execute(f"PRAGMA user_version = {v + 1}")
