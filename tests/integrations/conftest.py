"""Shared by the integration tests: this folder and the trainer tests' helpers on sys.path,
and tests/vllm hidden from TRL's vLLM probe (see ``trl_run.hide_tests_vllm``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [
    str(HERE),
    str(HERE.parent / "trainer"),
]  # trl_run, integration_helpers, trainer_helpers

from trl_run import hide_tests_vllm  # noqa: E402

hide_tests_vllm()
