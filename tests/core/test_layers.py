"""The import layers of pyproject.toml's ``[tool.importlinter]`` hold on the real tree, and a
deliberately wrong arrow in a copy of the tree breaks them (``tools/lint_imports.py``)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("rankgym", "envs", "judges", "trainer", "dashboard", "integrations")

_needs_linter = pytest.mark.skipif(
    importlib.util.find_spec("importlinter") is None,
    reason="lint-imports is not installed (pip install -e '.[dev]' brings import-linter)",
)


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lint_imports", ROOT / "tools/lint_imports.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _copy_tree(dest: Path) -> Path:
    """The Python files of the packages plus pyproject.toml (what lint-imports reads)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {
            n
            for n in names
            if n == "__pycache__" or (not n.endswith(".py") and not (Path(folder) / n).is_dir())
        }

    for d in PACKAGE_DIRS:
        shutil.copytree(ROOT / d, dest / d, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def _flat(text: str) -> str:
    return " ".join(text.split())  # lint-imports wraps long lines


@_needs_linter
def test_the_real_tree_keeps_every_layer_contract() -> None:
    proc = _script().run(ROOT, [])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout and "Layers:" in proc.stdout


def test_the_mirror_shows_envs_judges_and_trainer_where_they_are_installed(tmp_path) -> None:
    dest = _script().mirror(ROOT, tmp_path)
    assert (dest / "rankgym/envs/base.py").resolve() == ROOT / "envs/base.py"
    assert (dest / "rankgym/judges/group_judge.py").resolve() == ROOT / "judges/group_judge.py"
    assert (dest / "rankgym/trainer/loop.py").resolve() == ROOT / "trainer/loop.py"
    assert (dest / "rankgym/store/__init__.py").resolve() == ROOT / "rankgym/store/__init__.py"


@_needs_linter
@pytest.mark.parametrize(
    ("path", "wrong_import", "reported"),
    [
        ("envs/registry.py", "import rankgym.trainer", "rankgym.envs.registry -> rankgym.trainer"),
        (
            "judges/group_judge.py",
            "import rankgym.envs.rollout",
            "rankgym.judges.group_judge -> rankgym.envs.rollout",
        ),
        ("rankgym/errors.py", "import rankgym.judges", "rankgym.errors -> rankgym.judges"),
        ("rankgym/terminal.py", "import torch", "rankgym.terminal -> torch"),  # via rankgym.cli
        (
            "dashboard/data.py",
            "import rankgym.judges.calling",
            "rankgym.dashboard.data -> rankgym.judges.calling",
        ),
    ],
)
def test_a_deliberately_wrong_import_breaks_a_contract(
    tmp_path, path: str, wrong_import: str, reported: str
) -> None:
    root = _copy_tree(tmp_path / "tree")
    target = root / path
    target.write_text(target.read_text() + f"\n{wrong_import}  # against the layers\n")
    proc = _script().run(root, [])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert reported in _flat(proc.stdout)


@_needs_linter
def test_the_untouched_copy_passes_so_the_failures_above_come_from_the_wrong_import(
    tmp_path,
) -> None:
    proc = _script().run(_copy_tree(tmp_path / "tree"), [])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_names_moved_into_core_stay_importable_from_their_old_homes() -> None:
    import rankgym.judges.router as old_router
    from rankgym import router, step_metrics, types
    from rankgym.envs.toolcalls import assistant_call
    from rankgym.trainer.rewards import StepMetrics

    assert old_router is router  # one module: install/uninstall share the process-wide router
    assert assistant_call is types.assistant_call
    assert StepMetrics is step_metrics.StepMetrics
