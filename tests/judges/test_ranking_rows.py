"""Human ranking rows: NaN/inf/ghost ids refused at write; a damaged stored row is skipped and
named, never a crash of `rankgym agreement`, judge-train data or the store (issue 26)."""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from judge_fakes import make_group
from test_agreement import _store_with_labels

from rankgym.cli import main
from rankgym.errors import StoreError
from rankgym.judges.agreement import agreement_report, disagreements, format_report
from rankgym.store import Store
from rankgym.store.rankings import parse_ranking

DAMAGED = [
    ('{"%s": null, "%s": 2, "%s": 3}', "is 'None', not a number"),
    ("[1, 2, 3]", "is a JSON list"),
    ('{"a": ' * 3000 + "1" + "}" * 3000, "is not JSON"),
    ('{"ghost": 1}', "not in the group: ['ghost']"),
    ('{"%s": NaN, "%s": 2, "%s": 3}', "ranks are finite numbers"),
    ('{"%s": Infinity, "%s": 2, "%s": 3}', "ranks are finite numbers"),
    ('{"%s": true, "%s": 2, "%s": 3}', "not a number"),
    ('"1,2,3"', "is a JSON str"),
]


def _insert_raw(path: Path, group_id: str, text: str, labeler: str = "mallory") -> None:
    with sqlite3.connect(path) as c:
        c.execute(
            "INSERT INTO human_rankings (group_id, labeler, ranking, blind, skipped, created_at)"
            " VALUES (?,?,?,?,?,?)",
            (group_id, labeler, text, 1, 0, time.time()),
        )


def _fill(text: str, ids: list[str]) -> str:
    return text % tuple(ids) if "%s" in text else text


@pytest.mark.parametrize(("text", "why"), DAMAGED, ids=range(len(DAMAGED)))
def test_a_damaged_stored_ranking_is_skipped_and_named(store_path: Path, text: str, why: str):
    store, _ = _store_with_labels(store_path)
    g = store.get_group("grp-0")
    store.close()
    _insert_raw(store_path, g.id, _fill(text, [t.id for t in g.trajectories]))
    with Store(store_path, readonly=True) as s:
        problems: list[str] = []
        rows = s.human_rankings(problems=problems)
        assert len(rows) == 8 and all(r["labeler"] != "mallory" for r in rows)
        assert len(problems) == 1 and "group 'grp-0' by 'mallory'" in problems[0]
        assert why in problems[0] and "skipped" in problems[0]
        rep = agreement_report(s, n_resamples=50)
        assert rep.n_labeled == 4 and rep.skipped_rankings == problems
        assert "skipped 1 damaged ranking row(s)" in format_report(rep)
        assert len(disagreements(s)) == 4


def test_rankgym_agreement_names_the_skipped_row_instead_of_crashing(store_path: Path, capsys):
    store, _ = _store_with_labels(store_path)
    store.close()
    _insert_raw(store_path, "grp-1", "[1, 2]")
    assert main(["agreement", "--store", str(store_path), "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert "skipped 1 damaged ranking row(s)" in out and "grp-1" in out
    assert main(["agreement", "--store", str(store_path), "--resamples", "50", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(report["skipped_rankings"]) == 1


@pytest.mark.parametrize(
    ("ranks", "needle"),
    [
        ([float("nan"), 2, 3], "ranks are finite numbers from 1 to 3"),
        ([float("inf"), 2, 3], "ranks are finite numbers"),
        ([0, 1, 2], "rank of"),
        ([1, 2, 4], "from 1 to 3"),
        ([True, 2, 3], "not a number"),
    ],
)
def test_nan_inf_and_out_of_range_ranks_are_refused_at_write(store_path: Path, ranks: list[Any], needle: str):  # fmt: skip
    with Store(store_path) as s:
        g = make_group(3, gid="g")
        s.put_group(g)
        with pytest.raises(StoreError, match=needle):
            s.add_human_ranking(g.id, "ann", dict(zip([t.id for t in g.trajectories], ranks, strict=True)))  # fmt: skip
        with pytest.raises(StoreError, match="not in group"):
            s.add_human_ranking(g.id, "ann", {"ghost": 1, **{t.id: 1 for t in g.trajectories}})
        assert s.human_rankings() == []


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10) | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "zz"]), inner, max_size=4)
    ),  # fmt: skip
    max_leaves=12,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_json, raw=st.text(max_size=30), use_raw=st.booleans(), skipped=st.booleans())
def test_fuzzed_ranking_columns_parse_to_a_valid_ranking_or_a_reason(
    value: Any, raw: str, use_raw: bool, skipped: bool
):
    text = raw if use_raw else json.dumps(value)
    ranking, why = parse_ranking(text, {"a", "b", "c"}, skipped=skipped)
    assert (ranking is None) != (why is None)
    if ranking is not None:
        assert set(ranking) <= {"a", "b", "c"}
        assert all(isinstance(v, float) and math.isfinite(v) and 1 <= v <= 3 for v in ranking.values())  # fmt: skip
