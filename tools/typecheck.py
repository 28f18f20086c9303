"""Run mypy on rankgym's real modules, as they are installed, with pyproject.toml's ``[tool.mypy]``.

The source tree does not look like the installed package: ``rankgym.envs`` lives in ``envs/``,
``rankgym.judges`` in ``judges/`` and so on (``[tool.setuptools.package-dir]``). mypy maps a
file to a module name by its folders, so run in the source tree it would check ``rankgym/`` and
find none of the subpackages (and the editable install's import hook is invisible to it). This
script lays out the installed package as symlinks in a temporary folder (the same mirror as
``tools/lint_imports.py``), runs ``mypy -p rankgym`` there with ``<root>/pyproject.toml`` as the
config, and returns mypy's exit status. Reports name the mirror's paths (``rankgym/envs/base.py``
is ``envs/base.py``).

Usage::

    python tools/typecheck.py              # the tree this script sits in (make typecheck)
    python tools/typecheck.py --root DIR   # another copy of the tree (the test uses this)
    python tools/typecheck.py -m rankgym.errors   # only these modules (and what they import)

mypy's incremental cache goes to ``<root>/.mypy_cache`` (git-ignored): a second run on an
unchanged tree takes a few seconds instead of about a minute.

What it does not do: it never writes into the source tree outside ``.mypy_cache``, and it does
not install stubs; third-party packages without types are listed in pyproject.toml's
``[[tool.mypy.overrides]]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _lint_imports() -> ModuleType:
    """tools/lint_imports.py, for ``run_in_mirror`` (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "rankgym_lint_imports", Path(__file__).with_name("lint_imports.py")
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(
    root: Path, modules: list[str] | None = None, extra: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run mypy on ``root``'s mirror (``-p rankgym``, or ``-m`` each of ``modules``); its
    output is captured. Raises ``SystemExit`` naming the fix when mypy is not installed."""
    if importlib.util.find_spec("mypy") is None:
        raise SystemExit("mypy not found: install the dev extra (pip install -e '.[dev]')")
    targets = ["-p", "rankgym"] if not modules else [a for m in modules for a in ("-m", m)]
    if modules:  # the overrides for modules outside this selection are not "unused"
        targets.append("--no-warn-unused-configs")
    argv = [sys.executable, "-m", "mypy", "--config-file", str(root / "pyproject.toml"),
            "--cache-dir", str(root / ".mypy_cache"), *targets, *(extra or [])]  # fmt: skip
    return _lint_imports().run_in_mirror(
        root, argv, prefix="rankgym-typecheck-", drop_env=("PYTHONPATH", "MYPYPATH")
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--root", type=Path, default=ROOT, help="source tree (default: this one)")
    p.add_argument("-m", "--module", action="append", dest="modules", help="check only this module")
    args, extra = p.parse_known_args(argv)
    return int(_lint_imports().relay(run(args.root.resolve(), args.modules, extra)))


if __name__ == "__main__":
    raise SystemExit(main())
