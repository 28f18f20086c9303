"""`rankgym rollout` options: --env-kwargs (JSON or KEY=VALUE) and bounds on typed sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankgym.cli import main
from rankgym.envs.rollout_command import MAX_GROUP_SIZE, parse_env_kwargs
from rankgym.errors import UserError
from rankgym.store import Store


def test_env_kwargs_take_json_or_key_value_pairs():
    assert parse_env_kwargs(['{"difficulty": "hard", "families": ["lookup"]}']) == {
        "difficulty": "hard",
        "families": ["lookup"],
    }
    assert parse_env_kwargs(["difficulty=hard families=lookup,units max_turns=4"]) == {
        "difficulty": "hard",
        "families": ["lookup", "units"],
        "max_turns": 4,
    }
    assert parse_env_kwargs(["a=1", "a=2 b=true"]) == {"a": 2, "b": True}  # later keys win
    for bad in (["difficulty"], ["=x"], ["{not json"], ["[1, 2]"]):
        with pytest.raises(UserError, match="--env-kwargs"):
            parse_env_kwargs(bad)


@given(st.text(max_size=200))
def test_env_kwargs_parser_never_raises_anything_but_a_user_error(text):
    try:
        out = parse_env_kwargs([text])
    except UserError:
        return
    assert isinstance(out, dict)


def test_rollout_passes_env_kwargs_to_the_env(tmp_path: Path, capsys):
    store = tmp_path / "s.db"
    args = ["rollout", "--env", "rankgym/ToolUse-v0", "--store", str(store), "--policy", "oracle"]
    rc = main([*args, "--tasks", "5", "--group-size", "1", "--env-kwargs", "difficulty=hard families=lookup", "--json", "-q"])  # fmt: skip
    assert rc == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["groups"] == 5 and summary["success_rate"] == 1.0
    with Store(store, readonly=True) as s:
        tasks = {g["task_id"] for g in s.query("SELECT task_id FROM groups")}
    assert tasks and all(t.startswith("tooluse-lookup-hard-") for t in tasks)
    assert main([*args, "--env-kwargs", "difficulty=impossible"]) == 2
    assert "--env-kwargs" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--group-size", "100000000"),
        ("--group-size", "0"),
        ("--max-new-tokens", "-5"),
        ("--tasks", "10000000"),
    ],
)
def test_sizes_a_user_types_are_bounded(tmp_path: Path, capsys, flag, value):
    with pytest.raises(SystemExit) as e:
        main(["rollout", "--env", "rankgym/ToolUse-v0", "--store", str(tmp_path / "s.db"), flag, value])  # fmt: skip
    err = capsys.readouterr().err
    assert e.value.code == 2 and flag in err and "Traceback" not in err
    assert not (tmp_path / "s.db").exists()
    assert MAX_GROUP_SIZE >= 64
