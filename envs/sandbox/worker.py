"""Long-lived sandbox supervisors: one process per concurrent caller, reused across runs.

Starting Python, importing ``ctypes`` and building the namespaces costs tens of milliseconds;
forking a fresh candidate from a warm process costs a few. A ``Worker`` is one supervisor
(``supervisor.py``) that isolated itself once (mount, network, pid, IPC and UTS namespaces;
hidden directories) and then serves runs: each run gets a fresh tmpfs work dir, its own uid,
its own cgroups, and is killed entirely (session, cgroups, every process of its uid) before the
next run starts. Candidates are forked by a *zygote* the supervisor forked before its first
request, so a candidate's address space holds its own request and nothing of earlier runs
(tested: a later run scanning its whole memory finds no trace of an earlier run's code or
inputs). The pool keeps up to ``MAX_IDLE`` idle workers per process.

What reuse gives up against one supervisor per run: runs of one worker share its mount, network
and UTS namespaces (not IPC: the zygote gives each run an IPC namespace of its own, so a SysV
segment or message queue dies with the run's last process), so e.g. an abstract socket's name
is visible to a later run of the same worker while a process holds it (never across runs: every
process of a run is killed; a different uid; never the grader's data, which is not in the
worker). Pass ``persistent=False`` to ``Sandbox`` for a fresh supervisor per run.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import struct
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["MAX_IDLE", "PROJECT_ROOT", "Worker", "acquire", "hidden_paths", "release"]

SUPERVISOR = str(Path(__file__).with_name("supervisor.py"))
PROJECT_ROOT = Path(__file__).resolve().parents[2]
HIDE_ROOTS = ("/work", "/root", "/home", "/tmp", "/var/tmp", "/dev/shm", "/run", "/mnt", "/srv",
              "/opt", "/media")  # fmt: skip
MAX_IDLE = 4
START_TIMEOUT_S = 30.0


def hidden_paths() -> tuple[list[str], list[str]]:
    """(directories to cover in the candidate's mount namespace, the interpreter's own trees
    to put back inside them)."""
    keep = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    keep.add(os.path.dirname(os.path.realpath(sys.executable)))
    keep = {k for k in keep if not any(k.startswith(o + "/") for o in keep)}
    extra = set()
    for base in (sys.prefix, sys.base_prefix):
        paths = sysconfig.get_paths(vars={"base": base, "platbase": base})
        extra |= {os.path.realpath(paths[k]) for k in ("purelib", "platlib")}
    extra.add(str(PROJECT_ROOT))
    out: list[str] = []
    for path in (*HIDE_ROOTS, *sorted(extra)):
        path = os.path.realpath(path)
        if not os.path.isdir(path) or path in keep:
            continue
        covered = any(path == o or path.startswith(o + "/") for o in out)
        under_keep = any(path.startswith(k + "/") for k in keep)
        if not covered or under_keep:
            out.append(path)
    return out, sorted(keep)


class Worker:
    """One supervisor process; ``request`` runs one job on it (one caller at a time)."""

    def __init__(self, namespaces: bool) -> None:
        self.namespaces = namespaces
        self.owner = os.getpid()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", SUPERVISOR],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        root = os.geteuid() == 0
        hide, keep = hidden_paths() if root and namespaces else ([], [])
        cfg = {"namespaces": namespaces and root, "hide": hide, "keep": keep}
        ready = self._exchange(cfg, START_TIMEOUT_S)
        if ready is None or not ready.get("ready"):
            self.close()
            raise RuntimeError("the sandbox supervisor did not start")
        self.isolation: dict[str, Any] = ready["isolation"]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and self.owner == os.getpid()

    def request(self, req: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send one job and wait for its report; None (and the worker closed) on any failure."""
        rep = self._exchange(req, timeout)
        if rep is None:
            self.close()
        return rep

    def _exchange(self, msg: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        data = json.dumps(msg).encode("utf-8")
        try:
            self.proc.stdin.write(struct.pack(">Q", len(data)) + data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        head = _read_exact(fd, 8, deadline)
        body = None if head is None else _read_exact(fd, struct.unpack(">Q", head)[0], deadline)
        try:
            return None if body is None else json.loads(body.decode("utf-8"))
        except ValueError:
            return None

    def close(self) -> None:
        """Stop the worker: closing its stdin ends it (and its pid namespace); then SIGKILL."""
        if self.owner != os.getpid():
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _read_exact(fd: int, n: int, deadline: float) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


_LOCK = threading.Lock()
_IDLE: dict[bool, list[Worker]] = {}


def acquire(namespaces: bool) -> Worker:
    """An idle worker of this process, or a new one."""
    with _LOCK:
        idle = _IDLE.setdefault(namespaces, [])
        while idle:
            w = idle.pop()
            if w.alive:
                return w
    return Worker(namespaces)


def release(worker: Worker) -> None:
    """Give a worker back after a run that completed (kept if alive and the pool has room)."""
    with _LOCK:
        idle = _IDLE.setdefault(worker.namespaces, [])
        if worker.alive and len(idle) < MAX_IDLE:
            idle.append(worker)
            return
    worker.close()


@atexit.register
def _close_all() -> None:
    with _LOCK:
        workers = [w for ws in _IDLE.values() for w in ws]
        _IDLE.clear()
    for w in workers:
        w.close()
