"""A damaged human-ranking row in the store: the group page and the agreement page still render,
with the row named in a warning instead of an uncaught StoreError (issue 26)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from test_dashboard_hostile import page

from rankgym.dashboard.sample import build_sample_store
from rankgym.store import Store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("rankings") / "store.db"
    build_sample_store(path)
    with Store(path, readonly=True) as s:
        gid = next(r["group_id"] for r in s.human_rankings())
    with sqlite3.connect(path) as c:
        c.execute(
            "INSERT INTO human_rankings (group_id, labeler, ranking, blind, skipped, created_at)"
            " VALUES (?,?,?,?,?,?)",
            (gid, "mallory", '{"x": [1', 1, 0, time.time()),  # cut JSON: was a StoreError
        )
    return path, gid


def test_the_group_page_shows_the_group_and_names_the_damaged_ranking(
    store: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, gid = store
    at = page(path, monkeypatch, "groups", {"group": gid})
    assert at.subheader[0].value.startswith("Group ")
    warnings = [w.value for w in at.warning]
    assert any("Damaged ranking row left out" in w and "mallory" in w for w in warnings), warnings
    assert not [e.value for e in at.error]


def test_the_agreement_page_still_reports_and_names_the_damaged_ranking(
    store: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = store
    at = page(path, monkeypatch, "agreement", {})
    for _ in range(30):  # the report is computed in the background
        if any("damaged ranking row" in w.value for w in at.warning):
            break
        time.sleep(1)
        at.run()
    warnings = [w.value for w in at.warning]
    assert any("1 damaged ranking row(s) left out" in w for w in warnings), warnings
