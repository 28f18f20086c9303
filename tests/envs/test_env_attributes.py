"""Attributes ``Env`` declares are read, never guessed: one default, on ``Env``, for every reader."""

from __future__ import annotations

import ast
from pathlib import Path

from rankgym.config import validate_config
from rankgym.envs.base import Env
from rankgym.envs.registry import make
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.setup import check_env

ROOT = Path(__file__).resolve().parents[2]
DECLARED = {"max_turns", "success_threshold", "splits", "split", "env_id", "spec", "oracle"}


def test_no_library_code_reads_an_env_attribute_through_a_getattr_fallback():
    found = []
    for package in ("envs", "trainer", "judges", "integrations"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "getattr"
                    and len(node.args) == 3
                    and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in DECLARED
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.args[1].value}")
    assert found == []


def test_the_trainer_takes_the_envs_own_turn_limit_and_threshold_when_the_config_sets_none():
    cfg = validate_config({"env": {"id": "rankgym/ToolUse-v0", "tasks_per_step": 1}}, TrainConfig)
    _, threshold, max_turns = check_env(cfg)
    env = make("rankgym/ToolUse-v0")
    assert (max_turns, threshold) == (env.max_turns, env.success_threshold)


def test_an_env_that_sets_nothing_has_the_one_default_of_each_attribute():
    class Bare(Env):
        pass

    bare = Bare()
    assert (bare.max_turns, bare.success_threshold, bare.split) == (10, 1.0, "train")
    assert bare.splits == ("train", "test") and bare.env_id == "Bare" and bare.spec is None
