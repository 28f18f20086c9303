"""Row <-> model code: how a Group, Trajectory and Judgement become SQLite rows and back.

Functions here take an open connection inside a write transaction (``insert_*``) or a row
dict from a read (``*_from_row``); they never open, lock or commit anything themselves.

What this module does not do: no filtering or paging (see ``filters``), no export.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from rankgym.errors import StoreError
from rankgym.types import (
    Group,
    Judgement,
    Message,
    Trajectory,
    TrajectoryScore,
    Turn,
    escaped_json,
    reparse_json,
)

_MESSAGES = TypeAdapter(list[Message])
_TURNS = TypeAdapter(list[Turn])
_SURROGATE = re.compile("[\ud800-\udfff]")
V = TypeVar("V")


def clean_text(value: Any) -> Any:
    """``value`` with lone surrogates (text that is not valid Unicode) replaced by U+FFFD.

    SQLite stores UTF-8, which cannot hold a lone surrogate; JSON columns keep them exactly
    (as ``\\udXXX`` escapes, see :func:`dump_json`), plain text columns get U+FFFD.
    Anything that is not a str is returned as it is.
    """
    if isinstance(value, str) and not value.isascii() and _SURROGATE.search(value):
        return _SURROGATE.sub("\ufffd", value)
    return value


def clean_params(params: Any) -> Any:
    """Query parameters (a sequence or a mapping) with every text value made valid UTF-8."""
    if isinstance(params, dict):
        return {k: clean_text(v) for k, v in params.items()}
    return tuple(clean_text(v) for v in params)


class TextSafe:
    """A connection whose ``execute``/``executemany`` clean text parameters first.

    Used to redo a write whose text could not be encoded (see ``Store._write``); the fast
    path binds parameters untouched.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, clean_params(params))

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        return self.conn.executemany(sql, [clean_params(r) for r in rows])


def dump_json(adapter: TypeAdapter[V], value: V, exclude_none: bool = False) -> str:
    """JSON text of ``value``; lone surrogates become ``\\udXXX`` escapes (never an error)."""
    try:
        return adapter.dump_json(value, exclude_none=exclude_none).decode()
    except PydanticSerializationError:
        return escaped_json(adapter.dump_python(value, exclude_none=exclude_none))


def load_json(adapter: TypeAdapter[V], text: str) -> V:
    """Parse what :func:`dump_json` wrote (pydantic's parser refuses lone-surrogate escapes)."""
    try:
        return adapter.validate_json(text)
    except ValidationError as e:
        return adapter.validate_python(reparse_json(e, text))


def _insert_signals(c: sqlite3.Connection, g: Group, t: Trajectory, on_conflict: str) -> None:
    """Write ``t``'s hack signals; ``on_conflict`` is ``IGNORE`` (keep a stored detail) or
    ``REPLACE``."""
    c.executemany(
        f"INSERT OR {on_conflict} INTO hack_signals (trajectory_id, name, detail, group_id)"
        " VALUES (?,?,?,?)",
        [(t.id, name, "", g.id) for name in dict.fromkeys(t.hack_signals)],
    )


def insert_group(c: sqlite3.Connection, g: Group) -> None:
    """Write ``g`` (idempotent by id; same content keeps scores and labels, new content replaces)."""
    now = time.time()
    chash = g.content_hash()
    existing = c.execute("SELECT content_hash FROM groups WHERE id = ?", (g.id,)).fetchone()
    if existing is not None and existing[0] == chash:
        # Same content: keep trajectories, scores and labels; refresh signals and judgement.
        c.execute("UPDATE groups SET run_id = ?, step = ? WHERE id = ?", (g.run_id, g.step, g.id))
        if g.tools:  # a group stored before tools were kept gains them; none given keeps them
            c.execute("UPDATE groups SET tools = ? WHERE id = ?", (json.dumps(g.tools), g.id))
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
            _insert_signals(c, g, t, on_conflict="IGNORE")
        if g.judgement is not None:
            insert_judgement(c, g.judgement)
        return
    if existing is not None:
        # Content changed: the old scores and labels no longer describe it; replace all
        # (the cascade deletes trajectories; a trigger drops their full-text rows).
        c.execute("DELETE FROM groups WHERE id = ?", (g.id,))
    c.execute(
        "INSERT INTO groups (id, run_id, step, env_id, task_id, n_trajectories, content_hash,"
        " created_at, tools) VALUES (?,?,?,?,?,?,?,?,?)",
        (
            g.id, g.run_id, g.step, g.env_id, g.task_id, len(g.trajectories), chash, now,
            json.dumps(g.tools),
        ),
    )  # fmt: skip
    for i, t in enumerate(g.trajectories):
        c.execute(
            "INSERT INTO trajectories (id, group_id, idx, env_id, task_id, seed, messages,"
            " turns, verifiable_reward, metrics, truncated, error, schema_version, text)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                t.id,
                g.id,
                i,
                t.env_id,
                t.task_id,
                t.seed,
                dump_json(_MESSAGES, t.messages, exclude_none=True),
                dump_json(_TURNS, t.turns),
                t.verifiable_reward,
                json.dumps(t.metrics),
                int(t.truncated),
                t.error,
                t.schema_version,
                t.text(),  # a trigger indexes it in trajectories_fts
            ),
        )
        _insert_signals(c, g, t, on_conflict="REPLACE")
    if g.judgement is not None:
        insert_judgement(c, g.judgement)


def loads(text: str, where: str) -> Any:
    """``json.loads`` of a stored JSON column; a damaged value is a StoreError naming ``where``."""
    try:
        return json.loads(text)
    except (ValueError, TypeError) as e:
        raise StoreError(f"{where} holds damaged JSON ({e}); it was written by another tool") from e


def search_text(messages_json: str) -> str:
    """The searchable text of a stored ``messages`` column (``Trajectory.text``); "" if unreadable."""
    try:
        messages = load_json(_MESSAGES, messages_json)
    except ValueError:
        return ""
    text: str = clean_text(
        Trajectory.model_construct(env_id="", task_id="", messages=messages).text()
    )
    return text


def insert_judgement(c: sqlite3.Connection, j: Judgement) -> None:
    """Write (or replace) a judgement row and its per-trajectory scores."""
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
        [(j.id, s.trajectory_id, s.score, s.rationale, int(s.hack_suspected)) for s in j.scores],
    )


# Columns that hold a model's field as it is (same name, same value); the others are JSON
# text or 0/1 flags, converted one by one below.
_GROUP_COLUMNS = "id run_id step env_id task_id".split()
_TRAJECTORY_COLUMNS = "schema_version id env_id task_id seed verifiable_reward error".split()
_SCORE_COLUMNS = "trajectory_id score rationale".split()
_JUDGEMENT_COLUMNS = (
    "id group_id spec_hash status error raw_response input_tokens output_tokens cost_usd "
    "latency_s calls"
).split()


def _same(row: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    return {c: row[c] for c in columns}


def group_from_row(
    g: dict[str, Any], trajectories: list[Trajectory], judgement: Judgement | None
) -> Group:
    """Build a Group from a ``groups`` row, its trajectories and the judgement to show."""
    tools = json.loads(g["tools"]) if g.get("tools") else []
    return Group(
        **_same(g, _GROUP_COLUMNS),
        trajectories=trajectories,
        judgement=judgement,
        tools=tools if isinstance(tools, list) else [],
    )


def trajectory_from_row(r: dict[str, Any], signals: list[str]) -> Trajectory:
    """Build a Trajectory from a ``trajectories`` row and its hack-signal names."""
    return Trajectory(
        **_same(r, _TRAJECTORY_COLUMNS),
        messages=load_json(_MESSAGES, r["messages"]),
        turns=load_json(_TURNS, r["turns"]),
        metrics=json.loads(r["metrics"]),
        hack_signals=signals,
        truncated=bool(r["truncated"]),
    )


def score_from_row(s: dict[str, Any]) -> TrajectoryScore:
    """Build a TrajectoryScore from a ``scores`` row."""
    return TrajectoryScore(**_same(s, _SCORE_COLUMNS), hack_suspected=bool(s["hack_suspected"]))


def judgement_from_row(r: dict[str, Any], scores: list[TrajectoryScore]) -> Judgement:
    """Build a Judgement from a ``judgements`` row and its scores (in trajectory order)."""
    return Judgement(
        **_same(r, _JUDGEMENT_COLUMNS),
        scores=scores,
        presentations=json.loads(r["presentations"]),
        cached=bool(r["cached"]),
    )
