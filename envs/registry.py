"""Registration of built-in envs and third-party env plugins with Gymnasium.

Built-ins are registered with ``gymnasium.register`` by entry-point *string*, so their modules
are imported only by ``gymnasium.make`` (a built-in whose module is missing or broken fails at
``make`` time and is listed with its error, it does not break ``import rankgym.envs``).

Plugins: Gymnasium >= 1.0 no longer reads the ``gymnasium.envs`` entry-point group, so
third-party packages declare ``[project.entry-points."rankgym.envs"] NAME = "pkg.module:register_envs"``;
``register_envs()`` takes no arguments and calls ``gymnasium.register`` for its ids.
``load_plugins`` runs every one once per process (``import rankgym.envs`` calls it); a plugin
that fails to import or register is logged as a warning and listed with its error, the others
still load. The ids a plugin registered are found by diffing the Gymnasium registry.

A plugin may only *add* ids, each of the form ``namespace/Name-vN`` and outside the
``rankgym`` namespace (reserved for built-ins). An id that was already registered (a built-in,
another plugin's, or a Gymnasium env), an id of another form, or one in the reserved namespace
is refused: the registry entry that was there before is put back, and the id is listed with
the reason as its error (``rankgym envs``). The first plugin to register an id keeps it
(plugins load in entry-point name order).

What this module does not do: it does not instantiate envs (``list_envs`` only checks that a
built-in's module can be found), and it cannot unload a plugin.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import gymnasium

from rankgym.envs.base import Env
from rankgym.errors import RankgymError

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "ENV_ID_RE",
    "EnvInfo",
    "UnknownEnvError",
    "env_id_problem",
    "list_envs",
    "load_plugins",
    "make",
    "register_builtins",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "rankgym.envs"
RESERVED_NAMESPACE = "rankgym"

ENV_ID_RE = re.compile(
    r"(?P<ns>[A-Za-z][A-Za-z0-9_.-]*)/(?P<name>[A-Za-z][A-Za-z0-9_.-]*?)-v(?P<v>\d+)"
)
"""A rankgym env id: ``namespace/Name-vN`` (e.g. ``myenv/Reverse-v0``)."""

BUILTINS: dict[str, dict[str, Any]] = {
    "rankgym/ToolUse-v0": {
        "entry_point": "rankgym.envs.tooluse:ToolUseEnv",
        "nondeterministic": False,
    },
    "rankgym/EmailSearch-v0": {
        "entry_point": "rankgym.envs.email.env:EmailSearchEnv",
        "nondeterministic": True,
    },
    "rankgym/CodeTests-v0": {
        "entry_point": "rankgym.envs.code.env:CodeTestsEnv",
        "nondeterministic": True,
    },
}


@dataclass(frozen=True)
class EnvInfo:
    """One line of ``rankgym envs``: an env id, where it comes from, and its error if broken.

    ``source`` is ``"builtin"`` or ``"plugin:<distribution>"``. For a plugin that failed to
    load, ``id`` is the entry-point name (its env ids are unknown) and ``error`` is set.
    """

    id: str
    source: str
    error: str | None = None
    entry_point: str | None = None


class UnknownEnvError(RankgymError, ValueError):
    """``make`` was given an id that is not registered."""


_plugins_loaded = False
_plugin_envs: list[EnvInfo] = []


def register_builtins() -> None:
    """Register the built-in envs with Gymnasium (idempotent)."""
    for env_id, spec in BUILTINS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, **spec)


def env_id_problem(env_id: str, *, plugin: bool = True) -> str | None:
    """Why ``env_id`` cannot be a new rankgym env id, or None if it can.

    Checks the form (``namespace/Name-vN``), the reserved ``rankgym`` namespace (when
    ``plugin``), and that no env of that id is registered yet (built-ins and loaded plugins).
    """
    problem = _form_problem(env_id, plugin)
    if problem is None and (env_id in BUILTINS or env_id in gymnasium.registry):
        return f"env id {env_id!r} is already registered; a new env needs an id of its own"
    return problem


def _form_problem(env_id: str, plugin: bool) -> str | None:
    m = ENV_ID_RE.fullmatch(env_id) if isinstance(env_id, str) else None
    if m is None:
        return f"env id {env_id!r} must look like 'namespace/Name-vN', e.g. 'myenv/MyEnv-v0'"
    if plugin and m["ns"].lower() == RESERVED_NAMESPACE:
        return f"env id {env_id!r} is in the 'rankgym/' namespace, which is reserved for built-ins"
    return None


def load_plugins(force: bool = False) -> list[EnvInfo]:
    """Run every ``rankgym.envs`` entry point once; returns what each registered or its error.

    Ids a plugin may not register (see the module docstring) are undone and listed with the
    reason as their error.
    """
    global _plugins_loaded
    if _plugins_loaded and not force:
        return list(_plugin_envs)
    _plugins_loaded = True
    for info in _plugin_envs:  # a forced reload starts from the built-ins alone
        if info.error is None:
            gymnasium.registry.pop(info.id, None)
    _plugin_envs.clear()
    register_builtins()
    for ep in _entry_points():
        source = f"plugin:{_dist_name(ep)}"
        before = dict(gymnasium.registry)
        try:
            fn = ep.load()
            if not callable(fn):
                raise TypeError(f"{ep.value} is not callable (expected register_envs())")
            fn()
        except Exception as e:  # a broken plugin must not break the others
            err = f"{type(e).__name__}: {e}"
            log.warning("rankgym env plugin %r (%s) failed to load: %s", ep.name, source, err)
            _plugin_envs.append(EnvInfo(ep.name, source, err, ep.value))
            _restore(before)
            continue
        _plugin_envs.extend(_accept(before, source))
        if not any(i.source == source and i.error is None for i in _plugin_envs):
            log.warning("rankgym env plugin %r (%s) registered no new env", ep.name, source)
    return list(_plugin_envs)


def _accept(before: dict[str, Any], source: str) -> list[EnvInfo]:
    """What one plugin changed in the registry: new ids kept, anything else undone."""
    out: list[EnvInfo] = []
    after = dict(gymnasium.registry)
    for env_id in sorted(set(before) | set(after)):
        old, new = before.get(env_id), after.get(env_id)
        if old is new:
            continue
        if old is not None:
            owner = _owner(env_id)
            error: str | None = (
                f"refused: {env_id!r} is already registered by {owner}; a plugin cannot replace "
                "another env's id, register it under a namespace of your own"
            )
        else:
            problem = _form_problem(env_id, plugin=True)
            error = None if problem is None else f"refused: {problem}"
        if error is None:
            out.append(EnvInfo(env_id, source, None, _entry_point_str(env_id)))
            continue
        log.warning("rankgym env plugin (%s): %s", source, error)
        entry = _entry_point_str(env_id) if new is not None else None
        out.append(EnvInfo(env_id, source, error, entry))
    _restore(before)
    for info in out:
        if info.error is None:
            gymnasium.registry[info.id] = after[info.id]
    return out


def _restore(before: dict[str, Any]) -> None:
    """Put the registry back exactly as it was (a failed or refused plugin leaves no trace)."""
    gymnasium.registry.clear()
    gymnasium.registry.update(before)


def _owner(env_id: str) -> str:
    if env_id in BUILTINS:
        return "rankgym (built-in)"
    prior = next((i.source for i in _plugin_envs if i.id == env_id and i.error is None), None)
    return prior or "gymnasium"


def list_envs() -> list[EnvInfo]:
    """Built-ins first (with an error if their module cannot be found), then plugins."""
    register_builtins()
    out = []
    for env_id, spec in BUILTINS.items():
        module = spec["entry_point"].split(":")[0]
        out.append(EnvInfo(env_id, "builtin", _module_error(module), spec["entry_point"]))
    return out + load_plugins()


def make(env_id: str, **kwargs: Any) -> Env:
    """``gymnasium.make(env_id, **kwargs).unwrapped``: the rankgym ``Env`` itself.

    Returns the unwrapped env so that ``tasks``, ``oracle`` and ``state`` are reachable (the
    wrappers Gymnasium adds only check API order). Raises ``UnknownEnvError`` naming the
    registered rankgym envs when the id is unknown.
    """
    register_builtins()
    load_plugins()
    if env_id not in gymnasium.registry:
        known = ", ".join(e.id for e in list_envs() if e.error is None) or "none"
        raise UnknownEnvError(f"unknown env {env_id!r}; registered rankgym envs: {known}")
    env = gymnasium.make(env_id, disable_env_checker=True, **kwargs).unwrapped
    if not isinstance(env, Env):
        env.close()
        known = ", ".join(e.id for e in list_envs() if e.error is None) or "none"
        raise UnknownEnvError(
            f"{env_id!r} is a Gymnasium env but not a rankgym env (it has no tasks, tools or "
            f"verifier); use one of: {known}"
        )
    return env


def _entry_points() -> list[EntryPoint]:
    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "unknown"


def _entry_point_str(env_id: str) -> str | None:
    ep = gymnasium.registry[env_id].entry_point
    if isinstance(ep, str) or ep is None:
        return ep
    return f"{ep.__module__}:{getattr(ep, '__qualname__', type(ep).__qualname__)}"


def _module_error(module: str) -> str | None:
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return None if found else f"module {module} is not installed"
