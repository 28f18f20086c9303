"""Shared by the code-env tests: which sandbox processes are still alive."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest


def _sandbox_processes() -> list[int]:
    """Live processes whose real uid is in the sandbox's range (200000 and up)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                uid = next(line for line in f if line.startswith("Uid:")).split()[1]
        except (OSError, StopIteration):
            continue
        if int(uid) >= 200_000:
            out.append(int(pid))
    return out


@pytest.fixture
def sandbox_pids() -> Callable[[], list[int]]:
    """A function listing the sandbox's live processes (there should be none between runs)."""
    return _sandbox_processes
