"""Export a store: JSONL (one Group per line) or Parquet (one trajectory per row).

Both write to ``OUT.tmp`` and rename it over ``OUT`` at the end, so a crash or an error never
leaves a half-written file under the requested name.

What this module does not do: no filtering (every group is exported) and no import back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rankgym.store.core import Store

PARQUET_SQL = """
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


def export_jsonl(store: Store, out: Path) -> int:
    """Write every group as one JSON line; return the number of groups written."""
    n = 0
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for g in store.iter_groups():
            f.write(g.to_json() + "\n")
            n += 1
    tmp.replace(out)
    return n


def export_parquet(store: Store, out: Path) -> int:
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
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with store._lock:
        cur = store.conn.execute(PARQUET_SQL)
        with pq.ParquetWriter(tmp, schema) as writer:
            while batch := cur.fetchmany(2000):
                rows = [dict(r) for r in batch]
                for r in rows:
                    r["truncated"] = bool(r["truncated"])
                writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                n += len(rows)
    tmp.replace(out)
    return n
