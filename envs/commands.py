"""CLI subcommands of rankgym.envs: ``rankgym envs`` and ``rankgym new-env``.

``rankgym rollout`` lives in ``rankgym.envs.rollout_command`` (it imports torch); this module
hands it out lazily as ``ROLLOUT`` (module ``__getattr__``) so the other commands stay light.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import string
from importlib import resources
from pathlib import Path
from typing import Any, cast

import gymnasium
from gymnasium.utils.env_checker import check_env

from rankgym.cli import Command
from rankgym.envs.base import Env
from rankgym.envs.registry import env_id_problem, list_envs, load_plugins
from rankgym.envs.tools import Tool, as_tool
from rankgym.errors import UserError
from rankgym.terminal import printable

__all__ = ["ENVS", "NEW_ENV", "scaffold_env_package"]


# ---- rankgym envs ---------------------------------------------------------------------------


def _envs_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--check",
        action="store_true",
        help="also make each env and run gymnasium's check_env on it (slower)",
    )


class EnvCheckFailed(UserError):
    """``rankgym envs --check`` found an env that is broken or fails ``check_env``."""


def _check(env_id: str) -> tuple[str | None, list[str]]:
    """Make the env and run Gymnasium's ``check_env``: (error or None, warnings)."""
    try:
        env = gymnasium.make(env_id)
        check_env(env.unwrapped)
        tools = _all_tools(cast(Env, env.unwrapped))  # every registered rankgym env is an Env
        env.close()
    except Exception as e:  # reported per env, the listing goes on
        return f"check_env failed: {type(e).__name__}: {e}", []
    warnings = [
        f"tool {t.name!r} has no docstring: the agent sees only its name and parameters"
        for t in tools
        if not t.documented
    ]
    return None, warnings


def _all_tools(env: Env, max_tasks: int = 2000) -> list[Tool]:
    """Every distinct tool the env offers over the tasks of its splits (first ``max_tasks``)."""
    offered: dict[int, Any] = {}  # by the identity of the underlying function
    for split in env.splits:
        for task in [None, *env.tasks(split)[:max_tasks]]:
            for fn in env.tools if task is None else env.tools_for(task):
                offered.setdefault(id(getattr(fn, "__func__", fn)), fn)
    tools: dict[str, Tool] = {}
    for fn in offered.values():
        t = as_tool(fn)
        tools.setdefault(t.name, t)
    return list(tools.values())


def _envs_run(args: argparse.Namespace) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for info in list_envs():
        warnings: list[str] = []
        error = info.error
        if error is None and args.check:
            error, warnings = _check(info.id)
        rows.append(
            {
                "id": info.id,
                "source": info.source,
                "error": error,
                "warnings": warnings,
                "entry_point": info.entry_point,
            }
        )
    errors = sum(r["error"] is not None for r in rows)
    summary = {"envs": rows, "count": len(rows), "errors": errors}
    if not args.json:
        width = max((len(r["id"]) for r in rows), default=0)
        for r in rows:
            status = f"  error: {r['error']}" if r["error"] else ("  ok" if args.check else "")
            print(printable(f"{r['id']:<{width}}  {r['source']}{status}"))
            for w in r["warnings"]:
                print(printable(f"{'':<{width}}  warning: {w}"))
    if args.check and errors:
        if args.json:  # the summary still goes to stdout; the exit code says it failed
            print(json.dumps(summary, default=str), flush=True)
        raise EnvCheckFailed(f"{errors} of {len(rows)} envs failed their check (listed above)")
    return summary


ENVS = Command(
    name="envs",
    add_arguments=_envs_arguments,
    run=_envs_run,
)


# ---- rankgym new-env ------------------------------------------------------------------------

_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,49}")
_FILES = {  # template -> path inside the new project ({module} is filled in)
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "__init__.py.tmpl": "{module}/__init__.py",
    "env.py.tmpl": "{module}/env.py",
    "test_env.py.tmpl": "tests/test_{module}.py",
}


def scaffold_env_package(
    name: str, directory: Path, env_id: str | None = None, force: bool = False
) -> tuple[Path, dict[str, str]]:
    """Write a new env package ``directory/name``; returns its path and the template values.

    Raises ``UserError`` for a bad name or id, or a non-empty target without ``force``.
    """
    if not _NAME_RE.fullmatch(name):
        raise UserError(
            f"env name {name!r} must start with a letter and contain only letters, digits, "
            "'_' or '-' (50 characters at most), e.g. 'myenv'"
        )
    module = name.lower().replace("-", "_")
    if keyword.iskeyword(module) or module in {"rankgym", "gymnasium", "test", "tests"}:
        raise UserError(f"env name {name!r} would shadow a Python module; pick another name")
    camel = "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_]", name) if part)
    cls = camel if camel.endswith("Env") else f"{camel}Env"
    env_id = env_id or f"{module}/{camel}-v0"
    load_plugins()  # so that an id an installed plugin uses counts as taken
    problem = env_id_problem(env_id, plugin=True)
    if problem is not None:
        raise UserError(f"{problem} (--id)")
    values = {
        "name": name,
        "module": module,
        "dist": f"rankgym-{module.replace('_', '-')}",
        "cls": cls,
        "env_id": env_id,
    }
    target = Path(directory) / name
    if target.exists() and any(target.iterdir()) and not force:
        raise UserError(f"{target} exists and is not empty; pick another --dir or pass --force")
    templates = resources.files("rankgym") / "templates" / "new_env"
    for tmpl, rel in _FILES.items():
        text = string.Template((templates / tmpl).read_text(encoding="utf-8")).substitute(values)
        out = target / rel.format(module=module)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return target, values


def _new_env_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="env name, e.g. myenv (also the Python package name)")
    p.add_argument(
        "--dir",
        default=".",
        type=Path,
        help="directory in which to create the package folder NAME (default: .)",
    )
    p.add_argument("--id", default=None, help="Gymnasium id (default: NAME/Name-v0)")
    p.add_argument("--force", action="store_true", help="write into a non-empty NAME folder")


def _new_env_run(args: argparse.Namespace) -> dict[str, Any]:
    target, values = scaffold_env_package(args.name, args.dir, args.id, args.force)
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    if not args.json and not args.quiet:
        print(f"created {target} with env {values['env_id']}")
        print(f"next: pip install -e {target} && rankgym envs && pytest {target / 'tests'}")
    return {
        "path": str(target),
        "env_id": values["env_id"],
        "package": values["dist"],
        "files": files,
    }


NEW_ENV = Command(
    name="new-env",
    add_arguments=_new_env_arguments,
    run=_new_env_run,
)


# ---- rankgym rollout (written in rankgym.envs.rollout_command) -------------------------------


def __getattr__(name: str) -> Any:
    """``ROLLOUT`` is imported on first access only, so `rankgym envs` does not import torch."""
    if name == "ROLLOUT":
        try:
            from rankgym.envs.rollout_command import ROLLOUT
        except ModuleNotFoundError as e:  # only a missing rollout_command is tolerated
            if e.name != "rankgym.envs.rollout_command":
                raise
            raise AttributeError(name) from None
        return ROLLOUT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
