"""Registration of built-in envs and third-party env plugins with Gymnasium.

Built-ins are registered with ``gymnasium.register`` by entry-point *string*, so their modules
are imported only by ``gymnasium.make`` (a built-in whose module is missing or broken fails at
``make`` time and is listed with its error, it does not break ``import rankgym.envs``).

Plugins: Gymnasium >= 1.0 no longer reads the ``gymnasium.envs`` entry-point group, so
third-party packages declare ``[project.entry-points."rankgym.envs"] NAME = "pkg.module:register_envs"``;
``register_envs()`` takes no arguments and calls ``gymnasium.register`` for its ids.
``load_plugins`` runs every one once per process (``import rankgym.envs`` calls it); a plugin
that fails to import or register is logged as a warning and listed with its error, the others
still load. The ids a plugin registered are found by diffing the Gymnasium registry, so an id a
plugin re-registers over an existing one is not attributed to it.

What this module does not do: it does not instantiate envs (``list_envs`` only checks that a
built-in's module can be found), and it cannot unload a plugin.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import gymnasium

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "EnvInfo",
    "UnknownEnvError",
    "list_envs",
    "load_plugins",
    "make",
    "register_builtins",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "rankgym.envs"

BUILTINS: dict[str, dict[str, Any]] = {
    "rankgym/ToolUse-v0": {
        "entry_point": "rankgym.envs.tooluse:ToolUseEnv",
        "nondeterministic": False,
    },
    "rankgym/EmailSearch-v0": {
        "entry_point": "rankgym.envs.email.env:EmailSearchEnv",
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


class UnknownEnvError(ValueError):
    """``make`` was given an id that is not registered."""


_plugins_loaded = False
_plugin_envs: list[EnvInfo] = []


def register_builtins() -> None:
    """Register the built-in envs with Gymnasium (idempotent)."""
    for env_id, spec in BUILTINS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, **spec)


def load_plugins(force: bool = False) -> list[EnvInfo]:
    """Run every ``rankgym.envs`` entry point once; returns what each registered or its error."""
    global _plugins_loaded
    if _plugins_loaded and not force:
        return list(_plugin_envs)
    _plugins_loaded = True
    _plugin_envs.clear()
    for ep in _entry_points():
        source = f"plugin:{_dist_name(ep)}"
        before = set(gymnasium.registry)
        try:
            fn = ep.load()
            if not callable(fn):
                raise TypeError(f"{ep.value} is not callable (expected register_envs())")
            fn()
        except Exception as e:  # a broken plugin must not break the others
            err = f"{type(e).__name__}: {e}"
            log.warning("rankgym env plugin %r (%s) failed to load: %s", ep.name, source, err)
            _plugin_envs.append(EnvInfo(ep.name, source, err, ep.value))
            continue
        new_ids = sorted(set(gymnasium.registry) - before)
        if not new_ids:
            log.warning("rankgym env plugin %r (%s) registered no new env", ep.name, source)
        for env_id in new_ids:
            _plugin_envs.append(EnvInfo(env_id, source, None, _entry_point_str(env_id)))
    return list(_plugin_envs)


def list_envs() -> list[EnvInfo]:
    """Built-ins first (with an error if their module cannot be found), then plugins."""
    register_builtins()
    out = []
    for env_id, spec in BUILTINS.items():
        module = spec["entry_point"].split(":")[0]
        out.append(EnvInfo(env_id, "builtin", _module_error(module), spec["entry_point"]))
    return out + load_plugins()


def make(env_id: str, **kwargs: Any) -> Any:
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
    return gymnasium.make(env_id, disable_env_checker=True, **kwargs).unwrapped


def _entry_points() -> list[EntryPoint]:
    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else "unknown"


def _entry_point_str(env_id: str) -> str | None:
    ep = gymnasium.registry[env_id].entry_point
    return ep if isinstance(ep, str) or ep is None else f"{ep.__module__}:{ep.__qualname__}"


def _module_error(module: str) -> str | None:
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    return None if found else f"module {module} is not installed"
