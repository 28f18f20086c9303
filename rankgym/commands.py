"""Core subcommands that need only the store: `rankgym export`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rankgym.cli import Command
from rankgym.store import Store
from rankgym.terminal import printable


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="path of the SQLite store")
    p.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl")
    p.add_argument("--out", required=True, help="output file")


def _export(args: argparse.Namespace) -> dict[str, Any]:
    with Store.for_reading(args.store) as store:
        result = store.export(args.out, args.format)
    skipped = [{"group_id": gid, "reason": why} for gid, why in result.skipped]
    if not args.json:
        print(f"wrote {result.records} {result.unit} to {printable(args.out)} ({args.format})")
        for s in skipped[:20]:
            print(
                f"skipped group {printable(s['group_id'], True)}: {printable(s['reason'], True)}",
                file=sys.stderr,
            )
        if len(skipped) > 20:
            print(f"... and {len(skipped) - 20} more skipped groups", file=sys.stderr)
        if result.repaired_texts:
            print(
                f"{result.repaired_texts} stored texts were not valid UTF-8; exported with "
                "U+FFFD in place of the bad bytes",
                file=sys.stderr,
            )
    return {
        "out": str(args.out),
        "format": args.format,
        "records": result.records,
        "unit": result.unit,
        "skipped_groups": len(skipped),
        "skipped": skipped[:100],
        "repaired_texts": result.repaired_texts,
    }


EXPORT = Command("export", _export_args, _export)
