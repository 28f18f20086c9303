"""Core subcommands that need only the store: `rankgym export`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rankgym.cli import Command, UserError


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="path of the SQLite store")
    p.add_argument("--format", choices=["jsonl", "parquet"], default="jsonl")
    p.add_argument("--out", required=True, help="output file")


def _export(args: argparse.Namespace) -> dict[str, Any]:
    from rankgym.store import Store, StoreError

    if not Path(args.store).is_file():
        raise UserError(f"store {args.store!r} does not exist")
    try:
        with Store(args.store) as store:
            n = store.export(args.out, args.format)
    except StoreError as e:
        raise UserError(str(e)) from None
    unit = "groups" if args.format == "jsonl" else "trajectories"
    if not args.json:
        print(f"wrote {n} {unit} to {args.out} ({args.format})")
    return {"out": str(args.out), "format": args.format, "records": n, "unit": unit}


EXPORT = Command("export", "export a store to JSONL or Parquet", _export_args, _export)
