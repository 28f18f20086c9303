"""`rankgym new-env` scaffolds a package that installs, registers, passes check_env and its test.

The install goes into a throwaway venv whose site-packages chain to this interpreter's (a .pth
file calling ``site.addsitedir``), so the project's own environment is never modified.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from rankgym.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "example_env_package"


def test_new_env_rejects_bad_names_and_existing_folders(tmp_path, capsys):
    assert main(["new-env", "9lives", "--dir", str(tmp_path)]) == 2
    assert main(["new-env", "class", "--dir", str(tmp_path)]) == 2
    assert main(["new-env", "ok-env", "--dir", str(tmp_path), "--id", "bad id!"]) == 2
    for bad, why in (
        ("x/NoVersion", "namespace/Name-vN"),
        ("Plain-v0", "namespace/Name-vN"),
        ("rankgym/ToolUse-v0", "reserved for built-ins"),
        ("rankgym/Mine-v0", "reserved for built-ins"),
        ("CartPole-v1", "namespace/Name-vN"),
    ):
        capsys.readouterr()
        assert main(["new-env", "ok-env", "--dir", str(tmp_path), "--id", bad]) == 2, bad
        err = capsys.readouterr().err
        assert why in err and "--id" in err and len(err.strip().splitlines()) == 1, err
    assert main(["new-env", "ok-env", "--dir", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert out["env_id"] == "ok_env/OkEnv-v0" and out["package"] == "rankgym-ok-env"
    assert set(out["files"]) == {
        "pyproject.toml",
        "README.md",
        "ok_env/__init__.py",
        "ok_env/env.py",
        "tests/test_ok_env.py",
    }
    assert main(["new-env", "ok-env", "--dir", str(tmp_path)]) == 2  # not empty
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["new-env", "ok-env", "--dir", str(tmp_path), "--force", "-q"]) == 0
    env_py = (tmp_path / "ok-env" / "ok_env" / "env.py").read_text()
    assert len(env_py.splitlines()) < 80 and "class OkEnv(Env):" in env_py


def _venv_python(root: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=60
    )
    py = root / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    parent = sysconfig.get_paths()["purelib"]
    Path(purelib, "_rankgym_parent.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    return py


@pytest.mark.skipif(importlib.util.find_spec("pip") is None, reason="pip is not installed")
def test_new_env_package_installs_registers_and_passes(tmp_path):
    assert main(["new-env", "myenv", "--dir", str(tmp_path), "-q"]) == 0
    sample = tmp_path / "sample"
    shutil.copytree(
        SAMPLE, sample, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__")
    )
    py = _venv_python(tmp_path / "venv")

    def run(*args: str) -> subprocess.CompletedProcess:
        out = subprocess.run(
            [str(py), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out

    run(
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        str(tmp_path / "myenv"),
        str(sample),
    )
    run(
        "-c",
        "import gymnasium, rankgym.envs\n"
        "from gymnasium.utils.env_checker import check_env\n"
        "for i in ('myenv/Myenv-v0', 'example/Reverse-v0'):\n"
        "    check_env(gymnasium.make(i).unwrapped)\n",
    )
    listed = {
        r["id"]: r for r in json.loads(run("-m", "rankgym.cli", "envs", "--json").stdout)["envs"]
    }
    assert listed["myenv/Myenv-v0"]["source"] == "plugin:rankgym-myenv"
    assert listed["example/Reverse-v0"]["source"] == "plugin:rankgym-reverse"
    assert listed["myenv/Myenv-v0"]["error"] is None
    text = run("-m", "rankgym.cli", "envs").stdout
    assert any(
        line.split()[:2] == ["myenv/Myenv-v0", "plugin:rankgym-myenv"] for line in text.splitlines()
    )
    # the generated test and the sample's test pass against the installed packages
    tests = run(
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(tmp_path / "myenv" / "tests"),
        str(sample / "tests"),
    )
    assert "passed" in tests.stdout and "failed" not in tests.stdout
