"""Run import-linter (``lint-imports``) on rankgym's real modules, as they are installed.

The source tree does not look like the installed package: ``rankgym.envs`` lives in ``envs/``,
``rankgym.judges`` in ``judges/`` and so on (``[tool.setuptools.package-dir]`` in
pyproject.toml). import-linter's graph builder (grimp) finds a package through its
``__init__.py`` and walks that one directory, so run in the source tree it would see only
``rankgym/`` (20 modules) and every contract about envs, judges or trainer would pass
vacuously. This script builds a mirror of the installed layout out of symlinks in a temporary
directory (``rankgym/`` with ``envs`` -> ``<root>/envs`` and so on, read from pyproject.toml),
runs ``lint-imports --config <root>/pyproject.toml`` there, and returns its exit status.

Usage::

    python tools/lint_imports.py            # the tree this script sits in
    python tools/lint_imports.py --root DIR # another copy of the tree (the layer test uses this)

What it does not do: it never writes into the source tree, and it checks only what the
contracts in pyproject.toml say (``[tool.importlinter]``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mirror(root: Path, dest: Path) -> Path:
    """Lay out ``root``'s packages under ``dest`` as they are installed (symlinks); returns
    ``dest``. Raises ``SystemExit`` naming pyproject.toml when it has no package-dir table."""
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir = data.get("tool", {}).get("setuptools", {}).get("package-dir")
    if not package_dir:
        raise SystemExit(f"{root / 'pyproject.toml'}: no [tool.setuptools.package-dir] table")
    for name, rel in sorted(package_dir.items(), key=lambda kv: kv[0].count(".")):
        src = (root / rel).resolve()
        target = dest.joinpath(*name.split("."))
        if "." not in name:  # a top-level package: a real directory of links to its entries
            target.mkdir(parents=True, exist_ok=True)
            for entry in sorted(src.iterdir()):
                if entry.name != "__pycache__" and not (target / entry.name).exists():
                    (target / entry.name).symlink_to(entry)
        elif target.exists():  # reached through a parent's link already
            if target.resolve() != src:
                raise SystemExit(f"{name}: {target} is {target.resolve()}, pyproject says {src}")
        else:
            target.symlink_to(src, target_is_directory=True)
    return dest


def lint_imports_exe() -> str:
    """The ``lint-imports`` next to this Python (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / "lint-imports"
    found = str(here) if here.is_file() else shutil.which("lint-imports")
    if found is None:
        raise SystemExit("lint-imports not found: install the dev extra (pip install -e '.[dev]')")
    return found


@contextlib.contextmanager
def mirrored(root: Path, prefix: str = "rankgym-mirror-") -> Iterator[Path]:
    """A temporary mirror of ``root``'s installed layout (:func:`mirror`), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield mirror(root, Path(tmp))


def run_in_mirror(
    root: Path, argv: list[str], *, prefix: str, drop_env: tuple[str, ...] = ("PYTHONPATH",)
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a fresh mirror of ``root`` (its working directory), without the
    ``drop_env`` variables (so only the mirror is imported); output captured. The mirror is
    removed afterwards. tools/typecheck.py runs mypy through it."""
    with mirrored(root, prefix) as dest:
        env = {k: v for k, v in os.environ.items() if k not in drop_env}
        return subprocess.run(argv, cwd=dest, env=env, capture_output=True, text=True, check=False)


def python_on(root: Path, argv: list[str]) -> int:
    """Run ``python ARGV`` (this interpreter) with ``root``'s packages first on ``PYTHONPATH``
    (a mirror of their installed layout), e.g. a bench script on an older checkout; its exit
    status. Output is not captured."""
    with mirrored(root, "rankgym-checkout-") as tree:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        return subprocess.run([sys.executable, *argv], env=env, check=False).returncode


def relay(proc: subprocess.CompletedProcess[str]) -> int:
    """Write a finished run's captured output to this process's stdout/stderr; its status."""
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


def run(root: Path, extra: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` on ``root``'s mirror; its output is captured."""
    argv = [lint_imports_exe(), str(root / "pyproject.toml"), "--no-cache", "--no-logo", *extra]
    return run_in_mirror(root, argv, prefix="rankgym-layers-")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=ROOT, help="source tree (default: this one)")
    args, extra = p.parse_known_args(argv)
    return relay(run(args.root.resolve(), extra))


if __name__ == "__main__":
    raise SystemExit(main())
