"""Hostile input to the dashboard (issue 16): ids and query parameters render as text, a group
that cannot be drawn gets a readable message, and the server answers only its own host names
(a real request against a running `rankgym dashboard`)."""

from __future__ import annotations

import base64
import os
import re
import socket
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from rankgym.dashboard import commands
from rankgym.dashboard.sample import build_sample_store
from rankgym.store import Store
from rankgym.types import Group, Message, ToolCall, ToolCallFunction, Trajectory

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
DEEP_GROUP = "grp-deep-args"
IMAGE_ID = "![x](http://127.0.0.1:9/a.png)"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "store.db"
    build_sample_store(path)
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    call = ToolCall(id="c1", function=ToolCallFunction(name="calculate", arguments=deep))
    trajs = [
        Trajectory(
            id=f"traj-deep-{k}",
            env_id="rankgym/ToolUse-v0",
            task_id="deep",
            seed=k,
            messages=[
                Message(role="user", content="What is 2 + 2?"),
                Message(role="assistant", content=None, tool_calls=[call]),
                Message(role="tool", tool_call_id="c1", name="calculate", content="Error: deep"),
                Message(role="assistant", content="4"),
            ],
        )
        for k in range(2)
    ]
    group = Group(
        id=DEEP_GROUP, run_id="hostile", step=0, env_id="rankgym/ToolUse-v0", task_id="deep",
        trajectories=trajs,
    )  # fmt: skip
    with Store(path) as s:
        s.put_groups([group])
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def page(store: Path, monkeypatch: pytest.MonkeyPatch, view: str, query: dict) -> AppTest:
    monkeypatch.setenv("RANKGYM_STORE", str(store))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    at.query_params.update(query)
    at.switch_page(f"views/{view}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def rendered_markdown(at: AppTest) -> list[str]:
    """Every Markdown string of the page, code spans removed (their text is never interpreted)."""
    out: list[str] = []
    for kind in ("markdown", "caption", "title", "subheader", "header"):
        out += [e.value for e in at.get(kind)]
    for kind in ("info", "warning", "error", "success"):
        out += [e.value for e in at.get(kind)]
    return [re.sub(r"(`+) .*? \1", "", md) for md in out]


def test_a_group_id_in_the_url_is_shown_as_text_and_fetches_nothing(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page(store, monkeypatch, "groups", {"group": IMAGE_ID})
    errors = [e.value for e in at.error]
    assert errors and all("is not in store" in e and "`" in e for e in errors), errors
    for md in rendered_markdown(at):  # "![x](" would make the browser fetch the image
        assert not re.search(r"(?<!\\)!\\?\[x(?<!\\)\]\(", md), md
        assert "](http" not in md


def test_a_labeler_name_from_the_url_is_shown_as_text(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page(store, monkeypatch, "label", {"labeler": IMAGE_ID})
    for md in rendered_markdown(at):
        assert "](http" not in md, md


def test_tool_arguments_nested_5000_deep_still_show_the_group(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = page(store, monkeypatch, "groups", {"group": DEEP_GROUP})
    assert at.subheader[0].value.startswith("Group grp")
    assert [t.label for t in at.tabs] == [] and len(at.columns) >= 2
    codes = [c.value for c in at.code]
    assert sum(c.startswith('{"a": {"a": ') for c in codes) == 2  # raw arguments, not pretty
    assert "4" in [t.value for t in at.text]


def test_a_trajectory_that_cannot_be_drawn_is_a_message_and_the_others_still_show(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rankgym.dashboard import render

    real = render.render_transcript

    def broken(t: Trajectory) -> None:
        if t.id.endswith("-0"):
            raise RecursionError("maximum recursion depth exceeded")
        real(t)

    monkeypatch.setattr(render, "render_transcript", broken)
    at = page(store, monkeypatch, "groups", {"group": DEEP_GROUP})
    errors = [e.value for e in at.error]
    assert any("Trajectory A cannot be shown: ` RecursionError" in e for e in errors), errors
    assert "4" in [t.value for t in at.text]  # trajectory B is drawn


def test_the_page_icon_is_not_fetched_from_the_internet() -> None:
    source = APP.read_text()
    assert 'page_icon=":material' not in source and "page_icon=" in source


def test_the_command_allows_only_this_machines_host_names() -> None:
    cmd = commands.streamlit_command(Path("/s.db"), "127.0.0.1", 8600, ["dash.example.com"])
    hosts = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--server.allowedHosts"]
    assert hosts == ["localhost", "127.0.0.1", "::1", "dash.example.com"]
    assert "evil.example" not in hosts
    wild = commands.allowed_hosts("0.0.0.0")
    assert socket.gethostname().lower() in wild and "0.0.0.0" not in wild


# ------------------------------------------------------------------ a real running dashboard


def _upgrade(port: int, host: str) -> str:
    """Open Streamlit's WebSocket with this Host header; the HTTP status line of the answer."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        "GET /_stcore/stream HTTP/1.1\r\n"
        f"Host: {host}\r\n"
        f"Origin: http://{host}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: streamlit\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request.encode())
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n", 1)[0].decode("latin-1")


def test_a_running_dashboard_refuses_a_dns_rebinding_host(
    store: Path, tmp_path: Path, run_dashboard
) -> None:
    with run_dashboard(store, tmp_path / "server.log") as url:
        port = int(url.rsplit(":", 1)[1])
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            answer = _upgrade(port, host)
            assert answer.startswith("HTTP/1.1 101"), (host, answer)
        refused = _upgrade(port, f"evil.example:{port}")  # a name resolving to 127.0.0.1
        assert refused.startswith("HTTP/1.1 403"), refused
