"""The trajectory store: one SQLite file holding runs, groups, trajectories, judgements, labels.

- WAL mode, foreign keys on, ``synchronous=NORMAL``: readers (the dashboard) never block the
  writer (the trainer) and the writer never blocks readers.
- Every write is one ``BEGIN IMMEDIATE`` transaction (a whole group with its trajectories,
  full-text rows, hack signals and judgement at once), retried with backoff while another
  process holds the write lock, so ``database is locked`` never reaches a user; after
  ``busy_seconds`` of waiting a :class:`StoreBusy` names the file and what to do.
- The schema version lives in ``PRAGMA user_version``; :data:`MIGRATIONS` upgrade older files
  in place, inside a transaction.

What it does not do: it is not a server. Many processes may read and write one file on a local
disk; a network filesystem (NFS, SMB) breaks SQLite's locking and is refused nowhere, so don't.
"""

from __future__ import annotations

import json
import logging
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import sqlite_utils
from pydantic import TypeAdapter

from rankgym.types import Group, Judgement, JudgeSpec, Message, Trajectory, TrajectoryScore, Turn

log = logging.getLogger(__name__)
T = TypeVar("T")

MIGRATIONS: list[str] = [
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
]
SCHEMA_VERSION = len(MIGRATIONS)
SEARCH_HITS_LIMIT = 10_000
"""Group search looks at the most recent this-many matching trajectories (keeps it fast)."""

_MESSAGES = TypeAdapter(list[Message])
_TURNS = TypeAdapter(list[Turn])


class StoreError(RuntimeError):
    """A store that cannot be used as asked (missing file, newer schema, bad input)."""


class StoreBusy(StoreError):
    """Another process held the write lock for longer than ``busy_seconds``."""


def _is_busy(e: sqlite3.OperationalError) -> bool:
    msg = str(e).lower()
    return "locked" in msg or "busy" in msg


def fts_query(text: str) -> str:
    """Turn free text into a safe FTS5 query: every word quoted, all words required."""
    words = re.findall(r"[\w@.+-]+", text, flags=re.UNICODE)
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


class Store:
    """A rankgym trajectory store in one SQLite file (see module docstring)."""

    def __init__(self, path: str | Path, readonly: bool = False, busy_seconds: float = 120.0):
        self.path = Path(path)
        self.readonly = readonly
        self.busy_seconds = busy_seconds
        self._lock = threading.RLock()
        if readonly:
            if not self.path.is_file():
                raise StoreError(
                    f"store {str(self.path)!r} does not exist; create one with "
                    "`rankgym rollout --store PATH ...` or `rankgym demo`."
                )
            uri = f"file:{self.path.resolve()}?mode=ro"
            self.conn = sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(
                str(self.path), timeout=30, isolation_level=None, check_same_thread=False
            )
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA busy_timeout = 30000")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA cache_size = -65536")
        self.conn.execute("PRAGMA mmap_size = 268435456")
        if not readonly:
            self._retry(lambda: self.conn.execute("PRAGMA journal_mode = WAL"))
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"store {str(self.path)!r} has schema version {version}, newer than this "
                f"rankgym ({SCHEMA_VERSION}); upgrade rankgym to read it."
            )
        if readonly and version < SCHEMA_VERSION:
            raise StoreError(
                f"store {str(self.path)!r} has schema version {version} (current "
                f"{SCHEMA_VERSION}); open it once read-write (any rankgym write command) "
                "to migrate it."
            )
        self.db = sqlite_utils.Database(self.conn)

    # ------------------------------------------------------------------ plumbing
    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def _retry(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.busy_seconds
        delay = 0.01
        while True:
            try:
                with self._lock:
                    return fn()
            except sqlite3.OperationalError as e:
                if not _is_busy(e):
                    raise
                if time.monotonic() > deadline:
                    raise StoreBusy(
                        f"store {str(self.path)!r} stayed locked by another process for "
                        f"{self.busy_seconds:.0f}s; stop the other writer or retry later."
                    ) from e
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 1.0)

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one IMMEDIATE transaction, retrying while the file is locked."""
        if self.readonly:
            raise StoreError(f"store {str(self.path)!r} was opened read-only")

        def attempt() -> T:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self.conn)
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            return out

        return self._retry(attempt)

    def _migrate(self) -> None:
        def run(conn: sqlite3.Connection) -> None:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for v in range(version, SCHEMA_VERSION):
                log.info("migrating store %s to schema version %d", self.path, v + 1)
                for stmt in _statements(MIGRATIONS[v]):
                    conn.execute(stmt)
                conn.execute(f"PRAGMA user_version = {v + 1}")

        if self.conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            self._write(run)

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
        """Run a read query and return rows as dicts."""
        return self._retry(lambda: [dict(r) for r in self.conn.execute(sql, params).fetchall()])

    @property
    def schema_version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    # ------------------------------------------------------------------ runs & steps
    def create_run(
        self,
        name: str | None = None,
        kind: str = "rollout",
        config: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> str:
        """Create a run (or keep an existing one with the same id) and return its id."""
        rid = (
            run_id or name or f"run-{time.strftime('%Y%m%d-%H%M%S')}-{random.randrange(16**4):04x}"
        )
        cfg = json.dumps(config or {}, default=str)
        self._write(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO runs (id, name, kind, config, created_at) VALUES (?,?,?,?,?)",
                (rid, name or rid, kind, cfg, time.time()),
            )
        )
        return rid

    def runs(self) -> list[dict[str, Any]]:
        rows = self.query("SELECT * FROM runs ORDER BY created_at")
        for r in rows:
            r["config"] = json.loads(r["config"])
        return rows

    def log_step(self, run_id: str, step: int, metrics: dict[str, Any]) -> None:
        """Record (or replace) the metrics of one training step."""
        self._ensure_run(run_id)
        self._write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO steps (run_id, step, metrics, created_at) VALUES (?,?,?,?)",
                (run_id, step, json.dumps(metrics, default=str), time.time()),
            )
        )

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.query("SELECT * FROM steps WHERE run_id = ? ORDER BY step", (run_id,))
        for r in rows:
            r["metrics"] = json.loads(r["metrics"])
        return rows

    def _ensure_run(self, run_id: str) -> None:
        if not self.query("SELECT 1 FROM runs WHERE id = ?", (run_id,)):
            self.create_run(name=run_id, run_id=run_id)

    # ------------------------------------------------------------------ groups
    def put_group(self, group: Group) -> None:
        """Write a group, its trajectories, hack signals and judgement in one transaction.

        Idempotent by group id: writing the same group again keeps its scores and labels and
        adds the new judgement; writing different content under the same id replaces it.
        """
        self.put_groups([group])

    def put_groups(self, groups: list[Group]) -> None:
        """Write several groups, one transaction each (a crash keeps the finished ones)."""
        for run_id in {g.run_id for g in groups}:
            self._ensure_run(run_id)
        for g in groups:
            if g.judgement is not None:
                self._check_spec(g.judgement.spec_hash)
            self._write(lambda c, g=g: self._insert_group(c, g))

    def _insert_group(self, c: sqlite3.Connection, g: Group) -> None:
        now = time.time()
        chash = g.content_hash()
        existing = c.execute("SELECT content_hash FROM groups WHERE id = ?", (g.id,)).fetchone()
        if existing is not None and existing[0] == chash:
            # Same content: keep trajectories, scores and labels; refresh signals and judgement.
            c.execute(
                "UPDATE groups SET run_id = ?, step = ? WHERE id = ?", (g.run_id, g.step, g.id)
            )
            for t in g.trajectories:
                c.execute(
                    "UPDATE trajectories SET verifiable_reward = ?, metrics = ?, error = ?,"
                    " turns = ? WHERE id = ?",
                    (
                        t.verifiable_reward,
                        json.dumps(t.metrics),
                        t.error,
                        json.dumps([tu.to_dict() for tu in t.turns]),
                        t.id,
                    ),
                )
                c.executemany(
                    "INSERT OR IGNORE INTO hack_signals (trajectory_id, name, detail, group_id)"
                    " VALUES (?,?,?,?)",
                    [(t.id, name, "", g.id) for name in dict.fromkeys(t.hack_signals)],
                )
            if g.judgement is not None:
                self._insert_judgement(c, g.judgement)
            return
        if existing is not None:
            # Content changed: the old scores and labels no longer describe it; replace all.
            old = c.execute("SELECT rowid FROM trajectories WHERE group_id = ?", (g.id,)).fetchall()
            c.executemany("DELETE FROM trajectories_fts WHERE rowid = ?", [tuple(r) for r in old])
            c.execute("DELETE FROM groups WHERE id = ?", (g.id,))
        c.execute(
            "INSERT INTO groups (id, run_id, step, env_id, task_id, n_trajectories, content_hash,"
            " created_at) VALUES (?,?,?,?,?,?,?,?)",
            (g.id, g.run_id, g.step, g.env_id, g.task_id, len(g.trajectories), chash, now),
        )
        for i, t in enumerate(g.trajectories):
            cur = c.execute(
                "INSERT INTO trajectories (id, group_id, idx, env_id, task_id, seed, messages,"
                " turns, verifiable_reward, metrics, truncated, error, schema_version)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    t.id,
                    g.id,
                    i,
                    t.env_id,
                    t.task_id,
                    t.seed,
                    _MESSAGES.dump_json(t.messages, exclude_none=True).decode(),
                    _TURNS.dump_json(t.turns).decode(),
                    t.verifiable_reward,
                    json.dumps(t.metrics),
                    int(t.truncated),
                    t.error,
                    t.schema_version,
                ),
            )
            c.execute(
                "INSERT INTO trajectories_fts (rowid, text) VALUES (?, ?)",
                (cur.lastrowid, t.text()),
            )
            c.executemany(
                "INSERT OR REPLACE INTO hack_signals (trajectory_id, name, detail, group_id)"
                " VALUES (?,?,?,?)",
                [(t.id, name, "", g.id) for name in dict.fromkeys(t.hack_signals)],
            )
        if g.judgement is not None:
            self._insert_judgement(c, g.judgement)

    def get_group(self, group_id: str, spec_hash: str | None = None) -> Group:
        """Load a group with its trajectories and its latest judgement (for ``spec_hash``)."""
        rows = self.query("SELECT * FROM groups WHERE id = ?", (group_id,))
        if not rows:
            raise StoreError(f"group {group_id!r} is not in store {str(self.path)!r}")
        g = rows[0]
        trs = self.query("SELECT * FROM trajectories WHERE group_id = ? ORDER BY idx", (group_id,))
        signals: dict[str, list[str]] = {}
        for r in self.query(
            "SELECT trajectory_id, name FROM hack_signals WHERE group_id = ?", (group_id,)
        ):
            signals.setdefault(r["trajectory_id"], []).append(r["name"])
        trajectories = [
            Trajectory(
                schema_version=r["schema_version"],
                id=r["id"],
                env_id=r["env_id"],
                task_id=r["task_id"],
                seed=r["seed"],
                messages=_MESSAGES.validate_json(r["messages"]),
                turns=_TURNS.validate_json(r["turns"]),
                verifiable_reward=r["verifiable_reward"],
                metrics=json.loads(r["metrics"]),
                hack_signals=signals.get(r["id"], []),
                truncated=bool(r["truncated"]),
                error=r["error"],
            )
            for r in trs
        ]
        js = self.judgements(group_id=group_id, spec_hash=spec_hash)
        return Group(
            id=g["id"],
            run_id=g["run_id"],
            step=g["step"],
            env_id=g["env_id"],
            task_id=g["task_id"],
            trajectories=trajectories,
            judgement=js[-1] if js else None,
        )

    def iter_groups(self, run_id: str | None = None, batch: int = 200) -> Iterator[Group]:
        """Every group (optionally of one run), oldest first, loaded lazily."""
        for gid in self.group_ids(run_id=run_id):
            yield self.get_group(gid)

    def group_ids(self, run_id: str | None = None, step: int | None = None) -> list[str]:
        where, params = self._filters(run_id=run_id, step=step)
        return [
            r["id"]
            for r in self.query(
                f"SELECT g.id FROM groups g {where} ORDER BY g.created_at, g.rowid", params
            )
        ]

    def _filters(
        self,
        run_id: str | None = None,
        step: int | None = None,
        env_id: str | None = None,
        spec_hash: str | None = None,
        labeled: bool | None = None,
        hack_flagged: bool | None = None,
        search: str | None = None,
        judged: bool | None = None,
    ) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if run_id is not None:
            clauses.append("g.run_id = ?")
            params.append(run_id)
        if step is not None:
            clauses.append("g.step = ?")
            params.append(step)
        if env_id is not None:
            clauses.append("g.env_id = ?")
            params.append(env_id)
        if spec_hash is not None:
            clauses.append(
                "EXISTS (SELECT 1 FROM judgements j WHERE j.group_id = g.id AND j.spec_hash = ?)"
            )
            params.append(spec_hash)
        if labeled is not None:
            clauses.append(
                ("" if labeled else "NOT ")
                + "EXISTS (SELECT 1 FROM human_rankings h WHERE h.group_id = g.id AND h.skipped = 0)"
            )
        if hack_flagged is not None:
            clauses.append(
                ("" if hack_flagged else "NOT ")
                + "EXISTS (SELECT 1 FROM hack_signals s WHERE s.group_id = g.id)"
            )
        if judged is not None:
            clauses.append(
                ("" if judged else "NOT ")
                + "EXISTS (SELECT 1 FROM judgements j WHERE j.group_id = g.id AND j.status = 'ok')"
            )
        if search:
            q = fts_query(search)
            if q:
                clauses.append(
                    "g.id IN (SELECT t.group_id FROM trajectories t WHERE t.rowid IN "
                    "(SELECT rowid FROM trajectories_fts WHERE trajectories_fts MATCH ? "
                    f"ORDER BY rowid DESC LIMIT {SEARCH_HITS_LIMIT}))"
                )
                params.append(q)
        return ("WHERE " + " AND ".join(clauses)) if clauses else "", params

    def list_groups(self, limit: int = 50, offset: int = 0, **filters: Any) -> list[dict[str, Any]]:
        """One page of group summaries, newest first, with judged/labels/hack counts.

        Filters: run_id, step, env_id, spec_hash, labeled, hack_flagged, search, judged.
        ``search`` considers the newest :data:`SEARCH_HITS_LIMIT` matching trajectories.
        """
        where, params = self._filters(**filters)
        sql = f"""
            SELECT g.id, g.run_id, g.step, g.env_id, g.task_id, g.n_trajectories, g.created_at,
              EXISTS (SELECT 1 FROM judgements j WHERE j.group_id = g.id AND j.status = 'ok') AS judged,
              (SELECT COUNT(*) FROM human_rankings h WHERE h.group_id = g.id AND h.skipped = 0) AS n_labels,
              (SELECT COUNT(*) FROM hack_signals s WHERE s.group_id = g.id) AS n_hack
            FROM groups g {where}
            ORDER BY g.created_at DESC, g.rowid DESC LIMIT ? OFFSET ?"""
        rows = self.query(sql, (*params, limit, offset))
        for r in rows:
            r["judged"] = bool(r["judged"])
        return rows

    def count_groups(self, **filters: Any) -> int:
        where, params = self._filters(**filters)
        return self.query(f"SELECT COUNT(*) AS n FROM groups g {where}", params)[0]["n"]

    def unjudged_group_ids(
        self, spec_hash: str, run_id: str | None = None, step: int | None = None
    ) -> list[str]:
        """Groups with no successful judgement under ``spec_hash``, oldest first."""
        where, params = self._filters(run_id=run_id, step=step)
        extra = "NOT EXISTS (SELECT 1 FROM judgements j WHERE j.group_id = g.id AND j.spec_hash = ? AND j.status = 'ok')"
        where = f"{where} AND {extra}" if where else f"WHERE {extra}"
        return [
            r["id"]
            for r in self.query(
                f"SELECT g.id FROM groups g {where} ORDER BY g.created_at, g.rowid",
                (*params, spec_hash),
            )
        ]

    def search(self, query: str, limit: int = 50) -> list[dict[str, Any]]:
        """Full-text search over trajectory content, newest first, with a highlighted snippet.

        Every word must match (words are quoted, so FTS operators in user input are inert).
        """
        q = fts_query(query)
        if not q:
            return []
        return self.query(
            "SELECT t.id AS trajectory_id, t.group_id, "
            "snippet(trajectories_fts, 0, '[', ']', ' … ', 12) AS snippet "
            "FROM trajectories_fts f JOIN trajectories t ON t.rowid = f.rowid "
            "WHERE trajectories_fts MATCH ? ORDER BY f.rowid DESC LIMIT ?",
            (q, limit),
        )

    # ------------------------------------------------------------------ judging
    def put_judge_spec(self, spec: JudgeSpec) -> str:
        h = spec.spec_hash
        self._write(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO judge_specs (hash, model, spec, created_at) VALUES (?,?,?,?)",
                (h, spec.model, spec.to_json(), time.time()),
            )
        )
        return h

    def get_judge_spec(self, spec_hash: str) -> JudgeSpec | None:
        rows = self.query("SELECT spec FROM judge_specs WHERE hash = ?", (spec_hash,))
        return JudgeSpec.from_json(rows[0]["spec"]) if rows else None

    def judge_specs(self) -> list[dict[str, Any]]:
        return self.query(
            "SELECT hash, model, spec, created_at FROM judge_specs ORDER BY created_at"
        )

    def _check_spec(self, spec_hash: str) -> None:
        if not self.query("SELECT 1 FROM judge_specs WHERE hash = ?", (spec_hash,)):
            raise StoreError(
                f"judge spec {spec_hash!r} is not in the store; call put_judge_spec(spec) first"
            )

    def put_judgement(self, j: Judgement) -> None:
        """Store a judgement (ok or unjudged) and its per-trajectory scores."""
        self._check_spec(j.spec_hash)
        self._write(lambda c: self._insert_judgement(c, j))

    def _insert_judgement(self, c: sqlite3.Connection, j: Judgement) -> None:
        c.execute(
            "INSERT OR REPLACE INTO judgements (id, group_id, spec_hash, status, error,"
            " raw_response, presentations, input_tokens, output_tokens, cost_usd, latency_s,"
            " calls, cached, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                j.id,
                j.group_id,
                j.spec_hash,
                j.status,
                j.error,
                j.raw_response,
                json.dumps(j.presentations, default=str),
                j.input_tokens,
                j.output_tokens,
                j.cost_usd,
                j.latency_s,
                j.calls,
                int(j.cached),
                time.time(),
            ),
        )
        c.executemany(
            "INSERT OR REPLACE INTO scores (judgement_id, trajectory_id, score, rationale,"
            " hack_suspected) VALUES (?,?,?,?,?)",
            [
                (j.id, s.trajectory_id, s.score, s.rationale, int(s.hack_suspected))
                for s in j.scores
            ],
        )

    def judgements(
        self, group_id: str | None = None, spec_hash: str | None = None, status: str | None = None
    ) -> list[Judgement]:
        """Judgements, oldest first, with their scores."""
        clauses, params = [], []
        for col, val in (("group_id", group_id), ("spec_hash", spec_hash), ("status", status)):
            if val is not None:
                clauses.append(f"{col} = ?")
                params.append(val)
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self.query(f"SELECT * FROM judgements {where} ORDER BY created_at, rowid", params)
        if not rows:
            return []
        ids = [r["id"] for r in rows]
        scores: dict[str, list[TrajectoryScore]] = {}
        for chunk in range(0, len(ids), 500):
            part = ids[chunk : chunk + 500]
            marks = ",".join("?" * len(part))
            for s in self.query(
                f"SELECT s.* FROM scores s JOIN trajectories t ON t.id = s.trajectory_id "
                f"WHERE s.judgement_id IN ({marks}) ORDER BY t.idx",
                part,
            ):
                scores.setdefault(s["judgement_id"], []).append(
                    TrajectoryScore(
                        trajectory_id=s["trajectory_id"],
                        score=s["score"],
                        rationale=s["rationale"],
                        hack_suspected=bool(s["hack_suspected"]),
                    )
                )
        return [
            Judgement(
                id=r["id"],
                group_id=r["group_id"],
                spec_hash=r["spec_hash"],
                status=r["status"],
                scores=scores.get(r["id"], []),
                presentations=json.loads(r["presentations"]),
                error=r["error"],
                raw_response=r["raw_response"],
                input_tokens=r["input_tokens"],
                output_tokens=r["output_tokens"],
                cost_usd=r["cost_usd"],
                latency_s=r["latency_s"],
                calls=r["calls"],
                cached=bool(r["cached"]),
            )
            for r in rows
        ]

    def cache_get(self, spec_hash: str, group_hash: str) -> dict[str, Any] | None:
        rows = self.query(
            "SELECT value FROM judge_cache WHERE spec_hash = ? AND group_hash = ?",
            (spec_hash, group_hash),
        )
        return json.loads(rows[0]["value"]) if rows else None

    def cache_put(self, spec_hash: str, group_hash: str, value: dict[str, Any]) -> None:
        self._write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO judge_cache (spec_hash, group_hash, value, created_at)"
                " VALUES (?,?,?,?)",
                (spec_hash, group_hash, json.dumps(value, default=str), time.time()),
            )
        )

    # ------------------------------------------------------------------ people and signals
    def add_human_ranking(
        self,
        group_id: str,
        labeler: str,
        ranking: dict[str, float],
        blind: bool = True,
        skipped: bool = False,
    ) -> int:
        """Record one labeler's ranking of a group (1 = best; equal ranks are ties).

        Every call adds a row: two labelers (or one labeler twice) never overwrite each other.
        Ranking keys must be trajectory ids of that group.
        """
        labeler = labeler.strip()
        if not labeler:
            raise StoreError("a ranking needs a labeler name")
        known = {
            r["id"]
            for r in self.query("SELECT id FROM trajectories WHERE group_id = ?", (group_id,))
        }
        if not known:
            raise StoreError(f"group {group_id!r} is not in store {str(self.path)!r}")
        unknown = set(ranking) - known
        if unknown:
            raise StoreError(
                f"ranking names trajectories not in group {group_id!r}: {sorted(unknown)}"
            )
        if not skipped and set(ranking) != known:
            raise StoreError(
                f"ranking of group {group_id!r} must rank every trajectory; missing {sorted(known - set(ranking))}"
            )
        payload = json.dumps({k: float(v) for k, v in ranking.items()})
        return self._write(
            lambda c: (
                c.execute(
                    "INSERT INTO human_rankings (group_id, labeler, ranking, blind, skipped, created_at)"
                    " VALUES (?,?,?,?,?,?)",
                    (group_id, labeler, payload, int(blind), int(skipped), time.time()),
                ).lastrowid
            )
        )

    def human_rankings(
        self, group_id: str | None = None, labeler: str | None = None, include_skipped: bool = False
    ) -> list[dict[str, Any]]:
        clauses, params = [], []
        if group_id is not None:
            clauses.append("group_id = ?")
            params.append(group_id)
        if labeler is not None:
            clauses.append("labeler = ?")
            params.append(labeler)
        if not include_skipped:
            clauses.append("skipped = 0")
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self.query(f"SELECT * FROM human_rankings {where} ORDER BY created_at, id", params)
        for r in rows:
            r["ranking"] = json.loads(r["ranking"])
            r["blind"] = bool(r["blind"])
            r["skipped"] = bool(r["skipped"])
        return rows

    def add_hack_signal(self, trajectory_id: str, name: str, detail: str = "") -> None:
        rows = self.query("SELECT group_id FROM trajectories WHERE id = ?", (trajectory_id,))
        if not rows:
            raise StoreError(f"trajectory {trajectory_id!r} is not in store {str(self.path)!r}")
        gid = rows[0]["group_id"]
        self._write(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO hack_signals (trajectory_id, name, detail, group_id)"
                " VALUES (?,?,?,?)",
                (trajectory_id, name, detail, gid),
            )
        )

    def hack_signals(
        self, run_id: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        where = "WHERE g.run_id = ?" if run_id else ""
        params: list[Any] = [run_id] if run_id else []
        lim = f"LIMIT {int(limit)}" if limit else ""
        return self.query(
            "SELECT s.trajectory_id, s.group_id, s.name, s.detail, g.run_id, g.step, g.env_id,"
            " g.task_id FROM hack_signals s JOIN groups g ON g.id = s.group_id "
            f"{where} ORDER BY g.created_at DESC {lim}",
            params,
        )

    # ------------------------------------------------------------------ export
    def export(self, out_path: str | Path, fmt: str = "jsonl") -> int:
        """Write every group (jsonl: one Group per line) or trajectory (parquet: one row each).

        Returns the number of records written. Parquet rows carry the latest judge score.
        """
        out = Path(out_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "jsonl":
            n = 0
            tmp = out.with_name(out.name + ".tmp")
            with tmp.open("w", encoding="utf-8") as f:
                for g in self.iter_groups():
                    f.write(g.to_json() + "\n")
                    n += 1
            tmp.replace(out)
            return n
        if fmt == "parquet":
            return self._export_parquet(out)
        raise StoreError(f"unknown export format {fmt!r}; use 'jsonl' or 'parquet'")

    def _export_parquet(self, out: Path) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema(
            [
                ("trajectory_id", pa.string()),
                ("group_id", pa.string()),
                ("run_id", pa.string()),
                ("step", pa.int64()),
                ("env_id", pa.string()),
                ("task_id", pa.string()),
                ("seed", pa.int64()),
                ("messages", pa.string()),
                ("turns", pa.string()),
                ("verifiable_reward", pa.float64()),
                ("judge_score", pa.float64()),
                ("judge_rationale", pa.string()),
                ("metrics", pa.string()),
                ("truncated", pa.bool_()),
                ("error", pa.string()),
            ]
        )
        sql = """
            SELECT t.id AS trajectory_id, t.group_id, g.run_id, g.step, t.env_id, t.task_id,
                   t.seed, t.messages, t.turns, t.verifiable_reward, t.metrics, t.truncated, t.error,
                   (SELECT s.score FROM scores s JOIN judgements j ON j.id = s.judgement_id
                     WHERE s.trajectory_id = t.id AND j.status = 'ok'
                     ORDER BY j.created_at DESC LIMIT 1) AS judge_score,
                   (SELECT s.rationale FROM scores s JOIN judgements j ON j.id = s.judgement_id
                     WHERE s.trajectory_id = t.id AND j.status = 'ok'
                     ORDER BY j.created_at DESC LIMIT 1) AS judge_rationale
            FROM trajectories t JOIN groups g ON g.id = t.group_id
            ORDER BY g.created_at, t.group_id, t.idx"""
        tmp = out.with_name(out.name + ".tmp")
        n = 0
        with self._lock:
            cur = self.conn.execute(sql)
            with pq.ParquetWriter(tmp, schema) as writer:
                while batch := cur.fetchmany(2000):
                    rows = [dict(r) for r in batch]
                    for r in rows:
                        r["truncated"] = bool(r["truncated"])
                    writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                    n += len(rows)
        tmp.replace(out)
        return n


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
