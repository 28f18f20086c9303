"""Shared by the integration tests: the trainer tests' helpers on sys.path, tests/vllm hidden
from TRL's vLLM probe, and skips that name the install command of a missing extra."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "trainer")]  # trl_run, trainer_helpers

from trl_run import hide_tests_vllm  # noqa: E402

hide_tests_vllm()


def need(module: str, install: str) -> None:
    """Skip the calling test unless ``module`` imports; the reason is the install command."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: {install}")
