"""The CLI front door and typed TOML configs."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict

from rankgym.cli import SUBCOMMANDS, _load, build_parser
from rankgym.config import ConfigError, load_config

ALL_COMMANDS = ("envs", "new-env", "rollout", "judge", "agreement", "train", "demo", "dashboard", "export", "eval")  # fmt: skip


def test_help_lists_every_subcommand_with_its_one_line_help_in_80_columns():
    out = subprocess.run(
        [sys.executable, "-m", "rankgym", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    lines = out.stdout.splitlines()
    assert lines[0] == "usage: rankgym [-h] COMMAND ..."
    rows = [line.split(None, 1) for line in lines[lines.index("commands:") + 1 :]]
    listed = {row[0]: row[1] if len(row) > 1 else "" for row in rows}
    assert all(len(line) <= 80 for line in lines)
    assert listed == {name: text for name, (_, text) in SUBCOMMANDS.items()}
    assert set(SUBCOMMANDS) >= set(ALL_COMMANDS)


def test_every_subcommand_module_declares_its_command_under_that_name():
    for name in SUBCOMMANDS:
        cmd = _load(name)
        assert cmd is not None and cmd.name == name, name


def test_every_subcommand_takes_json_and_quiet():
    parser = build_parser()
    for name in SUBCOMMANDS:
        args = parser.parse_args([name, "--json", "--quiet"])
        assert args.json and args.quiet


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    loss: Literal["grpo", "dr_grpo", "dapo"] = "grpo"
    lr: float = 1e-4


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    env: str = "rankgym/ToolUse-v0"
    train: Inner = Inner()


def test_config_loads_and_errors_name_key(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('env = "x"\n[train]\nloss = "dapo"\nlr = 0.5\n')
    cfg = load_config(p, Outer)
    assert cfg.train.loss == "dapo" and cfg.env == "x"
    p.write_text('[train]\nloss = "ppo"\n')
    with pytest.raises(ConfigError, match=r"train\.loss.*allowed values: grpo, dr_grpo, dapo"):
        load_config(p, Outer)
    p.write_text("[train]\nlearning_rate = 1\n")
    with pytest.raises(
        ConfigError, match=r"unknown key 'train\.learning_rate'; allowed keys here: loss, lr"
    ):
        load_config(p, Outer)
    p.write_text('[train]\nlr = "fast"\n')
    with pytest.raises(ConfigError, match=r"bad value for 'train\.lr'"):
        load_config(p, Outer)
    p.write_text("not = = toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(p, Outer)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml", Outer)
