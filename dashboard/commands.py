"""`rankgym dashboard`: serve the Streamlit dashboard over one store.

It runs ``python -m streamlit run app.py`` in a child process bound to 127.0.0.1 unless
``--host`` says otherwise, and waits for it (Ctrl-C stops it). It does not add authentication:
binding to another address exposes every trajectory, and the labeling form, to that network.

Host names: the server answers only requests whose ``Host`` header names this machine
(``localhost``, ``127.0.0.1``, ``::1``, the ``--host`` address, and for a wildcard ``--host``
the machine's host names and addresses) or one given with ``--allow-host`` (e.g. the name of a
reverse proxy). That is Streamlit's ``server.allowedHosts`` (checked on the WebSocket that
carries every page's data, and on the agent API); it stops DNS rebinding, where a web page
whose name resolves to 127.0.0.1 reads the dashboard from the user's browser. Streamlit still
serves its static files (no store data) to any Host.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from rankgym.cli import Command
from rankgym.errors import UserError
from rankgym.store import Store

APP = Path(__file__).resolve().parent / "app.py"


LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
_HOST_RE = re.compile(r"[A-Za-z0-9.:*-]{1,253}")


def allowed_hosts(host: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Host names the server answers to: this machine's, ``host``'s, and ``extra``."""
    names = [*LOCAL_HOSTS]
    if host in WILDCARDS:
        names += _machine_names()
    else:
        names.append(host.strip("[]"))
    names += [h.strip().strip("[]") for h in extra]
    return list(dict.fromkeys(n.lower() for n in names if n))


def _machine_names() -> list[str]:
    """This machine's host names and the addresses they resolve to (best effort)."""
    names = [socket.gethostname(), socket.getfqdn()]
    with contextlib.suppress(OSError):
        names += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)]
    return names


def streamlit_command(
    store: Path, host: str, port: int, allow_hosts: list[str] | tuple[str, ...] = ()
) -> list[str]:
    """The exact command line `rankgym dashboard` runs."""
    hosts = [a for h in allowed_hosts(host, allow_hosts) for a in ("--server.allowedHosts", h)]
    return [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", host,
        "--server.port", str(port),
        "--server.headless", "true",
        "--server.fileWatcherType", "none",
        "--server.enableCORS", "true",
        "--server.enableXsrfProtection", "true",
        *hosts,
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer",
        "--client.showErrorDetails", "type",
        "--", "--store", str(store),
    ]  # fmt: skip


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="path of the SQLite store to browse")
    p.add_argument("--port", type=int, default=8501, help="TCP port (default 8501)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only; there is no login)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this host name (e.g. a reverse proxy's); repeatable. "
        "Other names are refused, which stops DNS-rebinding pages",
    )


def _check_port(host: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise UserError(f"--port {port} is not a TCP port; use 1..65535")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        try:
            sock.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise UserError(
                    f"port {port} on {host} is already in use; pass another --port"
                ) from None
            raise UserError(f"cannot bind {host}:{port} ({e.strerror}); check --host") from None


def _run(args: argparse.Namespace) -> dict[str, Any]:
    store = Path(args.store).expanduser().resolve()
    if not store.is_file():
        raise UserError(
            f"store {args.store!r} does not exist; create one with `rankgym rollout --store "
            f'{args.store} ...`, or try the sample: python -c "from rankgym.dashboard.sample '
            f"import build_sample_store; build_sample_store('{args.store}')\""
        )
    Store(store, readonly=True).close()  # a StoreError is the CLI's one-line error
    _check_port(args.host, args.port)
    for name in args.allow_host:
        if not _HOST_RE.fullmatch(name.strip().strip("[]")):
            raise UserError(f"--allow-host {name!r} is not a host name (e.g. dash.example.com)")
    cmd = streamlit_command(store, args.host, args.port, args.allow_host)
    url = f"http://{args.host}:{args.port}"
    if not args.quiet:
        print(f"rankgym dashboard: serving {store} at {url} (Ctrl-C to stop)", flush=True)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(
                f"rankgym dashboard: warning: bound to {args.host}; the dashboard has no login.",
                file=sys.stderr,
            )
    env = dict(os.environ, RANKGYM_STORE=str(store))
    proc = subprocess.Popen(cmd, env=env)
    # SIGTERM to this process (a test harness, systemd) also stops the streamlit child.
    previous = signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if rc not in (0, -15, 130) and rc is not None:
        raise UserError(f"streamlit exited with status {rc}; see its messages above")
    return {"store": str(store), "url": url, "exit_code": rc}


DASHBOARD = Command("dashboard", _add_arguments, _run)
