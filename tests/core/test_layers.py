"""The import layers of pyproject.toml's ``[tool.importlinter]`` hold on the real tree, and a
deliberately wrong arrow in a copy of the tree breaks them (``tools/lint_imports.py``)."""

from __future__ import annotations

import importlib.util
import tomllib

import pytest
from tool_helpers import ROOT, copy_tree, load_tool

_needs_linter = pytest.mark.skipif(
    importlib.util.find_spec("importlinter") is None,
    reason="lint-imports is not installed (pip install -e '.[dev]' brings import-linter)",
)


def _flat(text: str) -> str:
    return " ".join(text.split())  # lint-imports wraps long lines


@_needs_linter
def test_the_real_tree_keeps_every_layer_contract() -> None:
    proc = load_tool("lint_imports").run(ROOT, [])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout and "Layers:" in proc.stdout


def test_the_mirror_shows_envs_judges_and_trainer_where_they_are_installed(tmp_path) -> None:
    dest = load_tool("lint_imports").mirror(ROOT, tmp_path)
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
        (  # the spec's adapter hash is core (rankgym.judge_adapter), not the local provider
            "rankgym/types.py",
            "import rankgym.judges.local_provider",
            "rankgym.types -> rankgym.judges.local_provider",
        ),
        (  # the judges' metrics stay light: the dashboard imports them
            "judges/metrics.py",
            "import litellm",
            "rankgym.judges.metrics -> litellm",
        ),
        (  # library code never imports a CLI command module
            "judges/group_judge.py",
            "import rankgym.judges.commands",
            "rankgym.judges.group_judge -> rankgym.judges.commands",
        ),
    ],
)
def test_a_deliberately_wrong_import_breaks_a_contract(
    tmp_path, path: str, wrong_import: str, reported: str
) -> None:
    root = copy_tree(tmp_path / "tree")
    target = root / path
    target.write_text(target.read_text() + f"\n{wrong_import}  # against the layers\n")
    proc = load_tool("lint_imports").run(root, [])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert reported in _flat(proc.stdout)


@_needs_linter
def test_the_untouched_copy_passes_so_the_failures_above_come_from_the_wrong_import(
    tmp_path,
) -> None:
    proc = load_tool("lint_imports").run(copy_tree(tmp_path / "tree"), [])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_layer_contract_ignores_no_import() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in contracts["contracts"] if c["id"] == "layers")
    assert not layers.get("ignore_imports"), layers.get("ignore_imports")


def test_no_library_module_is_over_500_lines() -> None:
    sizes = load_tool("module_size")
    assert len(sizes.library_files(ROOT)) > 100  # every package of the package-dir table
    assert sizes.too_long(ROOT) == []


def test_the_size_check_names_a_module_over_the_limit_and_fails(tmp_path, capsys) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\n"pkg" = "pkg"\n"pkg.sub" = "sub"\n'
    )
    for folder, lines in (("pkg", 12), ("sub", 501)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mod.py").write_text("x = 1\n" * lines)
    sizes = load_tool("module_size")
    assert sizes.too_long(tmp_path) == [("sub/mod.py", 501)]
    assert sizes.main(["--root", str(tmp_path)]) == 1
    assert "sub/mod.py: 501 lines (over 500)" in capsys.readouterr().err
    assert sizes.main(["--root", str(tmp_path), "--max", "501"]) == 0


def test_names_moved_into_core_stay_importable_from_their_old_homes() -> None:
    import rankgym.judges.router as old_router
    from rankgym import judge_adapter, router, step_metrics, types
    from rankgym.envs.toolcalls import assistant_call
    from rankgym.judges import local_provider
    from rankgym.trainer.rewards import StepMetrics

    assert old_router is router  # one module: install/uninstall share the process-wide router
    assert assistant_call is types.assistant_call
    assert StepMetrics is step_metrics.StepMetrics
    assert local_provider.adapter_fingerprint is judge_adapter.adapter_fingerprint
    assert local_provider.DEFAULT_JUDGE_DIR == judge_adapter.DEFAULT_JUDGE_DIR
