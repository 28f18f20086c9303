"""The sandbox's supervisor: stdlib only, run as ``python -I -S supervisor.py`` by ``worker.py``.

It reads a config frame on stdin and isolates itself once (new mount, network, pid, IPC and UTS
namespaces when the kernel allows; the host's private directories hidden under empty read-only
tmpfs, the interpreter's own tree bound back; ``/proc`` re-mounted for the new pid space), forks
a zygote, then serves request frames, one report frame each, until stdin closes. Per run: a
fresh size-limited tmpfs work dir with the given files; the zygote forks the candidate, which
reads its request from its own pipe, joins the run's cgroups, takes its own session, resource
limits, ``no_new_privs``, no supplementary groups, the run's unprivileged uid/gid, a scrubbed
environment and the work dir as cwd. The supervisor stays root, out of the candidate's reach (a
different uid cannot signal or ptrace it), enforces the wall-clock limit, kills what is left
(session, cgroups, every process of the run's uid), checks the work dir's harness files and
reports.

The candidate sends back only *values*: for each call, the return value encoded with its type
(``codec.encode``; ``codec.decode`` is what the caller uses). The candidate controls its own
process, so it can forge anything it sends, which is only ever its own answer; what the answer
is checked against never enters this process. The codec lives in ``codec.py`` next to this file
(imported by path: ``-I`` leaves the script's directory off ``sys.path``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import time
import typing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from codec import CodecError, decode, encode, read_frame, write_frame  # noqa: E402
from isolation import (  # noqa: E402
    CLONE_NEWIPC,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_NO_NEW_PRIVS,
    _libc,
    _mount,
    _ns_fd,
    _sysv_objects,
    cleanup_run,
    isolate,
    prepare_run,
)

PRELOAD = (
    "re math cmath collections collections.abc itertools functools heapq bisect string typing "
    "json random datetime decimal fractions statistics operator copy hashlib textwrap unicodedata "
    "array dataclasses enum numbers io time traceback resource threading"
)


# ---- the candidate process ---------------------------------------------------------------------

_FILE_OPS = frozenset(
    "os.remove os.rename os.rmdir os.truncate os.chmod os.chown os.link os.symlink os.utime "
    "shutil.rmtree shutil.move".split()
)
_WATCH = _FILE_OPS | frozenset(
    "open socket.__new__ socket.connect socket.bind socket.getaddrinfo socket.sendto os.system "
    "os.exec os.posix_spawn os.spawn os.fork os.forkpty subprocess.Popen os.kill os.killpg "
    "signal.pthread_kill sys.addaudithook ctypes.dlopen ctypes.dlsym sys.settrace "
    "sys.setprofile import".split()
)
_IPC_MODULES = frozenset("_posixshmem multiprocessing.shared_memory sysv_ipc posix_ipc".split())


def _candidate(req, out_w, err_w, res_w, libc, iso):
    """Runs in the forked child: drop to the candidate's rights, run its code, report values."""
    import resource  # noqa: PLC0415

    for procs in req.get("cgroups", []):
        with contextlib.suppress(OSError), open(procs, "w") as f:
            f.write("0")  # this process; everything it starts inherits the group
    os.setsid()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    os.dup2(res_w, 3)
    os.closerange(4, 1 << 16)
    lim = req["limits"]
    for res, value in (
        (resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 1)),
        (resource.RLIMIT_AS, (lim["memory_bytes"],) * 2),
        (resource.RLIMIT_FSIZE, (lim["file_bytes"],) * 2),
        (resource.RLIMIT_NOFILE, (lim["open_files"],) * 2),
        (resource.RLIMIT_NPROC, (lim["processes"],) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ):
        resource.setrlimit(res, value)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(req["gid"])
        os.setuid(req["uid"])
    os.chdir(req["workdir"])
    os.environ.clear()
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": req["workdir"], "LANG": "C.UTF-8"})
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    work, guarded = req["workdir"], tuple(req.get("guarded", ()))
    keep = tuple(req.get("quiet_prefixes", ()))
    sensitive = tuple(req.get("sensitive", ()))

    def send(msg):
        data = (json.dumps(msg) + "\n").encode()
        with contextlib.suppress(OSError):
            os.write(3, data)

    armed = [False]

    def hook(event, args):
        if not armed[0] or event not in _WATCH:
            return
        detail = ""
        if args and isinstance(args[0], (str, bytes)):
            detail = os.fsdecode(args[0])[:300]
        elif event == "ctypes.dlsym" and len(args) > 1 and isinstance(args[1], str):
            detail = args[1][:300]  # the C function looked up (shmget, mq_open...)
        if event == "open":
            if not detail:
                return
            path = os.path.normpath(os.path.join(work, detail))
            mode = str(args[1]) if len(args) > 1 and args[1] is not None else "r"
            writing = any(c in mode for c in "wax+") or (
                len(args) > 2 and isinstance(args[2], int) and args[2] & 3
            )
            low = path.lower()
            if any(s in low for s in sensitive) or os.path.basename(path) in guarded:
                send({"event": "harness_file", "path": path, "write": bool(writing)})
            elif not (path == work or path.startswith(work + "/")) and not path.startswith(keep):
                send({"event": "outside_file", "path": path, "write": bool(writing)})
            return
        if event == "import":  # only shared-memory modules are worth a report
            if detail in _IPC_MODULES:
                send({"event": "ipc_import", "detail": detail})
            return
        if event in _FILE_OPS:
            path = os.path.normpath(os.path.join(work, detail)) if detail else ""
            if os.path.basename(path) in guarded or any(s in path.lower() for s in sensitive):
                send({"event": "harness_file", "path": path, "write": True})
            return
        send({"event": event, "detail": detail})

    sys.addaudithook(hook)

    def finish(stage, exit_code=0, error=None):
        armed[0] = False
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        send({"stage": stage} if error is None else {"stage": stage, "error": error[:500]})
        os._exit(exit_code)

    try:
        compiled = compile(req["code"], "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        finish("parse_error", 1, f"{type(e).__name__}: {e}")
    name = "__main__" if req["mode"] == "script" else "solution"
    ns = {"__name__": name, "__builtins__": __builtins__}
    send({"stage": "parsed"})
    calls = [decode(c) for c in req.get("calls", [])] if req["mode"] == "calls" else []
    armed[0] = True
    try:
        exec(compiled, ns)  # noqa: S102 - this process exists to run untrusted code
    except SystemExit as e:  # reported, not obeyed: the calls below are what counts
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if req["mode"] == "script":
            with contextlib.suppress(Exception):
                if e.code is not None and not isinstance(e.code, int):
                    print(e.code, file=sys.stderr)
            finish("done", code & 0xFF)
        finish("import_error", code & 0xFF, f"SystemExit: {e}")
    except BaseException as e:  # noqa: BLE001
        armed[0] = False
        import traceback  # noqa: PLC0415

        with contextlib.suppress(Exception):
            traceback.print_exc()
        finish("import_error" if req["mode"] == "calls" else "done", 1, f"{type(e).__name__}: {e}")
    fn: typing.Any = ns.get(req.get("entry_point") or "")  # callable when mode is "calls"
    if req["mode"] == "calls" and not callable(fn):
        finish("import_error", 1, f"no function named {req['entry_point']}")
    send({"stage": "imported"})
    for i, args in enumerate(calls):
        try:
            value = fn(*args)
            try:
                msg = {"i": i, "ok": encode(value)}
            except CodecError as e:
                msg = {"i": i, "error": f"unencodable return value: {e}"}
        except BaseException as e:  # noqa: BLE001 - SystemExit included
            msg = {"i": i, "error": f"{type(e).__name__}: {str(e)[:200]}"}
        send(msg)
    finish("done")


# ---- the supervisor loop -----------------------------------------------------------------------


def _read_pipes(fds, zsock, deadline, caps):
    """Collect the child's output (capped) until it exits (the zygote reports its wait
    status) or the deadline passes."""
    bufs = {fd: bytearray() for fd in fds}
    total = {fd: 0 for fd in fds}
    timed_out = over = False
    status = None
    open_fds = list(fds)
    while True:
        left = deadline - time.monotonic()
        if status is not None and not open_fds:
            break
        if left <= 0:
            timed_out = status is None
            break
        watch = open_fds + ([zsock] if status is None else [])
        r, _, _ = select.select(watch, [], [], min(left, 0.05))
        if zsock in r:
            status = _child_status(zsock)
            r.remove(zsock)
        for fd in r:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                open_fds.remove(fd)
                continue
            total[fd] += len(chunk)
            room = caps[fd] - len(bufs[fd])
            if room > 0:
                bufs[fd] += chunk[:room]
            if total[fd] > caps[fd] * 64:
                over = True
        if over:
            break
        if status is not None and not r:
            break  # the child is gone and its pipes are quiet (descendants may hold them)
    return bufs, total, status, timed_out, over


def _kill_all(pid, status, uid, iso, zsock):
    """SIGKILL the candidate's session, everything in its cgroups and every process of its uid;
    returns what the zygote reported (``_child_status``)."""
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    if status is None:
        status = _child_status(zsock)
    for _ in range(50):
        pids = set()
        for procs in iso.get("cgroups", []):
            with contextlib.suppress(OSError), open(procs) as f:
                pids |= {int(x) for x in f.read().split()}
        if os.geteuid() == 0 and uid != 0:
            pids |= _pids_of(uid)
        pids.discard(os.getpid())
        if not pids:
            return status
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        _reap()
        time.sleep(0.002)
    return status


def _pids_of(uid):
    """Live processes whose real uid is ``uid`` (from ``status``: a process that dropped root is
    not dumpable, so its ``/proc/PID`` belongs to root)."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, KeyError, IndexError, ValueError):
            with open(f"/proc/{name}/status") as f:
                lines = {ln.split(":", 1)[0]: ln for ln in f}
            if int(lines["Uid"].split()[1]) == uid and lines["State"].split()[1] != "Z":
                out.add(int(name))
    return out


def _reap():
    """Collect exited children (orphans of earlier runs are re-parented to us, the pid-1)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _workdir_report(req):
    """(harness files changed or gone, entries in the work dir). Runs as root on a directory
    the candidate controlled: never follows links, never blocks on FIFOs or devices."""
    changed = []
    for name, content in req.get("files", {}).items():
        want = content.encode("utf-8")
        try:
            fd = os.open(os.path.join(req["workdir"], name),
                         os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # fmt: skip
            try:
                ok = stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, len(want) + 1) == want
            finally:
                os.close(fd)
        except OSError:
            ok = False
        if not ok:
            changed.append(name)
    try:
        n_files = len(os.listdir(req["workdir"]))
    except OSError:
        n_files = -1
    return changed, n_files


def _child_status(zsock):
    """(the candidate's wait status, SysV IPC objects left in its run's namespace), as its
    parent (the zygote) reports them."""
    msg = zsock.recv(24)
    if len(msg) != 24:
        raise RuntimeError("the zygote is gone")
    return struct.unpack(">qqq", msg)[1:]


def zygote(zsock, libc):
    """Fork candidates from a memory that never held a request (so no run can read an earlier
    run's code, inputs or outputs out of its own address space). Per spawn: four pipes, a child
    that reads its request from the first, the server's ends handed over with SCM_RIGHTS, then
    the child's wait status. Common stdlib modules are imported here once: candidates start
    faster, and can use them even where their uid cannot read the interpreter's directory."""
    for name in PRELOAD.split():
        with contextlib.suppress(Exception):
            __import__(name)
    home_ipc = _ns_fd("ipc")
    while zsock.recv(1):
        pipes = [os.pipe() for _ in range(4)]  # request, stdout, stderr, results
        # each run gets an IPC namespace of its own (the zygote enters it to fork the candidate
        # and leaves it after counting what was left in it): SysV segments, semaphores, message
        # queues and POSIX message queues die with the run's last process, never outlive it
        run_ipc = home_ipc is not None and libc.unshare(CLONE_NEWIPC) == 0
        pid = os.fork()
        if pid == 0:
            zsock.close()
            for fd in (pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]):
                os.close(fd)
            try:
                req = read_frame(pipes[0][0])
                os.close(pipes[0][0])
                if req is not None:
                    _candidate(req, pipes[1][1], pipes[2][1], pipes[3][1], libc, {})
            except BaseException as e:  # noqa: BLE001 - a supervisor bug: say so
                msg = {"stage": "import_error", "error": f"sandbox: {type(e).__name__}: {e}"}
                with contextlib.suppress(OSError):
                    os.write(pipes[3][1], (json.dumps(msg) + "\n").encode())
            finally:
                os._exit(70)
        for fd in (pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]):
            os.close(fd)
        theirs = [pipes[0][1], pipes[1][0], pipes[2][0], pipes[3][0]]
        socket.send_fds(zsock, [struct.pack(">q", pid)], theirs)
        for fd in theirs:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        ipc = _sysv_objects() if run_ipc else -1
        if run_ipc and libc.setns(home_ipc, CLONE_NEWIPC) != 0:
            os._exit(71)  # cannot leave the run's namespace: the next run would share it
        zsock.send(struct.pack(">qqq", pid, status, ipc))
    os._exit(0)


def run_one(req, iso, libc, zsock):
    """One run: work dir, the candidate, its output and values, cleanup. Returns the report."""
    t0 = time.monotonic()
    iso = dict(iso, uid=req["uid"], cgroups=list(req.get("cgroups", [])))
    prepare_run(req, iso, libc)
    zsock.send(b"s")
    msg, fds, _, _ = socket.recv_fds(zsock, 8, 4)
    pid = struct.unpack(">q", msg)[0]
    req_w, fds = fds[0], fds[1:]
    with contextlib.suppress(OSError):
        write_frame(req_w, req)
    os.close(req_w)
    lim = req["limits"]
    caps = {fds[0]: lim["output_chars"], fds[1]: lim["output_chars"], fds[2]: lim["result_bytes"]}
    bufs, total, status, timed_out, over = _read_pipes(fds, zsock, t0 + lim["wall_s"], caps)
    status, ipc_left = _kill_all(pid, status, req["uid"], iso, zsock)
    iso["run_ipc_ns"] = ipc_left >= 0
    _reap()
    for fd in fds:
        os.close(fd)
    changed, n_files = _workdir_report(req)
    cleanup_run(req, iso, libc)
    return {
        "stdout": bufs[fds[0]].decode("utf-8", "replace"),
        "stderr": bufs[fds[1]].decode("utf-8", "replace"),
        "stdout_total": total[fds[0]],
        "results": bufs[fds[2]].decode("utf-8", "replace"),
        "exit_code": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "output_limit": over,
        "harness_changed": changed,
        "n_files": n_files,
        "ipc_objects": max(0, ipc_left),
        "isolation": iso,
        "wall_s": round(time.monotonic() - t0, 4),
    }


def main():
    """Serve runs: a config frame, then one report per request frame, until stdin closes."""
    os.setsid()  # out of the caller's process group (its Ctrl-C is not ours)
    cfg = read_frame(0)
    iso: dict[str, object] = {}
    libc = isolate(cfg, iso)
    if iso["pid_ns"]:  # the next child is pid 1 of the new namespace: it serves
        child = os.fork()
        if child:
            _, status = os.waitpid(child, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        if iso["mount_ns"]:
            with contextlib.suppress(OSError):
                flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
                _mount(libc, _libc()[1], "proc", "/proc", "proc", flags, None)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of candidates come to us: reaped
    server, zside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        server.close()
        zygote(zside, libc)
    zside.close()
    write_frame(1, {"ready": True, "isolation": iso})
    while (req := read_frame(0)) is not None:
        write_frame(1, run_one(req, iso, libc, server))
    os._exit(0)


if __name__ == "__main__":
    main()
