"""Helpers of the integration tests (a module of its own: ``conftest`` is not importable by
name when several test folders have one)."""

from __future__ import annotations

import importlib.util

import pytest


def need(module: str, install: str) -> None:
    """Skip the calling test unless ``module`` imports; the reason is the install command."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: {install}")
