"""Helpers of the tests of tools/ (import layers, type checker, module sizes): load a tool
script by path and copy the parts of the tree it reads, so a test can break the copy."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

from script_loader import load_script

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("rankgym", "envs", "judges", "trainer", "dashboard", "integrations")


def load_tool(name: str) -> ModuleType:
    """``tools/NAME.py`` as a module (tools/ is not a package)."""
    return load_script(f"tools/{name}.py")


def copy_tree(dest: Path, extra: tuple[str, ...] = ()) -> Path:
    """The Python files of the packages (and of the ``extra`` folders) plus pyproject.toml."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {
            n
            for n in names
            if n == "__pycache__" or (not n.endswith(".py") and not (Path(folder) / n).is_dir())
        }

    for d in (*PACKAGE_DIRS, *extra):
        shutil.copytree(ROOT / d, dest / d, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest
