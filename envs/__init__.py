"""rankgym.envs: multi-turn chat environments as Gymnasium envs.

``import rankgym.envs`` registers the built-in envs (``rankgym/ToolUse-v0``,
``rankgym/EmailSearch-v0``, ``rankgym/CodeTests-v0``) and every installed plugin (entry-point
group ``rankgym.envs``), so ``gymnasium.make(id)`` works right after it. This import stays
light: gymnasium, numpy and pydantic only; no torch, transformers or litellm (the rollout
driver imports those itself).
"""

from rankgym.envs.base import Env, EpisodeState, Task
from rankgym.envs.registry import (
    EnvInfo,
    UnknownEnvError,
    list_envs,
    load_plugins,
    make,
    register_builtins,
)
from rankgym.envs.toolcalls import parse_tool_calls
from rankgym.envs.tools import Tool, ToolResult, tool

__all__ = [
    "Env",
    "EnvInfo",
    "EpisodeState",
    "Task",
    "Tool",
    "ToolResult",
    "UnknownEnvError",
    "list_envs",
    "load_plugins",
    "make",
    "parse_tool_calls",
    "register_builtins",
    "tool",
]

register_builtins()
load_plugins()
