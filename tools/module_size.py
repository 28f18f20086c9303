"""Check that no library module is longer than 500 lines (a module that long wants splitting
along its seams; STYLE.md).

Usage::

    python tools/module_size.py              # the tree this script sits in; exit 1 if any is over
    python tools/module_size.py --max 400    # another limit
    python tools/module_size.py --root DIR   # another copy of the tree

The library is every ``.py`` file of the packages in pyproject.toml's
``[tool.setuptools.package-dir]`` (``rankgym/``, ``envs/``, ``judges/``, ``trainer/``, ...).
Lines are physical lines, as ``wc -l`` counts them. What it does not check: tests, bench/,
tools/, samples/ and the env templates ``rankgym new-env`` copies (``rankgym/templates/``).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 500
SKIP_PARTS = frozenset({"__pycache__", "templates"})


def library_files(root: Path) -> list[Path]:
    """The library's ``.py`` files under ``root``, from pyproject.toml's package-dir table."""
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir = data.get("tool", {}).get("setuptools", {}).get("package-dir") or {}
    if not package_dir:
        raise SystemExit(f"{root / 'pyproject.toml'}: no [tool.setuptools.package-dir] table")
    folders = {(root / rel).resolve() for rel in package_dir.values()}
    found = {p for folder in folders for p in folder.glob("*.py")}  # each subpackage is listed
    return sorted(p for p in found if not SKIP_PARTS & set(p.relative_to(root).parts))


def too_long(root: Path, max_lines: int = MAX_LINES) -> list[tuple[str, int]]:
    """``(path relative to root, lines)`` of every library module over ``max_lines``, longest
    first."""
    over = []
    for path in library_files(root):
        with path.open("rb") as f:
            n = sum(1 for _ in f)
        if n > max_lines:
            over.append((str(path.relative_to(root)), n))
    return sorted(over, key=lambda item: -item[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=ROOT, help="source tree (default: this one)")
    p.add_argument("--max", type=int, default=MAX_LINES, help=f"line limit (default {MAX_LINES})")
    args = p.parse_args(argv)
    root = args.root.resolve()
    over = too_long(root, args.max)
    for rel, n in over:
        print(f"{rel}: {n} lines (over {args.max}): split it along its seams", file=sys.stderr)
    if not over:
        print(f"{len(library_files(root))} library modules, none over {args.max} lines")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
