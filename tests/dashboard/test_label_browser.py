"""Blind ranking driven in headless Chromium with real clicks and keystrokes (issue 25).

A labeler types a name, ranks a group (each rank picked from its dropdown), submits, moves on,
picks a tab and skips, then changes name and ticks "Include groups others ranked". After each
step the test checks what the store holds and what the caption says, and that the blind view
gives nothing away: no token counts, trajectory or group ids, run, policy or judge wording, in
the page text and the DOM, with a screenshot that is not blank. Mouse and keyboard events go
through the DevTools protocol (``Input.dispatchMouseEvent``/``Input.insertText``), so Streamlit's
own widgets handle them as they would a person's.

Needs Debian's ``chromium`` (skips with that reason when it is missing), like
``test_dashboard_browser.py``, whose ``Chromium`` driver this reuses.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from test_dashboard_browser import Chromium, check_png, served_store

from rankgym.dashboard import labeling
from rankgym.dashboard.sample import LABEL_RUN, build_labeling_store
from rankgym.store import Store

pytestmark = pytest.mark.browser

TELLS = (
    "completion tokens",
    "prompt tokens",
    "traj-",
    "grp-",
    LABEL_RUN,
    "embedded@",
    "step0",
    "judge score",
    "rationale",
    "verifier",
    "verifiable",
    "truncated",
    "ahead of",  # the sample judge's rationale wording
)
"""Strings the blind view must not show: token counts, ids, run, policy, judge wording."""


class Labeler:
    """The page as a person uses it: find elements by what they show, click, type."""

    def __init__(self, browser: Chromium) -> None:
        self.b = browser

    def js(self, expression: str) -> object:
        res = self.b.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return res["result"].get("value")

    def text(self) -> str:
        return str(self.js("document.body.innerText"))

    def wait(self, *expected: str, gone: tuple[str, ...] = (), limit_s: float = 45) -> str:
        """Poll until every ``expected`` is in the page text, no ``gone`` is, and Streamlit is
        idle; returns the text."""
        deadline = time.monotonic() + limit_s
        while True:
            _, dom = self.b.dom()
            text = self.text()
            busy = 'data-testid="stStatusWidget"' in dom or 'data-testid="stSkeleton"' in dom
            if not busy and all(e in text for e in expected) and not any(g in text for g in gone):
                time.sleep(0.3)
                return self.text()
            if time.monotonic() > deadline:
                missing = [e for e in expected if e not in text]
                pytest.fail(f"never showed {missing} (or still showed {gone}):\n{text[:3000]}")
            time.sleep(0.25)

    def center(self, finder: str) -> tuple[float, float]:
        """Scroll the element the JS expression ``finder`` returns into view; its center."""
        box = self.js(
            f"(() => {{ const e = {finder}; if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        assert box, f"no element for {finder}"
        time.sleep(0.2)  # smooth scrolling settles
        box = self.js(
            f"(() => {{ const r = ({finder}).getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        return float(box[0]), float(box[1])

    def click(self, finder: str) -> None:
        x, y = self.center(finder)
        self.b.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.b.call(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )

    def key(self, key: str, code: int, modifiers: int = 0, text: str | None = None) -> None:
        down = {"key": key, "code": key, "windowsVirtualKeyCode": code, "modifiers": modifiers}
        if text:
            down["text"] = text
        self.b.call("Input.dispatchKeyEvent", type="keyDown", **down)
        self.b.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=key, modifiers=modifiers)

    def type_name(self, name: str) -> None:
        """Click the name box, replace what is in it, press Enter."""
        self.click("document.querySelector('[data-testid=stTextInput] input')")
        self.key("a", 65, modifiers=2)  # Ctrl+A
        self.key("Backspace", 8)
        self.b.call("Input.insertText", text=name)
        self.key("Enter", 13, text="\r")

    def button(self, label: str) -> None:
        self.click(
            "[...document.querySelectorAll('button')]"
            f".find(b => b.innerText.trim() === {json.dumps(label)})"
        )

    def pick(self, box_label: str, option: str) -> None:
        """Open the selectbox labeled ``box_label`` and click ``option`` in its list."""
        self.click(
            f"document.querySelector('input[aria-label={json.dumps(box_label)}]')"
            ".closest('[data-testid=stSelectbox]').querySelector('button')"
        )
        finder = (
            "[...document.querySelectorAll('[role=option]')]"
            f".find(o => o.innerText.trim() === {json.dumps(option)})"
        )
        deadline = time.monotonic() + 10
        while not self.js(f"!!({finder})"):
            assert time.monotonic() < deadline, f"{box_label}: no option {option!r}"
            time.sleep(0.1)
        self.click(finder)
        deadline = time.monotonic() + 10
        while self.js(f"document.querySelector('input[aria-label={json.dumps(box_label)}]').value")\
                != option:  # fmt: skip
            assert time.monotonic() < deadline, f"{box_label} did not take {option!r}"
            time.sleep(0.1)

    def tick(self, label: str) -> None:
        self.click(
            "[...document.querySelectorAll('[data-testid=stCheckbox] label')]"
            f".find(l => l.innerText.trim() === {json.dumps(label)})"
        )

    def tabs(self) -> list[tuple[str, bool]]:
        """(label, selected) of every tab on the page."""
        got = self.js(
            "[...document.querySelectorAll('[role=tab]')]"
            ".map(t => [t.innerText.trim(), t.getAttribute('aria-selected') === 'true'])"
        )
        return [(str(a), bool(b)) for a, b in got or []]

    def open_tab(self, label: str) -> None:
        self.click(
            "[...document.querySelectorAll('[role=tab]')]"
            f".find(t => t.innerText.trim() === {json.dumps(label)})"
        )
        deadline = time.monotonic() + 10
        while (label, True) not in self.tabs():
            assert time.monotonic() < deadline, f"tab {label} did not open"
            time.sleep(0.1)


def left_in_caption(text: str) -> tuple[int, bool]:
    """(N, whether the shown group is counted) from the page's "N groups left" caption."""
    m = re.search(r"(\d+) groups left[^·\n]*?(, this one included)?\s*·", text)
    assert m, text[:2000]
    return int(m.group(1)), bool(m.group(2))


def queue_size(store: Path, labeler: str, include_labeled: bool = False) -> int:
    with Store(store, readonly=True) as s:
        q = labeling.LabelQueue(labeler, include_labeled=include_labeled)
        return sum(r["n"] for r in labeling.queue_strata(s, q))


def rows_of(store: Path, labeler: str) -> list[dict]:
    with Store(store, readonly=True) as s:
        return s.human_rankings(labeler=labeler, include_skipped=True)


def check_blind(page: Labeler, shots: Path, name: str) -> None:
    """No tells in the page text or the DOM, and a screenshot that is not blank."""
    text = page.text()
    _, dom = page.b.dom()
    for tell in TELLS:
        assert tell not in text, (name, tell)
        assert tell not in dom, (name, tell)  # nor in class names, keys or hidden tabs
    assert not re.search(r"\b\d+ tokens\b", text), name
    shot = shots / f"{name}.png"
    page.b.screenshot(shot)
    (shots / f"{name}.txt").write_text(text)
    check_png(shot)


@pytest.fixture(scope="module")
def labeling_page(tmp_path_factory: pytest.TempPathFactory, run_dashboard):
    served = served_store(tmp_path_factory, run_dashboard, "label-browser", "practice.db", build_labeling_store)  # fmt: skip
    with served as (url, tmp, store, summary):
        shots = tmp / "screenshots"
        shots.mkdir()
        browser = Chromium(tmp / "profile")
        try:
            yield Labeler(browser), url, store, summary, shots
        finally:
            browser.close()
            print(f"screenshots in {shots}")


def test_a_labeler_ranks_skips_and_changes_name_with_real_clicks(labeling_page) -> None:
    page, url, store, summary, shots = labeling_page
    page.b.load(url + "/label", ["Enter your name"])

    # 1. A name, typed; the first group comes up blind, counted in the caption.
    page.type_name("zed")
    text = page.wait("Rank each trajectory", "Submit ranking")
    assert left_in_caption(text) == (queue_size(store, "zed"), True) == (4, True)
    assert page.tabs()[0] == ("Trajectory A", True)
    check_blind(page, shots, "blind_first")

    # 2. Ranks picked from the dropdowns (A and B tied first), Submit.
    for box, rank in zip("ABCD", ("1", "1", "3", "4"), strict=True):
        page.pick(f"Trajectory {box}", rank)
    page.button("Submit ranking")
    text = page.wait("Saved ranking", "Next group")
    rows = rows_of(store, "zed")
    assert len(rows) == 1 and not rows[0]["skipped"] and rows[0]["blind"]
    ranked = rows[0]["group_id"]
    assert f"for group {ranked}" in text  # revealed only now
    assert sorted(rows[0]["ranking"].values()) == [1.0, 1.0, 3.0, 4.0]
    assert left_in_caption(text) == (queue_size(store, "zed"), False) == (3, False)
    assert not re.search(r"\bT\d\b", text)  # the judge's T1..T4 are the labeler's letters

    # 3. Next group: it opens on its first tab. Open D, then Skip: the page says so, the
    #    store has the skip, and the group after it opens on A again (it used to open on D).
    page.button("Next group")
    text = page.wait("Rank each trajectory", gone=("Saved ranking",))
    assert left_in_caption(text) == (3, True)
    assert page.tabs()[0] == ("Trajectory A", True)
    check_blind(page, shots, "blind_second")
    page.open_tab("Trajectory D")
    page.button("Skip this group")
    text = page.wait("Skipped the previous group", "Rank each trajectory")
    rows = rows_of(store, "zed")
    assert [r["skipped"] for r in rows] == [False, True]
    assert rows[1]["group_id"] != ranked
    assert left_in_caption(text) == (queue_size(store, "zed"), True) == (2, True)
    assert [s for _, s in page.tabs()] == [True, False, False, False]

    # 4. Another name in the same tab: a fresh queue for it, counted from the store. With
    #    "Include groups others ranked" the groups carol and zed ranked come first.
    page.type_name("yan")
    text = page.wait("labeler yan", "Rank each trajectory")
    assert left_in_caption(text) == (queue_size(store, "yan"), True)
    page.tick("Include groups others ranked")
    expected = queue_size(store, "yan", include_labeled=True)
    assert expected == 6
    text = page.wait(f"{expected} groups left")
    check_blind(page, shots, "blind_yan")
    ranked_by_others = set(summary["ranked"]) | {ranked}
    for n in range(len(ranked_by_others)):
        for box in "ABCD":
            page.pick(f"Trajectory {box}", "1")
        page.button("Submit ranking")
        text = page.wait("Saved ranking")
        assert rows_of(store, "yan")[-1]["group_id"] in ranked_by_others  # others' first
        assert left_in_caption(text) == (expected - n - 1, False)  # what the clicks give
        page.button("Next group")
        text = page.wait("Rank each trajectory", gone=("Saved ranking",))
        assert left_in_caption(text) == (expected - n - 1, True)
    assert {r["group_id"] for r in rows_of(store, "yan")} == ranked_by_others
    check_blind(page, shots, "blind_yan_unlabeled")
