"""Fixtures shared by the judge tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes import unregister
from judge_fakes import ScriptedJudge, install_fake


@pytest.fixture
def fake() -> Iterator[ScriptedJudge]:
    """The scripted ``fakejudge/`` LiteLLM provider, registered for one test."""
    f = install_fake()
    yield f
    unregister(f.provider)
