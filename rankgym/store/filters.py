"""The group filters shared by listing, counting and judging: SQL ``WHERE`` text and its params.

Every user-typed value travels as a bound parameter; full-text input is quoted word by word
(:func:`fts_query`), so FTS5 operators in it are inert.

What this module does not do: it runs no query; the caller owns the connection.
"""

from __future__ import annotations

import re
from typing import Any

SEARCH_HITS_LIMIT = 10_000
"""Group search looks at the most recent this-many matching trajectories (keeps it fast)."""

J_OK = "j.status = 'ok'"
"""True for a successful judgement aliased ``j`` (the only place this test is spelled)."""

JUDGED_OK = f"EXISTS (SELECT 1 FROM judgements j WHERE j.group_id = g.id AND {J_OK})"
"""True for a group (aliased ``g``) with at least one successful judgement."""


def fts_query(text: str) -> str:
    """Turn free text into a safe FTS5 query: every word quoted, all words required."""
    words = re.findall(r"[\w@.+-]+", text, flags=re.UNICODE)
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def group_filters(
    run_id: str | None = None,
    step: int | None = None,
    env_id: str | None = None,
    spec_hash: str | None = None,
    labeled: bool | None = None,
    hack_flagged: bool | None = None,
    search: str | None = None,
    judged: bool | None = None,
    not_labeled_by: str | None = None,
    min_trajectories: int | None = None,
) -> tuple[str, list[Any]]:
    """``("WHERE ...", params)`` selecting groups ``g`` by these filters (``""`` for none).

    ``not_labeled_by``: groups this labeler has neither ranked nor skipped;
    ``min_trajectories``: groups with at least this many trajectories.
    """
    clauses: list[str] = []
    params: list[Any] = []
    if not_labeled_by is not None:
        clauses.append(
            "NOT EXISTS (SELECT 1 FROM human_rankings h WHERE h.group_id = g.id AND h.labeler = ?)"
        )
        params.append(not_labeled_by)
    for col, val in (("g.run_id", run_id), ("g.step", step), ("g.env_id", env_id)):
        if val is not None:
            clauses.append(f"{col} = ?")
            params.append(val)
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
        clauses.append(("" if judged else "NOT ") + JUDGED_OK)
    if min_trajectories is not None:
        clauses.append("g.n_trajectories >= ?")
        params.append(min_trajectories)
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
