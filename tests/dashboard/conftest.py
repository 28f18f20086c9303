"""Shared by the dashboard tests: a real `rankgym dashboard` process on a free port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_dashboard(store: Path, log_path: Path, *extra: str) -> Iterator[str]:
    """Start `rankgym dashboard --store STORE` on a free port; yield its URL once healthy.

    The server runs in its own process group, so stopping it also stops Streamlit.
    """
    port = free_port()
    log = log_path.open("w")
    cmd = [sys.executable, "-m", "rankgym", "dashboard", "--store", str(store), "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, *extra], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.read() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("dashboard did not start:\n" + log_path.read_text())
            time.sleep(0.3)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def run_dashboard() -> Callable[..., contextlib.AbstractContextManager[str]]:
    """``with run_dashboard(store, log_path) as url: ...`` (see ``running_dashboard``)."""
    return running_dashboard
