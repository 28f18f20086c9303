"""Real-browser check: `rankgym dashboard` on the sample store, each page loaded by headless
Chromium, the rendered DOM checked and a screenshot saved (under the test's tmp dir).

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skips with that reason when it
is missing. Each page is loaded with ``--dump-dom --screenshot`` in one Chromium run with a
virtual-time budget, repeated until Streamlit has finished rendering the expected content.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from PIL import Image, ImageStat

from rankgym.dashboard.sample import XSS_GROUP_ID, build_sample_store

pytestmark = pytest.mark.browser

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser")) if p is not None), None
)
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1400,1800",
]
PAGES = [
    # (url path, strings the rendered DOM must contain, screenshot name)
    ("/", ["Reward per step", "demo-train", "Judge latency"], "runs"),
    (
        f"/groups?group={XSS_GROUP_ID}",
        [f"Group {XSS_GROUP_ID}", "Trajectory C", "&lt;img src=x onerror=alert(1)&gt;"],
        "groups_xss",
    ),
    ("/label", ["Blind ranking", "Enter your name"], "label"),
    ("/label?labeler=browser", ["Rank each trajectory", "Submit ranking", "Trajectory B"], "blind"),
    ("/agreement", ["Judge vs people", "Per environment", "Where the judge"], "agreement"),
    ("/hacks", ["Reward-hack suspects", "prompt_injection_attempt"], "hacks"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DomScan(html.parser.HTMLParser):
    """Collects tags and attributes, so a test can ask which elements exist."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self._in_script = False
        self.script_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text.append(data)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    if CHROMIUM is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium)")
    tmp = tmp_path_factory.mktemp("browser")
    store = tmp / "sample.db"
    build_sample_store(store)
    port = free_port()
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rankgym", "dashboard", "--store", str(store), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: teardown stops streamlit too
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.read() == b"ok":
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            log.close()
            pytest.fail("dashboard did not start:\n" + (tmp / "server.log").read_text())
        time.sleep(0.3)
    yield url, tmp
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log.close()


def load(url: str, shot: Path, expected: list[str], profile: Path, limit_s: float = 60) -> str:
    """DOM and screenshot of ``url`` once Streamlit shows ``expected`` and has stopped running.

    The virtual-time budget lets Streamlit's JS run, but on a busy machine the dump can still
    come before the app has drawn; so retry (longer budgets) until done or ``limit_s``.
    """
    t0 = time.monotonic()
    deadline = t0 + limit_s
    budget = 10_000
    while True:
        shutil.rmtree(profile, ignore_errors=True)
        shot.unlink(missing_ok=True)
        out = subprocess.run(
            [
                CHROMIUM,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--virtual-time-budget={budget}",
                f"--screenshot={shot}",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
        dom = out.stdout
        done = all(e in dom for e in expected)
        running = 'data-testid="stStatusWidget"' in dom or "Computing" in dom
        if done and not running and shot.exists():
            print(f"{url}: rendered with budget {budget} after {time.monotonic() - t0:.1f}s")
            return dom
        if time.monotonic() > deadline:
            missing = [e for e in expected if e not in dom]
            pytest.fail(f"{url}: never rendered {missing}; stderr tail: {out.stderr[-500:]}")
        budget = min(budget + 5_000, 30_000)


@pytest.fixture(scope="module")
def rendered(server: tuple[str, Path]) -> dict[str, tuple[str, Path]]:
    """Every page loaded once: name -> (DOM, screenshot path)."""
    url, tmp = server
    shots = tmp / "screenshots"
    shots.mkdir()
    out = {}
    for path, expected, name in PAGES:
        shot = shots / f"{name}.png"
        dom = load(url + path, shot, expected, tmp / "profile")
        (shots / f"{name}.html").write_text(dom)
        out[name] = (dom, shot)
    print(f"screenshots in {shots}")
    return out


def check_png(path: Path) -> None:
    assert path.stat().st_size > 20_000, f"{path} is suspiciously small"
    with Image.open(path) as im:
        assert im.size == (1400, 1800)
        gray = im.convert("L")
        stat = ImageStat.Stat(gray)
        assert stat.stddev[0] > 10, f"{path} looks blank (stddev {stat.stddev[0]:.1f})"
        colors = gray.getcolors(maxcolors=256 * 256)
        assert colors is None or len(colors) > 16


def test_every_page_renders_in_chromium(rendered: dict[str, tuple[str, Path]]) -> None:
    assert set(rendered) == {name for _, _, name in PAGES}
    for dom, shot in rendered.values():
        check_png(shot)
        scan = DomScan()
        scan.feed(dom)
        for tag, attrs in scan.tags:
            assert "onerror" not in attrs, (tag, attrs)
            assert not (tag == "img" and attrs.get("src") == "x"), attrs
            assert not (tag == "a" and "evil.example" in (attrs.get("href") or "")), attrs
        assert not any("alert(" in s for s in scan.script_text)


def test_blind_form_hides_scores(rendered: dict[str, tuple[str, Path]]) -> None:
    dom, _ = rendered["blind"]
    for hidden in ("judge score", "Judge rationale", "verifiable reward", "traj-"):
        assert hidden not in dom


def test_injection_is_shown_as_text(rendered: dict[str, tuple[str, Path]]) -> None:
    dom, _ = rendered["groups_xss"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in dom
    assert '&lt;script&gt;alert("xss")&lt;/script&gt;' in dom
    assert "**bold?**" in dom  # Markdown emphasis not applied
    assert "[click me](http://evil.example/)" in dom  # the Markdown link stays literal text
    assert "&lt;b&gt;not bold&lt;/b&gt;" in dom
    assert "&lt;script&gt;alert('tool')&lt;/script&gt; 42" in dom  # tool result, as text
    assert "Looks great &lt;img src=x onerror=alert(2)&gt;" in dom  # judge rationale, as text
    scan = DomScan()
    scan.feed(dom)
    assert not [a for t, a in scan.tags if t == "img" and a.get("src") == "x"]
    assert not [a for t, a in scan.tags if t == "a" and "evil.example" in (a.get("href") or "")]
    assert not any("alert" in s for s in scan.script_text)
