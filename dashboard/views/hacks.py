"""Hack suspects page: trajectories with recorded hack signals (env checks and the judge's own
``hack_suspected``), and trajectories a judge scored first in their group that the verifier
failed. Each row links to its group.

It lists what the store recorded or what one query finds; it does not run any new detector.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from rankgym.dashboard import data, pickers

MAX_LINKS = 30


def link_list(df: pd.DataFrame, label_cols: list[str]) -> None:
    """One link per distinct group (first ``MAX_LINKS``) under the table."""
    seen: list[str] = []
    for _, r in df.iterrows():
        if r["group_id"] not in seen:
            seen.append(r["group_id"])
            label = " · ".join(str(r[c]) for c in label_cols)
            pickers.group_link(r["group_id"], f"{r['group_id']} — {label}")
        if len(seen) >= MAX_LINKS:
            st.caption(f"First {MAX_LINKS} groups linked; filter by run to see others.")
            break


st.title("Reward-hack suspects")
key = data.cache_key()
run_id = pickers.pick_run()
threshold = st.sidebar.number_input(
    "Verifier pass threshold",
    value=1.0,
    min_value=0.0,
    max_value=1.0,
    step=0.05,
    key="h_threshold",
    help="A verifiable reward below this counts as failed.",
)

signals = data.hack_signal_rows(key, run_id)
st.subheader("Hack signals")
if signals.empty:
    st.info("No hack signals recorded" + (" in this run." if run_id else "."))
else:
    counts = signals.groupby("name").size().rename("trajectories").reset_index()
    c1, c2 = st.columns([2, 5])
    c1.dataframe(counts, hide_index=True)
    names = sorted(signals["name"].unique())
    chosen = c2.multiselect("Signals", names, default=names, key="h_names")
    shown = signals[signals["name"].isin(chosen)]
    c2.dataframe(shown, hide_index=True)
    with st.expander(f"Open a group ({shown['group_id'].nunique()} groups)", expanded=True):
        link_list(shown, ["name", "env_id", "task_id"])

st.subheader("Judge ranked first, verifier failed")
name, res = data.judge_top_below_threshold(
    key, run_id, float(threshold), time.monotonic() + data.SLOW_WAIT_S
)
top = res.value if pickers.show_slow(res, "this list") else None
if top is None:
    pass
elif top.empty:
    st.info(
        "No group where a judge's top-scored trajectory failed the verifier "
        f"(verifiable reward < {threshold:g})."
    )
else:
    specs = {r["hash"]: data.spec_label(r) for r in data.judge_specs(key)}
    top["judge"] = top["spec_hash"].map(lambda h: specs.get(h, h[:8]))
    st.dataframe(top.drop(columns=["spec_hash"]), hide_index=True)
    with st.expander(f"Open a group ({top['group_id'].nunique()} groups)", expanded=True):
        link_list(top, ["judge", "env_id", "task_id"])

pickers.refresh_when_done([name])
