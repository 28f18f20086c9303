"""The trajectory store: one SQLite file holding runs, groups, trajectories, judgements, labels.

Every write is one transaction (a whole group with its trajectories, full-text rows, hack
signals and judgement at once); how the file is opened, locked and retried is in
``connection``, the schema in ``schema``, row <-> model code in ``rows``, aggregate reads
(dashboard, labeling, agreement) in ``queries``. Tables: docs/store.md.

What it does not do: it is not a server. Many processes may read and write one file on a local
disk; a network filesystem (NFS, SMB) breaks SQLite's locking and is refused nowhere, so don't.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rankgym.credentials import redact
from rankgym.errors import StoreError
from rankgym.store.export import ExportResult, export_store
from rankgym.store.filters import J_OK, JUDGED_OK, SEARCH_HITS_LIMIT, fts_query, group_filters
from rankgym.store.queries import StoreQueries
from rankgym.store.rankings import parse_ranking, ranking_problem
from rankgym.store.rows import (
    group_from_row,
    insert_group,
    insert_judgement,
    judgement_from_row,
    loads,
    score_from_row,
    trajectory_from_row,
)
from rankgym.types import Group, Judgement, JudgeSpec, TrajectoryScore

__all__ = ["SEARCH_HITS_LIMIT", "Store"]

log = logging.getLogger(__name__)


class Store(StoreQueries):
    """A rankgym trajectory store in one SQLite file (see module docstring)."""

    # ------------------------------------------------------------------ runs & steps
    def create_run(
        self,
        name: str | None = None,
        kind: str = "rollout",
        config: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> str:
        """Create a run (or keep an existing one with the same id) and return its id."""
        if run_id is None:
            run_id = name or f"run-{time.strftime('%Y%m%d-%H%M%S')}-{random.randrange(16**4):04x}"
        rid = run_id
        cfg = json.dumps(redact(config or {}), default=str)  # no credential in runs.config
        self._write(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO runs (id, name, kind, config, created_at) VALUES (?,?,?,?,?)",
                (rid, name or rid, kind, cfg, time.time()),
            )
        )
        return rid

    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first: ``id``, ``name``, ``kind``, ``config`` (dict), ``created_at``.

        ``config`` is redacted (``rankgym.credentials``) also when read, for stores written
        before credentials were redacted at write."""
        rows = self.query("SELECT * FROM runs ORDER BY created_at")
        for r in rows:
            r["config"] = redact(loads(r["config"], f"run {r['id']!r}: config"))
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
        """A run's training steps in order: ``run_id``, ``step``, ``metrics`` (dict), ``created_at``."""
        rows = self.query("SELECT * FROM steps WHERE run_id = ? ORDER BY step", (run_id,))
        for r in rows:
            r["metrics"] = loads(r["metrics"], f"step {r['step']} of run {run_id!r}: metrics")
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
            self._write(functools.partial(insert_group, g=g))

    def get_group(self, group_id: str, spec_hash: str | None = None) -> Group:
        """Load a group with its trajectories and its latest judgement (for ``spec_hash``)."""
        rows = self.query("SELECT * FROM groups WHERE id = ?", (group_id,))
        if not rows:
            raise StoreError(f"group {group_id!r} is not in store {str(self.path)!r}")
        g = rows[0]
        trs = self.query("SELECT * FROM trajectories WHERE group_id = ? ORDER BY idx", (group_id,))
        signals: dict[str, list[str]] = {}
        for r in self.query(
            "SELECT trajectory_id, name FROM hack_signals WHERE group_id = ? ORDER BY rowid",
            (group_id,),
        ):
            signals.setdefault(r["trajectory_id"], []).append(r["name"])
        try:
            trajectories = [trajectory_from_row(r, signals.get(r["id"], [])) for r in trs]
            js = self.judgements(group_id=group_id, spec_hash=spec_hash)
        except ValueError as e:  # pydantic's ValidationError and json's errors are ValueErrors
            why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise StoreError(
                f"group {group_id!r} in store {str(self.path)!r} has a row that cannot be read "
                f"({why}); it was written damaged or by another tool"
            ) from e
        return group_from_row(g, trajectories, js[-1] if js else None)

    def iter_groups(self, run_id: str | None = None, batch: int = 200) -> Iterator[Group]:
        """Every group (optionally of one run), oldest first, loaded lazily."""
        for gid in self.group_ids(run_id=run_id):
            yield self.get_group(gid)

    def group_ids(self, run_id: str | None = None, step: int | None = None) -> list[str]:
        """Ids of the groups (of one run / step), oldest first."""
        where, params = group_filters(run_id=run_id, step=step)
        return [
            r["id"]
            for r in self.query(
                f"SELECT g.id FROM groups g {where} ORDER BY g.created_at, g.rowid", params
            )
        ]

    def list_groups(self, limit: int = 50, offset: int = 0, **filters: Any) -> list[dict[str, Any]]:
        """One page of groups, newest first: ``id``, ``run_id``, ``step``, ``env_id``, ``task_id``,
        ``n_trajectories``, ``created_at``, ``judged`` (bool), ``n_labels``, ``n_hack``.

        Filters: run_id, step, env_id, spec_hash, labeled, hack_flagged, search, judged.
        ``search`` considers the newest :data:`SEARCH_HITS_LIMIT` matching trajectories.
        """
        where, params = group_filters(**filters)
        sql = f"""
            SELECT g.id, g.run_id, g.step, g.env_id, g.task_id, g.n_trajectories, g.created_at,
              {JUDGED_OK} AS judged,
              (SELECT COUNT(*) FROM human_rankings h WHERE h.group_id = g.id AND h.skipped = 0) AS n_labels,
              (SELECT COUNT(*) FROM hack_signals s WHERE s.group_id = g.id) AS n_hack
            FROM groups g {where}
            ORDER BY g.created_at DESC, g.rowid DESC LIMIT ? OFFSET ?"""
        rows = self.query(sql, (*params, limit, offset))
        for r in rows:
            r["judged"] = bool(r["judged"])
        return rows

    def count_groups(self, **filters: Any) -> int:
        """How many groups match the filters of :meth:`list_groups`."""
        where, params = group_filters(**filters)
        return int(self.query(f"SELECT COUNT(*) AS n FROM groups g {where}", params)[0]["n"])

    def unjudged_group_ids(
        self, spec_hash: str, run_id: str | None = None, step: int | None = None
    ) -> list[str]:
        """Groups with no successful judgement under ``spec_hash``, oldest first."""
        where, params = group_filters(run_id=run_id, step=step)
        extra = f"NOT EXISTS (SELECT 1 FROM judgements j WHERE j.group_id = g.id AND j.spec_hash = ? AND {J_OK})"
        where = f"{where} AND {extra}" if where else f"WHERE {extra}"
        return [
            r["id"]
            for r in self.query(
                f"SELECT g.id FROM groups g {where} ORDER BY g.created_at, g.rowid",
                (*params, spec_hash),
            )
        ]

    def search(self, query: str, limit: int = 50) -> list[dict[str, Any]]:
        """Full-text search over trajectory content, newest first: ``trajectory_id``,
        ``group_id``, ``snippet`` (matches in ``[...]``).

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
        """Record a judge spec (once per content hash) and return its hash."""
        h = spec.spec_hash
        self._write(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO judge_specs (hash, model, spec, created_at) VALUES (?,?,?,?)",
                (h, spec.model, spec.to_json(), time.time()),
            )
        )
        return h

    def get_judge_spec(self, spec_hash: str) -> JudgeSpec | None:
        """The spec stored under ``spec_hash``, or None."""
        rows = self.query("SELECT spec FROM judge_specs WHERE hash = ?", (spec_hash,))
        return JudgeSpec.from_json(rows[0]["spec"]) if rows else None

    def judge_specs(self) -> list[dict[str, Any]]:
        """Every spec, oldest first: ``hash``, ``model``, ``spec`` (JSON text), ``created_at``."""
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
        self._write(lambda c: insert_judgement(c, j))

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
                scores.setdefault(s["judgement_id"], []).append(score_from_row(s))
        return [judgement_from_row(r, scores.get(r["id"], [])) for r in rows]

    def cache_get(self, spec_hash: str, group_hash: str) -> dict[str, Any] | None:
        """The dict :meth:`cache_put` stored for (spec, group content), or None (also if damaged)."""
        rows = self.query(
            "SELECT value FROM judge_cache WHERE spec_hash = ? AND group_hash = ?",
            (spec_hash, group_hash),
        )
        try:
            return json.loads(rows[0]["value"]) if rows else None
        except ValueError:
            return None  # a damaged cache entry is a miss: the judge asks again

    def cache_put(self, spec_hash: str, group_hash: str, value: Mapping[str, Any]) -> None:
        """Cache a judge reply for (spec, group content), replacing an older one."""
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
        why = ranking_problem(ranking, known, skipped=skipped)
        if why:
            raise StoreError(f"ranking of group {group_id!r} {why}")
        payload = json.dumps({k: float(v) for k, v in ranking.items()})
        row_id = self._write(
            lambda c: (
                c.execute(
                    "INSERT INTO human_rankings (group_id, labeler, ranking, blind, skipped, created_at)"
                    " VALUES (?,?,?,?,?,?)",
                    (group_id, labeler, payload, int(blind), int(skipped), time.time()),
                ).lastrowid
            )
        )
        assert row_id is not None  # an INSERT always sets it
        return row_id

    def human_rankings(
        self,
        group_id: str | None = None,
        labeler: str | None = None,
        include_skipped: bool = False,
        problems: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Rankings, oldest first: ``id``, ``group_id``, ``labeler``, ``ranking`` (dict),
        ``blind``, ``skipped``, ``created_at``.

        A damaged row (see ``store.rankings``) is left out and named in a warning and, when
        given, in ``problems``; it never raises."""
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
        ids: dict[str, set[str]] = {}
        sub = f"SELECT group_id FROM human_rankings {where}"
        for t in self.query(f"SELECT group_id, id FROM trajectories WHERE group_id IN ({sub})", params):  # fmt: skip
            ids.setdefault(t["group_id"], set()).add(t["id"])
        out = []
        for r in rows:
            r["blind"] = bool(r["blind"])
            r["skipped"] = bool(r["skipped"])
            known = ids.get(r["group_id"], set())
            r["ranking"], why = parse_ranking(r["ranking"], known, skipped=r["skipped"])
            if why:
                note = f"ranking {r['id']} of group {r['group_id']!r} by {r['labeler']!r} {why}; skipped"
                log.warning("%s: %s", self.path, note)
                if problems is not None:
                    problems.append(note)
                continue
            out.append(r)
        return out

    def add_hack_signal(self, trajectory_id: str, name: str, detail: str = "") -> None:
        """Flag a stored trajectory with a named hack signal (replacing the same name's detail)."""
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
        """Signals, newest group first: ``trajectory_id``, ``group_id``, ``name``, ``detail``,
        ``run_id``, ``step``, ``env_id``, ``task_id``."""
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
    def export(self, out_path: str | Path, fmt: str = "jsonl") -> ExportResult:
        """Write every group (jsonl: one Group per line) or trajectory (parquet: one row each).

        Parquet rows carry the latest judge score. Unreadable groups are skipped and listed in
        the result (see ``rankgym.store.export``).
        """
        return export_store(self, out_path, fmt)
