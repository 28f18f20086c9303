"""Registry: built-ins via gymnasium.make + check_env, plugins, broken plugins, `rankgym envs`."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import rankgym.envs
from rankgym.cli import main
from rankgym.envs.registry import BUILTINS, UnknownEnvError, list_envs


def _importable(entry_point: str) -> bool:
    try:
        return importlib.util.find_spec(entry_point.split(":")[0]) is not None
    except ImportError:
        return False


@pytest.mark.parametrize("env_id", sorted(BUILTINS))
def test_check_env_passes_for_every_builtin(env_id):
    if not _importable(BUILTINS[env_id]["entry_point"]):
        pytest.skip(f"{BUILTINS[env_id]['entry_point']} is not written/importable yet")
    env = gymnasium.make(env_id)
    assert env.spec.nondeterministic is BUILTINS[env_id]["nondeterministic"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even a warning from the checker
        check_env(env.unwrapped)
    env.close()


def test_builtins_listed_and_make_helper():
    infos = {e.id: e for e in list_envs()}
    assert (
        infos["rankgym/ToolUse-v0"].source == "builtin"
        and infos["rankgym/ToolUse-v0"].error is None
    )
    assert "rankgym/EmailSearch-v0" in infos
    env = rankgym.envs.make("rankgym/ToolUse-v0", difficulty="easy")
    assert isinstance(env, rankgym.envs.Env) and env.tasks("train")
    with pytest.raises(UnknownEnvError, match="rankgym/ToolUse-v0"):
        rankgym.envs.make("rankgym/Nope-v0")


def test_envs_command_prints_one_env_per_line_id_first(capsys):
    assert main(["envs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["rankgym/ToolUse-v0", "builtin"]
    assert all(len(line.split()) >= 2 for line in lines)
    assert main(["envs", "--json", "--check"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    tooluse = next(e for e in summary["envs"] if e["id"] == "rankgym/ToolUse-v0")
    assert tooluse["error"] is None and summary["count"] >= 2


def _run(code_or_args: list[str], path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(path))
    return subprocess.run(
        [sys.executable, *code_or_args], capture_output=True, text=True, env=env, timeout=60
    )


def _dist(root: Path, name: str, entry_points: str) -> None:
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[rankgym.envs]\n{entry_points}\n")


def test_broken_plugins_are_reported_and_the_rest_load(tmp_path):
    (tmp_path / "good_plugin.py").write_text(
        textwrap.dedent(
            """
            import gymnasium
            NOT_CALLABLE = 3
            def register_envs():
                gymnasium.register(id="goodplug/Easy-v0", entry_point="rankgym.envs.tooluse:ToolUseEnv",
                                   kwargs={"difficulty": "easy"})
            """
        )
    )
    (tmp_path / "raising_plugin.py").write_text(
        "def register_envs():\n    raise RuntimeError('boom in plugin')\n"
    )
    _dist(tmp_path, "good-plugin", "good = good_plugin:register_envs")
    _dist(tmp_path, "raising-plugin", "raising = raising_plugin:register_envs")
    _dist(tmp_path, "missing-plugin", "missing = no_such_module_xyz:register_envs")
    _dist(tmp_path, "odd-plugin", "odd = good_plugin:NOT_CALLABLE")

    out = _run(["-m", "rankgym.cli", "envs", "--json"], tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)["envs"]}
    assert (
        rows["goodplug/Easy-v0"]["source"] == "plugin:good-plugin"
        and rows["goodplug/Easy-v0"]["error"] is None
    )
    assert rows["raising"]["error"] == "RuntimeError: boom in plugin"
    assert rows["raising"]["source"] == "plugin:raising-plugin"
    assert "ModuleNotFoundError" in rows["missing"]["error"]
    assert "not callable" in rows["odd"]["error"]
    assert rows["rankgym/ToolUse-v0"]["source"] == "builtin"
    assert "raising" in out.stderr and "boom in plugin" in out.stderr  # logged warning

    code = (
        "import sys, gymnasium, rankgym.envs; "
        "e = gymnasium.make('goodplug/Easy-v0').unwrapped; "
        "assert {t.difficulty for t in e.tasks('train')} == {'easy'}; "
        "assert not {'torch', 'transformers', 'litellm'} & set(sys.modules), sys.modules.keys(); "
        "print('ok')"
    )
    out = _run(["-c", code], tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
