"""Torch threads: the free cores now, or ``$RANKGYM_THREADS`` (warned when it oversubscribes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from rankgym import threads
from rankgym.errors import UserError


def test_choose_threads_uses_the_free_cores():
    assert threads.choose_threads(2, 0.05) == 2
    assert threads.choose_threads(2, 1.0) == 1
    assert threads.choose_threads(2, 3.0) == 1  # never below one
    assert threads.choose_threads(16, 3.2) == 13
    assert threads.choose_threads(4, -0.5) == 4  # never above the cores


def test_set_torch_threads_honours_the_env_and_rejects_nonsense(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("RANKGYM_THREADS", "1")
        assert threads.set_torch_threads() == 1 and torch.get_num_threads() == 1
        for bad in ("two", "0"):
            monkeypatch.setenv("RANKGYM_THREADS", bad)
            with pytest.raises(UserError, match="RANKGYM_THREADS"):
                threads.set_torch_threads()
        monkeypatch.delenv("RANKGYM_THREADS")
        assert 1 <= threads.set_torch_threads() <= (os.cpu_count() or 1)
    finally:
        torch.set_num_threads(before)


def test_more_threads_than_free_cores_warns_and_naming_the_fix(monkeypatch, caplog):
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_usable_cores", lambda: 2)
    try:
        monkeypatch.setenv("RANKGYM_THREADS", "2")
        monkeypatch.setattr(threads, "other_busy_cores", lambda: 1.9)  # another job runs
        with caplog.at_level("WARNING", logger=threads.log.name):
            assert threads.set_torch_threads() == 2  # pinned: honoured, but said
        (rec,) = [r for r in caplog.records if r.levelname == "WARNING"]
        assert "RANKGYM_THREADS=2" in rec.getMessage() and "1 of 2 cores" in rec.getMessage()
        assert "unset RANKGYM_THREADS" in rec.getMessage()
        caplog.clear()
        monkeypatch.setattr(threads, "other_busy_cores", lambda: 0.1)  # an idle box
        with caplog.at_level("WARNING", logger=threads.log.name):
            assert threads.set_torch_threads() == 2
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
    finally:
        torch.set_num_threads(before)


def test_other_busy_cores_sees_a_busy_process():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        assert threads.other_busy_cores(0.5) >= 0.5
    finally:
        burner.kill()
        burner.wait()
