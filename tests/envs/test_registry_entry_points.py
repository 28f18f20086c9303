"""A plugin env registered with any callable entry point is listed, not a crash (found by mypy:
``EnvCreator`` need not have ``__qualname__``)."""

from __future__ import annotations

import functools

import gymnasium

from rankgym.envs.registry import _entry_point_str
from rankgym.envs.tooluse import ToolUseEnv


def test_an_entry_point_without_a_qualname_is_named_by_its_type() -> None:
    env_id = "h6test/Partial-v0"
    gymnasium.register(id=env_id, entry_point=functools.partial(ToolUseEnv, split="test"))
    try:
        assert _entry_point_str(env_id) == "functools:partial"
    finally:
        gymnasium.registry.pop(env_id, None)


def test_a_class_entry_point_is_module_colon_qualname() -> None:
    env_id = "h6test/Class-v0"
    gymnasium.register(id=env_id, entry_point=ToolUseEnv)
    try:
        assert _entry_point_str(env_id) == "rankgym.envs.tooluse.env:ToolUseEnv"
    finally:
        gymnasium.registry.pop(env_id, None)
