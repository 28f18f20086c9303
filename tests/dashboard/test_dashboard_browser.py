"""Real-browser check: `rankgym dashboard` on the sample store, each page loaded by headless
Chromium, the rendered DOM checked and a screenshot saved (under the test's tmp dir).

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skips with that reason when it
is missing. One headless Chromium is driven over the DevTools protocol (``websockets``, a
Streamlit dependency): navigate, poll the serialised DOM (what ``--dump-dom`` prints) until
Streamlit has drawn the expected content and stopped running, then capture a screenshot (what
``--screenshot`` writes). Repeated ``--dump-dom --virtual-time-budget`` runs were tried first:
on a busy machine the budget often ran out before Streamlit's websocket delivered the page,
so a page took 5-40 s of retries; polling in real time takes about a second.
"""

from __future__ import annotations

import base64
import contextlib
import html.parser
import itertools
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageStat
from websockets.sync.client import connect

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
    (  # a Markdown image as the group id: shown as text, never fetched (issue 16)
        "/groups?group=" + urllib.parse.quote("![x](http://evil.example/a.png)"),
        ["is not in store", "evil.example/a.png"],
        "groups_image_id",
    ),
    (  # a URL and an email as the labeler's name, in a caption: text, not links
        "/label?labeler=" + urllib.parse.quote("http://evil.example/x mallory@evil.example"),
        ["Rank each trajectory", "evil.example/x"],
        "label_url_name",
    ),
]


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


@contextlib.contextmanager
def served_store(
    tmp_path_factory: pytest.TempPathFactory,
    run_dashboard: Callable[..., contextlib.AbstractContextManager[str]],
    folder: str,
    db: str,
    build: Callable[[Path], Any],
) -> Iterator[tuple[str, Path, Path, Any]]:
    """Skip without Chromium; else a store ``folder/db`` written by ``build`` and served by a
    real dashboard: yields ``(url, folder path, store path, what build returned)``."""
    if CHROMIUM is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium)")
    tmp = tmp_path_factory.mktemp(folder)
    store = tmp / db
    built = build(store)
    with run_dashboard(store, tmp / "server.log") as url:
        yield url, tmp, store, built


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, run_dashboard):
    with served_store(tmp_path_factory, run_dashboard, "browser", "sample.db", build_sample_store) as (url, tmp, _, _):  # fmt: skip
        yield url, tmp


class Chromium:
    """One headless Chromium page, driven over the DevTools protocol."""

    def __init__(self, profile: Path) -> None:
        self.proc = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=2**27, open_timeout=10)
        self.ids = itertools.count(1)
        self.requests: list[str] = []
        """Every URL the page requested (Network.requestWillBeSent), in order."""
        self.call("Network.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=1400,
            height=1800,
            deviceScaleFactor=1,
            mobile=False,
        )

    def call(self, method: str, **params: object) -> dict:
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:  # skip events until our answer
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("method") == "Network.requestWillBeSent":
                self.requests.append(msg["params"]["request"]["url"])
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def dom(self) -> tuple[str, str]:
        """(location.href, serialised DOM) of the page right now."""
        res = self.call(
            "Runtime.evaluate",
            expression="JSON.stringify([location.href, document.documentElement ? "
            "document.documentElement.outerHTML : ''])",
            returnByValue=True,
        )["result"]
        href, dom = json.loads(res.get("value") or '["", ""]')
        return href, dom

    def load(self, url: str, expected: list[str], limit_s: float = 45) -> str:
        """Navigate, then poll until ``expected`` is in the DOM and Streamlit stopped running."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + limit_s
        while True:
            href, dom = self.dom()
            running = any(
                marker in dom  # script running, lazy elements not drawn, background work
                for marker in (
                    'data-testid="stStatusWidget"',
                    'data-testid="stSkeleton"',
                    "Computing",
                )
            )
            if href == url and all(e in dom for e in expected) and not running:
                time.sleep(0.5)  # let charts finish their first layout before the screenshot
                return self.dom()[1]
            if time.monotonic() > deadline:
                missing = [e for e in expected if e not in dom]
                pytest.fail(f"{url}: never rendered {missing} in {limit_s:.0f}s (at {href})")
            time.sleep(0.25)

    def scroll_to(self, text: str) -> None:
        """Scroll the first text element containing ``text`` to the middle of the view."""
        self.call(
            "Runtime.evaluate",
            expression="[...document.querySelectorAll('[data-testid=stText]')]"
            f".find(e => e.textContent.includes({json.dumps(text)}))"
            "?.scrollIntoView({block: 'center'})",
        )
        time.sleep(0.5)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def rendered(server: tuple[str, Path]) -> dict[str, tuple[str, Path]]:
    """Every page loaded once: name -> (DOM, screenshot path)."""
    url, tmp = server
    shots = tmp / "screenshots"
    shots.mkdir()
    browser = Chromium(tmp / "profile")
    out = {}
    try:
        for path, expected, name in PAGES:
            t0 = time.monotonic()
            dom = browser.load(url + path, expected)
            time.sleep(1)  # late requests (icons, fonts) of this page
            browser.dom()
            shot = shots / f"{name}.png"
            browser.screenshot(shot)
            if name == "groups_xss":  # and one of the injected text itself
                browser.scroll_to("onerror=alert(1)")
                browser.screenshot(shots / "groups_xss_payload.png")
            (shots / f"{name}.html").write_text(dom)
            out[name] = (dom, shot)
            print(f"{path}: rendered in {time.monotonic() - t0:.1f}s")
        (shots / "requests.txt").write_text("\n".join(browser.requests))
        out["requests"] = ("\n".join(browser.requests), shots / "requests.txt")
    finally:
        browser.close()
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


def test_no_page_loads_anything_from_another_host(
    rendered: dict[str, tuple[str, Path]], server: tuple[str, Path]
) -> None:
    urls = rendered["requests"][0].splitlines()
    assert any(u.startswith(server[0]) for u in urls)  # the recording works
    outside = [
        u for u in urls if not u.startswith((server[0], "data:", "blob:", "about:", "ws://127"))
    ]
    assert outside == []  # no web font, favicon or image from the internet (issue 16)


def test_every_page_renders_in_chromium(rendered: dict[str, tuple[str, Path]]) -> None:
    assert set(rendered) - {"requests"} == {name for _, _, name in PAGES}
    for name, (dom, shot) in rendered.items():
        if name == "requests":
            continue
        check_png(shot)
        scan = DomScan()
        scan.feed(dom)
        for tag, attrs in scan.tags:
            assert "onerror" not in attrs, (tag, attrs)
            assert not (tag == "img" and attrs.get("src") == "x"), attrs
            assert not (tag == "a" and "evil.example" in (attrs.get("href") or "")), attrs
            assert not (tag == "img" and "evil.example" in (attrs.get("src") or "")), attrs
            assert not (tag == "a" and "mailto:" in (attrs.get("href") or "")), attrs
        assert not any("alert(" in s for s in scan.script_text)


def test_blind_form_hides_scores(rendered: dict[str, tuple[str, Path]]) -> None:
    dom, _ = rendered["blind"]
    for hidden in ("judge score", "Judge rationale", "verifiable reward", "traj-", "stMetric"):
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
