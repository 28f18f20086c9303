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


def test_a_plain_gymnasium_env_is_refused_in_one_line_not_a_traceback(tmp_path, capsys):
    with pytest.raises(UnknownEnvError, match="not a rankgym env"):
        rankgym.envs.make("CartPole-v1")
    store = tmp_path / "s.db"
    rc = main(["rollout", "--env", "CartPole-v1", "--tasks", "1", "--store", str(store)])
    err = capsys.readouterr().err
    assert rc == 2 and "CartPole-v1" in err and "Traceback" not in err
    assert "rankgym/ToolUse-v0" in err


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


def _tooluse_plugin(root: Path, name: str, env_id: str) -> None:
    """An installed plugin ``{name}-plugin`` that registers ``env_id`` as the ToolUse env."""
    (root / f"{name}_plugin.py").write_text(
        "import gymnasium\n"
        "def register_envs():\n"
        f"    gymnasium.register(id={env_id!r}, entry_point='rankgym.envs.tooluse:ToolUseEnv')\n"
    )
    _dist(root, f"{name}-plugin", f"{name} = {name}_plugin:register_envs")


def _python_ok(path: Path, *lines: str) -> None:
    """Run ``lines`` in a fresh interpreter with ``path`` on PYTHONPATH; it must print ok."""
    out = _run(["-c", "\n".join([*lines, "print('ok')"])], path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


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

    _python_ok(
        tmp_path,
        "import sys, gymnasium, rankgym.envs",
        "e = gymnasium.make('goodplug/Easy-v0').unwrapped",
        "assert {t.difficulty for t in e.tasks('train')} == {'easy'}",
        "assert not {'torch', 'transformers', 'litellm'} & set(sys.modules), sys.modules.keys()",
    )


# ---- plugins may only add ids (issue 16) ----------------------------------------------------

HIJACK = """
import gymnasium
from rankgym.envs import Env, Task

class Hijack(Env):
    def tasks(self, split="train"):
        return [Task(id="hijacked", prompt="I am not the built-in.")]

def register_envs():
    gymnasium.register(id="rankgym/ToolUse-v0", entry_point=Hijack)      # a built-in
    gymnasium.register(id="aaplug/Mine-v0", entry_point=Hijack)          # taken by plugin 'aa'
    gymnasium.register(id="rankgym/Extra-v0", entry_point=Hijack)        # reserved namespace
    gymnasium.register(id="NoNamespace-v0", entry_point=Hijack)          # bad form
    gymnasium.register(id="zzplug/Fine-v0", entry_point=Hijack)          # the one it may add
"""


def test_a_plugin_cannot_replace_a_builtin_or_another_plugins_id(tmp_path):
    _tooluse_plugin(tmp_path, "aa", "aaplug/Mine-v0")
    (tmp_path / "zz_plugin.py").write_text(HIJACK)
    _dist(tmp_path, "zz-plugin", "zz = zz_plugin:register_envs")
    out = _run(["-m", "rankgym.cli", "envs", "--json"], tmp_path)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["envs"]
    by = {(r["id"], r["source"]): r for r in rows}
    assert by[("rankgym/ToolUse-v0", "builtin")]["error"] is None
    refused = by[("rankgym/ToolUse-v0", "plugin:zz-plugin")]["error"]
    assert "refused" in refused and "rankgym (built-in)" in refused
    assert "plugin:aa-plugin" in by[("aaplug/Mine-v0", "plugin:zz-plugin")]["error"]
    assert by[("aaplug/Mine-v0", "plugin:aa-plugin")]["error"] is None
    assert "reserved" in by[("rankgym/Extra-v0", "plugin:zz-plugin")]["error"]
    assert "namespace/Name-vN" in by[("NoNamespace-v0", "plugin:zz-plugin")]["error"]
    assert by[("zzplug/Fine-v0", "plugin:zz-plugin")]["error"] is None
    # and the built-in is what gymnasium.make builds
    _python_ok(
        tmp_path,
        "import gymnasium, rankgym.envs",
        "e = gymnasium.make('rankgym/ToolUse-v0').unwrapped",
        "assert type(e).__name__ == 'ToolUseEnv', type(e)",
        "assert 'rankgym/Extra-v0' not in gymnasium.registry",
        "assert 'NoNamespace-v0' not in gymnasium.registry",
        "assert type(gymnasium.make('aaplug/Mine-v0').unwrapped).__name__ == 'ToolUseEnv'",
    )


CHECKED = """
import gymnasium
from rankgym.envs import Env, Task

def shout(text: str) -> str:
    return text.upper()

def untyped(text):
    '''Echo the text.'''
    return text

class Quiet(Env):
    tools = [shout]
    def tasks(self, split="train"):
        return [Task(id="t", prompt="Shout hi.")]

class Untyped(Env):
    tools = [untyped]
    def tasks(self, split="train"):
        return [Task(id="t", prompt="Echo hi.")]

def register_envs():
    gymnasium.register(id="chk/Quiet-v0", entry_point=Quiet)
    gymnasium.register(id="chk/Untyped-v0", entry_point=Untyped)
"""


def test_envs_check_fails_the_exit_code_and_warns_about_undocumented_tools(tmp_path):
    (tmp_path / "chk_plugin.py").write_text(CHECKED)
    _dist(tmp_path, "chk-plugin", "chk = chk_plugin:register_envs")
    out = _run(["-m", "rankgym.cli", "envs", "--check", "--json"], tmp_path)
    assert out.returncode == 2
    rows = {r["id"]: r for r in json.loads(out.stdout)["envs"]}
    assert rows["chk/Quiet-v0"]["error"] is None
    assert rows["chk/Quiet-v0"]["warnings"] == [
        "tool 'shout' has no docstring: the agent sees only its name and parameters"
    ]
    err = rows["chk/Untyped-v0"]["error"]
    assert "'untyped'" in err and "'text' has no type hint" in err
    assert "failed their check" in out.stderr  # (a built-in being edited may fail too)
    assert "Traceback" not in out.stderr
    out = _run(["-m", "rankgym.cli", "envs"], tmp_path)  # listing alone does not fail
    assert out.returncode == 0, out.stderr


def test_a_tool_without_type_hints_is_refused_when_the_env_is_made():
    from rankgym.envs import Env, Task

    def untyped(text):
        """Echo."""
        return text

    class Untyped(Env):
        tools = [untyped]

        def tasks(self, split: str = "train") -> list[Task]:
            return [Task(id="t")]

    with pytest.raises(TypeError, match=r"tool 'untyped' .*parameter 'text' has no type hint"):
        Untyped()


def test_a_forced_reload_keeps_a_plugins_own_ids(tmp_path):
    _tooluse_plugin(tmp_path, "again", "again/Env-v0")
    _python_ok(
        tmp_path,
        "from rankgym.envs.registry import load_plugins",
        "first = load_plugins()",
        "second = load_plugins(force=True)",
        "assert [(i.id, i.error) for i in second] == [('again/Env-v0', None)], second",
    )
