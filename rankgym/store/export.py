"""Export a store: JSONL (one Group per line) or Parquet (one trajectory per row).

Both write to ``OUT.tmp`` and rename it over ``OUT`` at the end, so a crash or an error never
leaves a half-written file under the requested name. A group that cannot be read back (a row
another tool damaged) is skipped and reported, never the end of the export; text that is not
valid UTF-8 is exported with U+FFFD in place of the bad bytes and counted.

What this module does not do: no filtering (every group is exported) and no import back.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from rankgym.errors import StoreError
from rankgym.store.filters import J_OK
from rankgym.store.health import describe

if TYPE_CHECKING:
    from rankgym.store.core import Store

FORMATS = ("jsonl", "parquet")


@dataclass
class ExportResult:
    """What an export wrote: ``records`` (groups for jsonl, trajectories for parquet)."""

    out: Path
    format: str
    records: int
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """``(group id, reason)`` of each group left out because it could not be read."""
    repaired_texts: int = 0
    """Texts that were not valid UTF-8 and were written with U+FFFD in place of bad bytes."""

    @property
    def unit(self) -> str:
        """What ``records`` counts: ``"groups"`` (jsonl) or ``"trajectories"`` (parquet)."""
        return "groups" if self.format == "jsonl" else "trajectories"


def export_store(store: Store, out_path: str | Path, fmt: str = "jsonl") -> ExportResult:
    """Export every group of ``store`` to ``out_path``; see the module docstring."""
    out = Path(out_path)
    if fmt not in FORMATS:
        raise StoreError(f"unknown export format {fmt!r}; use 'jsonl' or 'parquet'")
    if out.is_dir():
        raise StoreError(
            f"--out {str(out)!r} is a directory; give a file name, e.g. "
            f"{str(out / ('export.' + fmt))!r}"
        )
    writer: Callable[[Store, Path, ExportResult], int] = (
        export_jsonl if fmt == "jsonl" else export_parquet
    )
    result = ExportResult(out, fmt, 0)
    before = store.repaired_texts
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        result.records = writer(store, tmp, result)
        tmp.replace(out)
    except OSError as e:
        raise StoreError(f"cannot write export {str(out)!r}: {e.strerror or e}") from None
    except sqlite3.DatabaseError as e:
        raise StoreError(describe(e, store.path)) from None
    finally:
        if tmp.exists():
            os.unlink(tmp)
    result.repaired_texts = store.repaired_texts - before
    return result


PARQUET_COLUMNS = f"""
    SELECT t.id AS trajectory_id, t.group_id, g.run_id, g.step, t.env_id, t.task_id,
           t.seed, t.messages, t.turns, t.verifiable_reward, t.metrics, t.truncated, t.error,
           CASE WHEN json_valid(t.turns) THEN json_extract(t.turns, '$[0].policy') END AS policy,
           (SELECT s.score FROM scores s JOIN judgements j ON j.id = s.judgement_id
             WHERE s.trajectory_id = t.id AND {J_OK}
             ORDER BY j.created_at DESC LIMIT 1) AS judge_score,
           (SELECT s.rationale FROM scores s JOIN judgements j ON j.id = s.judgement_id
             WHERE s.trajectory_id = t.id AND {J_OK}
             ORDER BY j.created_at DESC LIMIT 1) AS judge_rationale
    FROM trajectories t JOIN groups g ON g.id = t.group_id"""
ALL_ROWS = " ORDER BY g.created_at, t.group_id, t.idx"
ONE_GROUP = " WHERE t.group_id = ? ORDER BY t.idx"


def export_jsonl(store: Store, tmp: Path, result: ExportResult) -> int:
    """Write every readable group as one JSON line; return the number written."""
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for gid in store.group_ids():
            try:
                g = store.get_group(gid)
            except (StoreError, ValidationError, ValueError) as e:
                result.skipped.append((gid, str(e).splitlines()[0][:300]))
                continue
            f.write(g.to_json() + "\n")
            n += 1
    return n


def export_parquet(store: Store, tmp: Path, result: ExportResult) -> int:
    """Write every trajectory as one Parquet row with its latest judge score; return the count."""
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
            ("policy", pa.string()),
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
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            return _write_rows(writer, schema, _all_rows(store))
    except sqlite3.DatabaseError:
        pass  # a damaged page: start again, one group at a time, skipping what cannot be read
    with pq.ParquetWriter(tmp, schema) as writer:
        return _write_rows(writer, schema, _rows_by_group(store, result))


def _all_rows(store: Store) -> Iterator[list[dict[str, Any]]]:
    with store._lock:
        cur = store.conn.execute(PARQUET_COLUMNS + ALL_ROWS)
        while batch := cur.fetchmany(2000):
            yield [dict(r) for r in batch]


def _rows_by_group(store: Store, result: ExportResult) -> Iterator[list[dict[str, Any]]]:
    for gid in store.group_ids():
        try:
            yield store.query(PARQUET_COLUMNS + ONE_GROUP, (gid,))
        except StoreError as e:
            result.skipped.append((gid, str(e)))


def _write_rows(writer: Any, schema: Any, batches: Iterator[list[dict[str, Any]]]) -> int:
    import pyarrow as pa

    n = 0
    for rows in batches:
        for r in rows:
            r["truncated"] = bool(r["truncated"])
        writer.write_table(pa.Table.from_pylist(rows, schema=schema))
        n += len(rows)
    return n
