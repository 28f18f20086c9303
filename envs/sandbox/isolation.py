"""The sandbox's isolation steps, run as root by ``supervisor.py`` before any candidate code.

``isolate`` enters new namespaces once per worker and hides the host's private directories
under empty read-only tmpfs (the interpreter's own tree bound back) and its world-writable
device nodes (``/dev/fuse``, ``/dev/net/tun``) under ``/dev/null``; ``prepare_run`` and
``cleanup_run`` make and remove a run's work dir (a tmpfs capped in bytes and in files);
``_ns_fd`` and ``_sysv_objects`` serve the zygote's per-run IPC namespace. Stdlib only,
imported by path like ``codec.py``. What it does not do: seccomp, or anything without root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x40000000, 0x20000000
CLONE_NEWIPC, CLONE_NEWUTS, MNT_DETACH = 0x08000000, 0x04000000, 2
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 38, 36
HIDE_OPTS = "size=64k,mode=0755"


def _libc():
    import ctypes  # noqa: PLC0415 - only the supervisor needs it

    return ctypes.CDLL(None, use_errno=True), ctypes


def _mount(libc, ctypes, src, target, fstype, flags, data):
    enc = [None if x is None else x.encode() for x in (src, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}")


def isolate(cfg, iso):
    """Enter new namespaces and hide directories, once per worker; records what worked."""
    libc, ctypes = _libc()
    flags = {"mount_ns": CLONE_NEWNS, "net_ns": CLONE_NEWNET, "pid_ns": CLONE_NEWPID,
             "ipc_ns": CLONE_NEWIPC, "uts_ns": CLONE_NEWUTS}  # fmt: skip
    for name, flag in flags.items():
        iso[name] = bool(cfg.get("namespaces", True)) and libc.unshare(flag) == 0
    if not iso["mount_ns"]:
        return libc
    try:
        _mount(libc, ctypes, None, "/", None, MS_REC | MS_PRIVATE, None)
        keep = [(k, os.open(k, os.O_RDONLY | os.O_DIRECTORY)) for k in cfg.get("keep", [])]
        hidden = []
        for path in cfg.get("hide", []):
            try:
                _mount(libc, ctypes, "none", path, "tmpfs", MS_NOSUID | MS_NODEV, HIDE_OPTS)
                hidden.append(path)
            except OSError:
                continue
            for k, fd in keep:  # put the interpreter's own tree back where it was
                if k.startswith(path + "/"):
                    os.makedirs(k, mode=0o755, exist_ok=True)
                    _mount(libc, ctypes, f"/proc/self/fd/{fd}", k, None, MS_BIND | MS_REC, None)
        for _k, fd in keep:
            os.close(fd)
        iso["hidden"] = hidden
        iso["devices_covered"] = _cover_devices(libc, ctypes)
    except OSError as e:
        iso["mount_error"] = str(e)
        iso["mount_ns"] = False
    return libc


DEVICES_KEPT = frozenset("null zero full random urandom tty ptmx".split())


def _cover_devices(libc, ctypes):
    """Bind ``/dev/null`` over every world-writable device node in ``/dev`` and ``/dev/net``
    but the harmless ones (``/dev/fuse``, ``/dev/net/tun``...): a candidate that makes a user
    namespace of its own still cannot reach them, since mounts it inherits are locked."""
    covered = []
    for d in ("/dev", "/dev/net"):
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                special = stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                if not special or not st.st_mode & 0o002 or (d == "/dev" and name in DEVICES_KEPT):
                    continue
                with contextlib.suppress(OSError):
                    _mount(libc, ctypes, "/dev/null", path, None, MS_BIND, None)
                    covered.append(path)
    return covered


def prepare_run(req, iso, libc):
    """A fresh work dir for one run (a size-limited tmpfs in the mount namespace) + its files."""
    work = req["workdir"]
    os.makedirs(work, exist_ok=True)
    os.chmod(os.path.dirname(work), 0o711)
    iso["workdir_tmpfs"] = False
    if iso.get("mount_ns"):
        size, files = (
            int(req["limits"]["workdir_bytes"]),
            int(req["limits"].get("workdir_files", 4096)),
        )
        opts = f"size={size},nr_inodes={files},mode=0700,uid={req['uid']},gid={req['gid']}"
        with contextlib.suppress(OSError):
            _mount(libc, _libc()[1], "none", work, "tmpfs", MS_NOSUID | MS_NODEV, opts)
            iso["workdir_tmpfs"] = True
    for name, content in req.get("files", {}).items():
        path = os.path.join(work, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
        os.chown(path, req["uid"], req["gid"])
    os.chown(work, req["uid"], req["gid"])
    os.chmod(work, 0o700)


def cleanup_run(req, iso, libc):
    work = req["workdir"]
    if iso.get("workdir_tmpfs"):
        libc.umount2(work.encode(), MNT_DETACH)
    with contextlib.suppress(Exception):  # e.g. RecursionError on a very deep tree
        shutil.rmtree(os.path.dirname(work), ignore_errors=True)


def _ns_fd(kind):
    """An fd of this process's ``kind`` namespace (to come back to with ``setns``), or None."""
    try:
        return os.open(f"/proc/self/ns/{kind}", os.O_RDONLY)
    except OSError:
        return None


def _sysv_objects():
    """SysV shared memory segments, semaphore sets and message queues in this IPC namespace."""
    n = 0
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as f:
            n += max(0, len(f.read().splitlines()) - 1)
    return n
