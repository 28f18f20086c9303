"""Labelled pairs on disk (JSON lines) and as a judge sees them (both orders).

:func:`write_jsonl` / :func:`read_jsonl` store the :class:`~rankgym.judges.judge_data.PairItem`
lists that ``rankgym judge-train`` writes (``train.jsonl``, ``heldout.jsonl``, their ties);
:func:`presentations` gives each pair in both orders, so "the first one wins" scores 0.5.
What it does not do: build or split pairs (``judge_data``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rankgym.judges.judge_data import PairItem


def presentations(pairs: list[PairItem]) -> list[tuple[PairItem, bool]]:
    """Each pair in both orders: ``(pair, winner_first)``."""
    return [(p, first) for p in pairs for first in (True, False)]


def write_jsonl(path: Path, pairs: list[PairItem]) -> None:
    """Write pairs atomically (a temp file, then ``os.replace``)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def read_jsonl(path: Path) -> list[PairItem]:
    with path.open(encoding="utf-8") as fh:
        return [PairItem.from_dict(json.loads(line)) for line in fh if line.strip()]
