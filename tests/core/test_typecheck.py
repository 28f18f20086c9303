"""mypy (pyproject.toml's ``[tool.mypy]``, run by ``tools/typecheck.py`` and ``make typecheck``)
is strict enough to mean something, catches deliberate type errors in a copy of the tree, and
is clean on the real tree."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest
from tool_helpers import ROOT, copy_tree, load_tool

_needs_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not installed (pip install -e '.[dev]' brings it)",
)


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


def test_every_core_module_gets_the_stricter_core_settings() -> None:
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "mypy"
    ]["overrides"]
    strict = next(o for o in overrides if o.get("disallow_any_generics"))
    assert strict.get("warn_return_any") is True
    core = {"rankgym"} | {
        f"rankgym.{p.stem}" for p in (ROOT / "rankgym").glob("*.py") if p.stem != "__init__"
    }
    assert core | {"rankgym.store.*"} == set(strict["module"])


@_needs_mypy
def test_a_bad_call_an_untyped_def_and_a_stale_ignore_in_a_copy_of_the_tree_fail(
    tmp_path: Path,
) -> None:
    root = copy_tree(tmp_path / "tree", extra=("tools",))
    bad = root / "rankgym/terminal.py"
    bad.write_text(
        bad.read_text(encoding="utf-8")
        + '\n\ndef _broken() -> int:\n    return printable("x", one_line="no")\n'
        + "\n\ndef _untyped(x):\n    return x\n"
        + "\n\n_fine: int = 1  # type: ignore[assignment]\n",
        encoding="utf-8",
    )
    proc = load_tool("typecheck").run(root, ["rankgym.terminal"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "rankgym/terminal.py" in out
    assert "[arg-type]" in out and "[return-value]" in out  # a str for a bool; str, not int
    assert "[no-untyped-def]" in out
    assert "[unused-ignore]" in out


@_needs_mypy
def test_the_mirror_checks_the_subpackages_where_they_are_installed(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "tree", extra=("tools",))
    bad = root / "envs/base.py"
    bad.write_text(
        bad.read_text(encoding="utf-8") + '\n\n_n: int = MAX_CALLS_PER_TURN + "1"\n',
        encoding="utf-8",
    )
    proc = load_tool("typecheck").run(root, ["rankgym.envs.base"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "rankgym/envs/base.py" in out and "[operator]" in out


@_needs_mypy
@pytest.mark.slow
def test_the_real_tree_is_clean() -> None:
    proc = load_tool("typecheck").run(ROOT)  # warm after `make typecheck` (cache in .mypy_cache)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Success: no issues found" in out
