"""``rankgym import-art``: OpenPipe ART's trajectory files into a rankgym store."""

from __future__ import annotations

import argparse
from typing import Any

from rankgym.cli import Command
from rankgym.store import Store
from rankgym.terminal import printable


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        help="ART's .art/<project>/models/<model>/trajectories folder, or one <step>.parquet file",
    )
    p.add_argument("--store", required=True, help="the rankgym store to write (created if new)")
    p.add_argument("--run", default=None, help="run id in the store (default: the model's name)")


def _run(args: argparse.Namespace) -> dict[str, Any]:
    from rankgym.integrations.art import ART_NOTE, import_art
    from rankgym.integrations.trl_env import require

    require("art", "art", ART_NOTE)  # before creating a store file
    with Store(args.store) as store:
        summary = import_art(args.path, store, run_id=args.run)
    if not args.json:
        print(
            f"imported {summary['groups']} groups ({summary['trajectories']} trajectories) into "
            f"run {printable(summary['run_id'], True)} of {printable(args.store, True)}"
            + (f"; {summary['skipped']} groups skipped (see the log)" if summary["skipped"] else "")
        )
    return summary


IMPORT_ART = Command("import-art", _args, _run)
