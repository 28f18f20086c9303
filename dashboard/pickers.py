"""Sidebar pickers (run, env, judge spec), links to a group, and the self-refresh for
background results, shared by the pages.

Every picker keeps its choice in ``st.session_state`` under a ``pick_*`` key that is not a
widget key, so the choice survives moving between pages (Streamlit drops the state of
widgets that a run does not draw).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from rankgym.dashboard import data
from rankgym.dashboard.render import md_escape, show_error

ALL = "(all)"
GROUPS_PAGE = "views/groups.py"


def _persisted_select(
    label: str,
    options: Sequence[Any],
    name: str,
    *,
    format_func: Callable[[Any], str] = str,
    where: Any = None,
) -> Any:
    """A selectbox whose value is remembered across pages under ``pick_<name>``."""
    box = where if where is not None else st.sidebar
    remembered = st.session_state.get(f"pick_{name}")
    index = options.index(remembered) if remembered in options else 0

    def remember() -> None:
        st.session_state[f"pick_{name}"] = st.session_state[f"w_{name}"]

    value = box.selectbox(
        label,
        options,
        index=index,
        format_func=format_func,
        key=f"w_{name}",
        on_change=remember,
    )
    st.session_state[f"pick_{name}"] = value
    return value


def pick_run(*, allow_all: bool = True, where: Any = None) -> str | None:
    """Run filter; ``None`` means all runs. Newest run first."""
    runs = data.runs(data.cache_key())
    ids = list(runs["id"])
    names = dict(zip(runs["id"], runs["name"], strict=True))
    kinds = dict(zip(runs["id"], runs["kind"], strict=True))
    options = ([ALL] if allow_all else []) + ids
    if not options:
        return None

    def fmt(rid: str) -> str:
        return rid if rid == ALL else f"{names.get(rid) or rid} ({kinds.get(rid)})"

    value = _persisted_select(
        "Run", options, "run" if allow_all else "run1", format_func=fmt, where=where
    )
    return None if value == ALL else value


def pick_env(run_id: str | None = None, *, where: Any = None) -> str | None:
    """Env filter; ``None`` means all envs."""
    options = [ALL, *data.env_ids(data.cache_key(), run_id)]
    value = _persisted_select("Environment", options, "env", where=where)
    return None if value == ALL else value


def pick_spec(
    *,
    allow_all: bool = True,
    label: str = "Judge spec",
    all_label: str = ALL,
    where: Any = None,
) -> str | None:
    """Judge spec filter (by hash); ``None`` means any spec."""
    specs = data.judge_specs(data.cache_key())
    labels = {s["hash"]: data.spec_label(s) + f" ({s['groups']} groups)" for s in specs}
    options = ([ALL] if allow_all else []) + list(labels)
    if not options:
        return None
    value = _persisted_select(
        label,
        options,
        "spec" if allow_all else "spec1",
        format_func=lambda h: all_label if h == ALL else labels.get(h, h),
        where=where,
    )
    return None if value == ALL else value


def group_link(group_id: str, label: str | None = None, *, where: Any = None) -> None:
    """A link to the Groups page opened on ``group_id`` (URL ``groups?group=ID``)."""
    box = where if where is not None else st
    box.page_link(
        GROUPS_PAGE,
        label=md_escape(label or group_id, 120),
        icon=":material/open_in_new:",
        query_params={"group": group_id},
    )


def show_slow(res: data.Slow, what: str) -> bool:
    """Say what is still computing, failed, or stale; True when there is a value to show."""
    if res.error:
        show_error(res.error, prefix=f"Computing {what} failed: ")
        return False
    if not res.ready:
        st.info(f"Computing {what}… this page updates itself when it is ready.")
        return False
    if not res.fresh:
        at = time.strftime("%H:%M:%S", time.localtime(res.as_of))
        st.caption(f"{what} as of {at}, before the latest writes to the store; updating…")
    return True


def refresh_when_done(names: list[tuple]) -> None:
    """If any background result in ``names`` is pending, rerun the page once all are in."""
    if not data.BACKGROUND.pending(names):
        return

    @st.fragment(run_every=2)
    def poll() -> None:
        if not data.BACKGROUND.pending(names):
            st.rerun(scope="app")

    poll()
