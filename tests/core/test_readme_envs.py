"""The README's built-in env table lists every built-in env (issue 25: it listed only one)."""

from __future__ import annotations

import re
from pathlib import Path

from rankgym.envs.registry import BUILTINS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_env_table_lists_every_built_in_env() -> None:
    text = README.read_text()
    table = text[text.index("| built-in env |") :].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)
    assert sorted(listed) == sorted(BUILTINS)
