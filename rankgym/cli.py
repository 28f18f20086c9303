"""The `rankgym` command line.

Each subcommand lives beside the code it drives (``rankgym.envs.commands``,
``rankgym.judges.commands``, ...) as a :class:`Command`; this module only dispatches, so
`rankgym --help` stays fast (no torch or litellm import). Results go to stdout (one JSON object
with ``--json``), logs and progress bars to stderr.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rankgym.errors import RankgymError, UserError
from rankgym.heap import bound_primitive_caches
from rankgym.terminal import printable

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__all__ = ["SUBCOMMANDS", "Command", "UserError", "build_parser", "main"]


@dataclass(frozen=True)
class Command:
    """A subcommand: how to declare its arguments and how to run it.

    ``run`` returns the summary dict printed by ``--json``; in text mode it prints its own
    human-readable output to stdout. Its one-line help is not here but in :data:`SUBCOMMANDS`,
    the one place ``rankgym --help`` reads (without importing any command module).
    """

    name: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict[str, Any] | None]


# name -> (module, one-line help); the module defines the Command as the name in upper case
# (`new-env` -> `NEW_ENV`). The help lives only here, so `--help` imports nothing; keep each
# under 56 characters so `rankgym --help` fits it beside its name in 80 columns.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "envs": ("rankgym.envs.commands", "list registered environments"),
    "new-env": ("rankgym.envs.commands", "scaffold an installable env package"),
    "rollout": ("rankgym.envs.commands", "roll out groups of trajectories into a store"),
    "judge": ("rankgym.judges.commands", "judge every unjudged group in a store"),
    "agreement": ("rankgym.judges.commands", "judge vs human/verifier agreement"),
    "judge-check": (
        "rankgym.trainer.judge_check_command",
        "measure whether a judge tells good from bad",
    ),
    "judge-train": (
        "rankgym.trainer.judge_train_command",
        "train a pairwise judge LoRA and compare it",
    ),
    "train": ("rankgym.trainer.commands", "GRPO training from a TOML config"),
    "eval": ("rankgym.trainer.commands", "held-out success of base vs adapter"),
    "sft": ("rankgym.trainer.commands", "supervised warm start (LoRA) on demonstrations"),
    "demo": ("rankgym.trainer.demo", "the main job on the embedded model, CPU only"),
    "dashboard": ("rankgym.dashboard.commands", "open the Streamlit dashboard"),
    "export": ("rankgym.commands", "export a store to JSONL or Parquet"),
    "import-art": (
        "rankgym.integrations.commands",
        "import OpenPipe ART trajectories into a store",
    ),
}


def _load(name: str) -> Command | None:
    module = SUBCOMMANDS[name][0]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (e.name == module or module.startswith(e.name + ".")):
            return None
        raise
    return getattr(mod, name.upper().replace("-", "_"), None)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON summary object to stdout")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bars, warnings only")
    p.add_argument("--verbose", "-v", action="store_true", help="debug logging to stderr")


def commands_table() -> str:
    """The ``commands:`` section of ``rankgym --help``: each subcommand and its one-line help.

    Written here rather than by argparse, which measures subcommand names two columns short
    and so put the help of the longest (``judge-check``) on a line of its own.
    """
    width = max(map(len, SUBCOMMANDS)) + 2
    rows = (f"  {name:<{width}}{text}" for name, (_, text) in SUBCOMMANDS.items())
    return "\n".join(["commands:", *rows])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `rankgym` parser; only the subcommand ``only`` gets its own arguments (the others
    are not imported)."""
    parser = argparse.ArgumentParser(
        prog="rankgym",
        usage="%(prog)s [-h] COMMAND ...",
        description="Agent environments judged as groups, GRPO on the scores, and a dashboard.",
        epilog=commands_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", help=argparse.SUPPRESS, prog="rankgym"
    )
    for name, (_, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, description=help_text)
        _common(p)
        if name == only:
            cmd = _load(name)
            if cmd is not None:
                cmd.add_arguments(p)
    return parser


def configure_logging(quiet: bool, verbose: bool) -> None:
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("LiteLLM", "litellm", "httpx", "urllib3", "transformers", "filelock"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    if quiet:
        os.environ["RANKGYM_QUIET"] = "1"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=chosen if chosen in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    configure_logging(args.quiet, args.verbose)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    bound_primitive_caches()  # before torch's first matmul: oneDNN reads them once (rankgym.heap)
    cmd = _load(args.command)
    if cmd is None:
        print(
            f"rankgym {args.command}: not available yet in this version of rankgym.",
            file=sys.stderr,
        )
        return 2
    try:
        summary = cmd.run(args)
        if args.json and summary is not None:
            print(json.dumps(summary, indent=None, default=str), flush=True)
    except RankgymError as e:
        print(f"rankgym {args.command}: error: {printable(e, one_line=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rankgym {args.command}: interrupted; committed work is kept.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    return 0


def _closed_pipe() -> int:
    """stdout's reader went away (``rankgym ... --json | head``): stop quietly, like SIGPIPE.

    Points stdout at /dev/null so the interpreter's final flush does not raise again.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


if __name__ == "__main__":
    sys.exit(main())
