"""What the dashboard reads from (and the one thing it writes to) the store.

The app opens the store read-only once per script run (``Store(path, readonly=True)``, which
never blocks a trainer writing the same file) and hands it to the pages through
:func:`reader`. Aggregates that scan many rows are cached with ``st.cache_data`` keyed on the
store path and :func:`store_version` (size and mtime of the database and its WAL), so a page
reload is cheap and any write, by a trainer or by a labeler, invalidates them.

Agreement reports are slow on big stores (seconds to a minute at 100k trajectories), so they
run on one background thread (:class:`Background`) and are served stale-while-revalidate: a
page shows the last result at once, says when it is out of date, and refreshes itself.

Labels are the only write: :func:`write_label` opens a short-lived read-write ``Store`` for one
``add_human_ranking`` transaction, so two labelers on the same group both keep their rows.

What it does not do: it does not compute agreement statistics (``rankgym.judges.agreement``
does) and it does not render anything.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from rankgym.judges.agreement import agreement_report, disagreements
from rankgym.step_metrics import StepMetrics
from rankgym.store import Store
from rankgym.types import SCORE_TIE

STORE_ENV = "RANKGYM_STORE"
_local = threading.local()


def store_path(argv: list[str] | None = None) -> Path | None:
    """The store path from ``--store PATH`` in the script arguments, else ``$RANKGYM_STORE``."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--store")
    args, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    value = args.store or os.environ.get(STORE_ENV)
    return Path(value).expanduser() if value else None


@contextlib.contextmanager
def serving(store: Store) -> Iterator[Store]:
    """Make ``store`` this script run's :func:`reader`; close it when the run ends."""
    _local.store = store
    try:
        yield store
    finally:
        _local.store = None
        store.close()


def reader() -> Store:
    """The read-only store of the current script run (opened by the app's entry point)."""
    s = getattr(_local, "store", None)
    if s is None:
        raise RuntimeError("no store is open; run the dashboard through dashboard/app.py")
    return s


def store_version(path: str | Path) -> tuple[int, ...]:
    """A token that changes whenever the store file or its WAL changes (cache key)."""
    out: list[int] = []
    for suffix in ("", "-wal"):
        try:
            st_ = os.stat(f"{path}{suffix}")
            out += [st_.st_mtime_ns, st_.st_size]
        except FileNotFoundError:
            out += [0, 0]
    return tuple(out)


KEY_REFRESH_S = 5.0
"""How long a cache key is reused before the store files are stat'ed again."""
_keys: dict[str, tuple[float, tuple[int, ...]]] = {}
_keys_lock = threading.Lock()


def cache_key(*, refresh: bool = False) -> tuple[str, tuple[int, ...]]:
    """(path, version) of the current store, the first argument of every cached query.

    The version is re-read at most every :data:`KEY_REFRESH_S` seconds (or when ``refresh``),
    so a trainer writing every second does not turn every page load into a cold one.
    """
    path = str(reader().path)
    now = time.monotonic()
    with _keys_lock:
        hit = _keys.get(path)
        if refresh or hit is None or now - hit[0] > KEY_REFRESH_S:
            hit = (now, store_version(path))
            _keys[path] = hit
    return path, hit[1]


def write_label(
    path: str | Path,
    group_id: str,
    labeler: str,
    ranking: dict[str, float],
    *,
    skipped: bool = False,
) -> int:
    """Write one blind human ranking (or a skip) in its own transaction; returns the row id."""
    with Store(path) as s:
        row = s.add_human_ranking(group_id, labeler, ranking, blind=True, skipped=skipped)
    with _keys_lock:
        _keys.pop(str(path), None)  # the labeler sees their own label on the next run
    return row


# ---------------------------------------------------------------------- cached lookups
@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def runs(key: tuple) -> pd.DataFrame:
    """Runs with their group count, newest first."""
    rows = reader().run_summaries()
    df = pd.DataFrame(rows, columns=["id", "name", "kind", "created_at", "groups", "logged_steps"])
    df["created_at"] = pd.to_datetime(df["created_at"], unit="s")
    return df


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def env_ids(key: tuple, run_id: str | None = None) -> list[str]:
    """The env ids of the stored groups (of one run), sorted."""
    return reader().env_ids(run_id)


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def steps_of(key: tuple, run_id: str) -> list[int]:
    """The steps at which a run stored groups, ascending."""
    return reader().group_steps(run_id)


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def judge_specs(key: tuple) -> list[dict[str, Any]]:
    """Judge specs (hash, model), with how many groups each judged successfully."""
    return reader().judge_spec_counts()


def spec_label(spec: dict[str, Any]) -> str:
    """``model · hash8`` for a spec row (keys ``model``, ``hash``)."""
    return f"{spec['model']} · {spec['hash'][:8]}"


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def step_metrics(key: tuple, run_id: str) -> pd.DataFrame:
    """The metrics the trainer logged per step (``Store.log_step``), one row per step."""
    records = [
        {"step": r["step"], **StepMetrics.from_dict(r["metrics"] or {}).series()}
        for r in reader().steps(run_id)
    ]
    return pd.DataFrame(records).set_index("step") if records else pd.DataFrame()


MONITOR_CHARTS: dict[str, dict[str, str]] = {
    "pairwise": {
        "judge_pairwise": "this step",
        "judge_pairwise_run": "running",
        "judge_pairwise_run_low": "running, 95% CI low",
        "judge_pairwise_run_high": "running, 95% CI high",
    },
    "tau": {
        "judge_tau": "this step",
        "judge_tau_run": "running",
        "judge_tau_run_low": "running, 95% CI low",
        "judge_tau_run_high": "running, 95% CI high",
    },
    "top_fail": {
        "judge_top_fail_rate": "this step",
        "judge_top_fail_rate_run": "running",
    },
    "signal": {
        "judge_signal": "this step",
        "judge_signal_run": "running",
    },
    "judge_split": {
        "judge_split_start": "SFT start",
        "judge_split_reward": "after this step",
    },
}
"""The judge monitor's logged columns (``trainer/monitor.py``) per Runs-page chart, named."""


def monitor_frames(logged: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The judge monitor's curves of a run's logged metrics, one frame per chart (columns
    renamed for people); charts with no logged column are left out."""
    out = {}
    for chart, names in MONITOR_CHARTS.items():
        cols = [c for c in names if c in logged.columns]
        if cols and logged[cols].notna().to_numpy().any():
            out[chart] = logged[cols].rename(columns=names)
    return out


def flagged_steps(logged: pd.DataFrame, column: str) -> list[int]:
    """The steps whose logged flag ``column`` is set (``guard_stopped``, ``judge_dropped``, ...),
    in order; none where the run never logged it."""
    if column not in logged.columns:
        return []
    return [int(i) for i in logged.index[logged[column].fillna(0) > 0]]


def monitor_columns() -> set[str]:
    """Every logged column the monitor charts show (and the ``monitor_*`` counts)."""
    named = {c for names in MONITOR_CHARTS.values() for c in names}
    return named | {"monitor_groups", "monitor_pairs", "monitor_groups_run", "monitor_pairs_run",
                    "guard_stopped", "judge_below_chance", "judge_dropped", "judge_split_lower",
                    "judge_split_diff_low", "judge_split_diff_high"}  # fmt: skip


def compute_store_curves(s: Store, run_id: str) -> dict[str, pd.DataFrame]:
    """Per-step aggregates computed from the stored groups themselves.

    Returns frames indexed by step: ``judge`` (mean judge score per spec), ``verifiable``
    (mean verifiable reward and zero-variance groups), ``judge_ops`` (cost, latency and its
    split into judge service and queue time,
    unjudged groups, zero-variance judged groups per spec). Works for rollout-only runs that
    logged no step metrics.
    """
    per_judgement = s.judgement_step_stats(run_id)
    verif = s.verifiable_step_stats(run_id)
    specs = {r["hash"]: spec_label(r) for r in s.judge_specs()}
    out: dict[str, pd.DataFrame] = {}
    vdf = pd.DataFrame(
        verif, columns=["step", "verifiable_reward", "groups", "zero_variance_groups"]
    )
    if not vdf.empty:
        out["verifiable"] = vdf.set_index("step")
    pj = pd.DataFrame(
        per_judgement,
        columns=["step", "spec_hash", "status", "cost_usd", "latency_s", "score", "spread", "n"]
        + ["service_s", "queue_s"],
    )
    if not pj.empty:
        pj["judge"] = pj["spec_hash"].map(lambda h: specs.get(h, h[:8]))
        pj["ok"] = pj["status"] == "ok"
        pj["zero_var"] = pj["ok"] & (pj["spread"].fillna(0) <= SCORE_TIE)
        ok = pj[pj["ok"] & (pj["n"] > 0)].copy()
        if not ok.empty:
            ok["weighted"] = ok["score"] * ok["n"]
            sums = ok.groupby(["step", "judge"])[["weighted", "n"]].sum()
            mean = (sums["weighted"] / sums["n"]).rename("score").reset_index()
            mean["judge"] = "judge " + mean["judge"]
            out["judge"] = mean.pivot_table(index="step", columns="judge", values="score")
        ops = pj.groupby(["step", "judge"]).agg(
            cost_usd=("cost_usd", "sum"),
            latency_s=("latency_s", "mean"),
            service_s=("service_s", "mean"),
            queue_s=("queue_s", "mean"),
            unjudged=("ok", lambda x: int((~x).sum())),
            zero_variance_judged=("zero_var", "sum"),
        )
        out["judge_ops"] = ops.reset_index()
    return out


def compute_judge_top_below_threshold(
    s: Store, run_id: str | None, threshold: float, limit: int = 200
) -> pd.DataFrame:
    """Trajectories a judge scored highest in their group (strictly above the group minimum)
    whose verifiable reward is below ``threshold``; newest groups first.

    Not the ``judge_top_verifier_failed`` hack signal (``rankgym.judges.signals``: tie-aware,
    reward < 1.0 and a better trajectory exists): this is the exact maximum against a threshold
    the user picks on the page.
    """
    rows = s.judge_top_below_threshold(threshold, run_id=run_id, limit=limit)
    return pd.DataFrame(
        rows,
        columns=[
            "group_id",
            "trajectory_id",
            "spec_hash",
            "judge_score",
            "verifiable_reward",
            "run_id",
            "step",
            "env_id",
            "task_id",
        ],
    )


@st.cache_data(ttl=600, show_spinner=False, max_entries=64)
def hack_signal_rows(key: tuple, run_id: str | None, limit: int = 500) -> pd.DataFrame:
    """Recorded hack signals plus judge ``hack_suspected`` flags, newest groups first."""
    s = reader()
    rows = s.hack_signals(run_id=run_id, limit=limit)
    rows += [
        dict(r, name="judge: hack_suspected")
        for r in s.judge_hack_suspects(run_id=run_id, limit=limit)
    ]
    cols = ["name", "trajectory_id", "group_id", "detail", "run_id", "step", "env_id", "task_id"]
    return pd.DataFrame(rows, columns=cols)


AGREEMENT_RESAMPLES = 1000
"""Bootstrap resamples for the dashboard's CIs (``rankgym agreement`` defaults to 2000)."""
SLOW_WAIT_S = 0.6
"""How long a page waits for a background result before it renders without it."""


@dataclass
class Slow:
    """What a page gets from :class:`Background`: a value (maybe stale), or not yet."""

    value: Any = None
    error: str | None = None
    ready: bool = False
    fresh: bool = False
    as_of: float | None = None


class Background:
    """Slow computations (agreement over a big store) on one daemon thread, shared by every
    session of this server process, served stale-while-revalidate.

    ``get(name, version, fn)`` returns the latest result for ``name`` at once; if it is
    missing or was computed for an older store ``version``, ``fn`` is queued (once per
    version) and the caller that queued it waits at most until ``deadline`` for it; later
    callers get what there is without waiting. ``fn`` must open its own
    store: the page's read-only connection is closed when the script run ends.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[tuple, tuple[tuple, Any, str | None, float]] = {}
        self._queued: dict[tuple, tuple[tuple, threading.Event]] = {}
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def _worker(self) -> None:
        while True:
            name, version, fn, ev = self._q.get()
            with self._lock:
                current = self._queued.get(name)
            if current is not None and current[0] != version:
                ev.set()  # superseded by a newer version already queued
                continue
            value, error = None, None
            try:
                value = fn()
            except Exception as e:  # shown on the page, not raised in a thread
                error = f"{type(e).__name__}: {e}"
            with self._lock:
                self._done[name] = (version, value, error, time.time())
                if self._queued.get(name, (None,))[0] == version:
                    del self._queued[name]
            ev.set()

    def _result(self, name: tuple, version: tuple) -> Slow:
        done = self._done.get(name)
        if done is None:
            return Slow()
        v, value, error, at = done
        return Slow(value=value, error=error, ready=True, fresh=v == version, as_of=at)

    def get(self, name: tuple, version: tuple, fn: Callable[[], Any], deadline: float) -> Slow:
        with self._lock:
            res = self._result(name, version)
            if res.fresh:
                return res
            queued = self._queued.get(name)
            if queued is None or queued[0] != version:
                ev = threading.Event()
                self._queued[name] = (version, ev)
                self._q.put((name, version, fn, ev))
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(
                        target=self._worker, name="rankgym-dashboard-slow", daemon=True
                    )
                    self._thread.start()
            else:
                return res  # already being computed for an earlier page load: don't wait
        ev.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            return self._result(name, version)

    def pending(self, names: list[tuple]) -> bool:
        """Whether any of ``names`` is still queued or being computed."""
        with self._lock:
            return any(n in self._queued for n in names)


BACKGROUND = Background()


def _with_store(path: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(store, *args, **kwargs)`` on a read-only store of its own (background jobs)."""
    with Store(path, readonly=True) as s:
        return fn(s, *args, **kwargs)


def store_curves(key: tuple, run_id: str, deadline: float) -> tuple[tuple, Slow]:
    """:func:`compute_store_curves` for one run (background, stale-while-revalidate)."""
    path, version = key
    name = ("curves", path, run_id)
    job = functools.partial(_with_store, path, compute_store_curves, run_id)
    return name, BACKGROUND.get(name, version, job, deadline)


def judge_top_below_threshold(
    key: tuple, run_id: str | None, threshold: float, deadline: float
) -> tuple[tuple, Slow]:
    """:func:`compute_judge_top_below_threshold` (background, stale-while-revalidate)."""
    path, version = key
    name = ("top_failed", path, run_id, threshold)
    job = functools.partial(_with_store, path, compute_judge_top_below_threshold, run_id, threshold)
    return name, BACKGROUND.get(name, version, job, deadline)


def agreement(
    key: tuple, spec_hash: str | None, env_id: str | None, deadline: float
) -> tuple[tuple, Slow]:
    """``rankgym.judges.agreement.agreement_report`` for one spec and env (background)."""
    path, version = key
    name = ("agreement", path, spec_hash, env_id)
    job = functools.partial(
        _with_store,
        path,
        agreement_report,
        spec_hash=spec_hash,
        env_id=env_id,
        n_resamples=AGREEMENT_RESAMPLES,
    )
    return name, BACKGROUND.get(name, version, job, deadline)


def disagreement_rows(
    key: tuple, spec_hash: str | None, env_id: str | None, limit: int, deadline: float
) -> tuple[tuple, Slow]:
    """``rankgym.judges.agreement.disagreements`` (background): worst-agreeing groups first."""
    path, version = key
    name = ("disagreements", path, spec_hash, env_id, limit)
    job = functools.partial(
        _with_store, path, disagreements, spec_hash=spec_hash, env_id=env_id, limit=limit
    )
    return name, BACKGROUND.get(name, version, job, deadline)
