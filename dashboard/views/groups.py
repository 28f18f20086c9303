"""Groups page: filter and search groups, page through them, open one side by side.

``?group=ID`` in the URL opens that group directly (links from the Agreement and Hack suspects
pages use it). Filters: run, step, env, judge spec, labeled, hack-flagged, full-text search
(SQLite FTS5 over message text and tool-call arguments). It shows the judgement of the chosen
spec (latest one); it does not show the K shuffled presentations one by one.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rankgym.dashboard import data, labeling, pickers
from rankgym.dashboard.render import letter, md_escape, render_group, show_error
from rankgym.judges.record import judge_timing
from rankgym.store import StoreError

PAGE_SIZE = 25
TRISTATE = {"any": None, "yes": True, "no": False}


def show_group(group_id: str, spec_hash: str | None, tabbed: bool) -> None:
    s = data.reader()
    try:
        group = s.get_group(group_id, spec_hash=spec_hash)
    except StoreError as e:
        show_error(e)
        return
    except Exception as e:  # a row this version cannot read: say so, keep the page
        show_error(
            f"{type(e).__name__}", prefix=f"Group {md_escape(group_id, 80)} cannot be read: "
        )
        return
    st.subheader(f"Group {md_escape(group.id, 80)}")
    st.caption(
        f"run {md_escape(group.run_id, 60)} · step {group.step} · env "
        f"{md_escape(group.env_id, 60)} · task {md_escape(group.task_id, 80)} · "
        f"{len(group.trajectories)} trajectories"
    )
    specs = {r["hash"]: data.spec_label(r) for r in data.judge_specs(data.cache_key())}
    judgements = s.judgements(group_id=group.id)
    j = group.judgement
    if j is None:
        st.info("No judgement for this group" + (" under the chosen spec." if spec_hash else "."))
    else:
        cost = "—" if j.cost_usd is None else f"${j.cost_usd:.5f}"
        timing = judge_timing(j)
        latency = f"{j.latency_s:.2f}s"
        if timing is not None:  # the judge's own work vs the wait behind other calls
            latency += f" ({timing[0]:.2f}s judge service + {timing[1]:.2f}s queued)"
        st.caption(
            f"judge {md_escape(specs.get(j.spec_hash, j.spec_hash), 80)} · status {j.status} · "
            f"{j.input_tokens} in / {j.output_tokens} out tokens · {cost} · "
            f"{latency} · {j.calls} call(s)" + (" · cached" if j.cached else "")
        )
        if j.status != "ok" and j.error:
            st.error("Judge error (as text):")
            st.code(j.error, language=None, wrap_lines=True)
        if len(judgements) > 1:
            st.caption(
                f"{len(judgements)} judgements of this group in the store; pick a spec in "
                "the sidebar to see another."
            )
    names = {t.id: letter(i) for i, t in enumerate(group.trajectories)}
    damaged: list[str] = []
    labels = s.human_rankings(group_id=group.id, problems=damaged)
    for note in damaged:  # left out by the store, named here
        st.warning(f"Damaged ranking row left out: {md_escape(note, 300)}")
    if labels:
        with st.expander(f"Human rankings ({len(labels)}; 1 = best)"):
            st.dataframe(labeling.human_rankings_table(labels, names), hide_index=True)
    render_group(labeling.group_with_letters(group, names), tabbed=tabbed)


st.title("Groups")
key = data.cache_key()
run_id = pickers.pick_run()
step: int | None = None
if run_id is not None:
    steps = data.steps_of(key, run_id)
    if len(steps) > 1:
        choice = st.sidebar.selectbox("Step", ["(all)", *steps], key="f_step")
        step = None if choice == "(all)" else int(str(choice))
env_id = pickers.pick_env(run_id)
spec_hash = pickers.pick_spec()
labeled = TRISTATE[
    st.sidebar.radio("Labeled by a person", list(TRISTATE), horizontal=True, key="f_labeled")
]
hack = TRISTATE[st.sidebar.radio("Hack-flagged", list(TRISTATE), horizontal=True, key="f_hack")]
search = st.sidebar.text_input(
    "Full-text search", key="f_search", placeholder="words in messages or tool calls"
)
tabbed = st.sidebar.toggle(
    "Tabs instead of columns",
    key="f_tabbed",
    help="Groups of more than 3 trajectories always use tabs.",
)

filters = {
    "run_id": run_id,
    "step": step,
    "env_id": env_id,
    "spec_hash": spec_hash,
    "labeled": labeled,
    "hack_flagged": hack,
    "search": search.strip() or None,
}
s = data.reader()
total = s.count_groups(**filters)
pages = max(1, -(-total // PAGE_SIZE))
c1, c2 = st.columns([1, 3], vertical_alignment="bottom")
page_no = c1.number_input(
    "Page",
    min_value=1,
    max_value=pages,
    value=1,
    step=1,
    key="f_page:" + repr(sorted(filters.items())),
)
c2.caption(f"{total} groups match · page {page_no} of {pages} · newest first")
rows = s.list_groups(limit=PAGE_SIZE, offset=(page_no - 1) * PAGE_SIZE, **filters)
table = pd.DataFrame(
    rows,
    columns=[
        "id",
        "run_id",
        "step",
        "env_id",
        "task_id",
        "n_trajectories",
        "judged",
        "n_labels",
        "n_hack",
        "created_at",
    ],
)
table["created_at"] = pd.to_datetime(table["created_at"], unit="s")
st.dataframe(table, hide_index=True, height=min(36 * (len(table) + 1) + 4, 420))

wanted = st.query_params.get("group")
options = [r["id"] for r in rows]
if wanted and wanted not in options:
    options = [wanted, *options]
if not options:
    st.info("No group matches these filters.")
    st.stop()
info = {r["id"]: r for r in rows}


def fmt(gid: str) -> str:
    r = info.get(gid)
    if r is None:
        return f"{gid} (from link)"
    return f"{gid} · step {r['step']} · {r['env_id']} · {r['task_id']}"


chosen = st.selectbox(
    "Open group",
    options,
    index=options.index(wanted) if wanted else 0,
    format_func=fmt,
    key=f"open_{wanted}",
)
if chosen != wanted:
    st.query_params["group"] = chosen
st.divider()
show_group(chosen, spec_hash, tabbed)
