"""mypy (pyproject.toml's ``[tool.mypy]``, run by ``tools/typecheck.py`` and ``make typecheck``)
is strict enough to mean something, catches deliberate type errors in a copy of the tree, and
is clean on the real tree."""

from __future__ import annotations

import importlib.util
import shutil
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("rankgym", "envs", "judges", "trainer", "dashboard", "integrations")

_needs_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (pip install -e '.[dev]' brings it)",
)


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / "tools/typecheck.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _copy_tree(dest: Path) -> Path:
    """The Python files of the packages, pyproject.toml and tools/ (what the check reads)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {
            n
            for n in names
            if n == "__pycache__" or (not n.endswith(".py") and not (Path(folder) / n).is_dir())
        }

    for d in (*PACKAGE_DIRS, "tools"):
        shutil.copytree(ROOT / d, dest / d, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_config_checks_bodies_annotations_and_stale_ignores() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    for flag in (
        "check_untyped_defs",
        "disallow_untyped_defs",
        "disallow_incomplete_defs",
        "no_implicit_optional",
        "warn_unused_ignores",
        "warn_redundant_casts",
        "strict_equality",
    ):
        assert cfg.get(flag) is True, flag
    assert "ignore_missing_imports" not in cfg  # only per module, for packages without types
    assert "pydantic.mypy" in cfg.get("plugins", [])


@_needs_mypy
def test_a_bad_call_an_untyped_def_and_a_stale_ignore_in_a_copy_of_the_tree_fail(
    tmp_path: Path,
) -> None:
    root = _copy_tree(tmp_path / "tree")
    bad = root / "rankgym/terminal.py"
    bad.write_text(
        bad.read_text(encoding="utf-8")
        + '\n\ndef _broken() -> int:\n    return printable("x", one_line="no")\n'
        + "\n\ndef _untyped(x):\n    return x\n"
        + "\n\n_fine: int = 1  # type: ignore[assignment]\n",
        encoding="utf-8",
    )
    proc = _script().run(root, ["rankgym.terminal"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "rankgym/terminal.py" in out
    assert "[arg-type]" in out and "[return-value]" in out  # a str for a bool; str, not int
    assert "[no-untyped-def]" in out
    assert "[unused-ignore]" in out


@_needs_mypy
def test_the_mirror_checks_the_subpackages_where_they_are_installed(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path / "tree")
    bad = root / "envs/base.py"
    bad.write_text(
        bad.read_text(encoding="utf-8") + '\n\n_n: int = MAX_CALLS_PER_TURN + "1"\n',
        encoding="utf-8",
    )
    proc = _script().run(root, ["rankgym.envs.base"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "rankgym/envs/base.py" in out and "[operator]" in out


@_needs_mypy
@pytest.mark.slow
def test_the_real_tree_is_clean() -> None:
    proc = _script().run(ROOT)  # warm after `make typecheck` (cache in .mypy_cache)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Success: no issues found" in out
