"""Blind ranking page: rank a group's trajectories without seeing judge scores or rewards.

Flow: enter a name (remembered for the session) -> a group from the queue is shown with ids,
judge scores, rationales, verifiable rewards, hack signals and run/step hidden, trajectories
in a shuffled order under letters -> give each a rank (ties allowed) and submit, or skip ->
the ranking is written (one transaction) and only then the judge's scores are shown next to
yours -> next group.
"""

from __future__ import annotations

import random

import pandas as pd
import streamlit as st

from rankgym.dashboard import data, labeling, pickers
from rankgym.dashboard.render import letter, md_escape, render_group, show_error
from rankgym.judges.agreement import kendall_tau_b
from rankgym.store import StoreError
from rankgym.types import Group

NAME_KEY = "labeler_name"


def remember_name() -> None:
    st.session_state[NAME_KEY] = st.session_state["w_labeler"].strip()
    st.session_state.pop("blind_gid", None)
    st.session_state.pop("blind_revealed", None)


def reveal(group: Group, order: list[int], revealed: dict) -> None:
    """The labeler's ranks next to the judge's scores (and verifiable rewards)."""
    st.success(f"Saved ranking #{revealed['row_id']} for group {md_escape(group.id, 80)}.")
    ranking: dict[str, float] = revealed["ranking"]
    j = group.judgement
    scores = j.score_map() if j is not None and j.status == "ok" else {}
    judge_rank = labeling.competition_ranks(scores) if scores else {}
    rationale = {s.trajectory_id: s.rationale for s in (j.scores if j else [])}
    rows = []
    for pos, i in enumerate(order):
        t = group.trajectories[i]
        rows.append(
            {
                "trajectory": letter(pos),
                "your rank": ranking.get(t.id),
                "judge rank": judge_rank.get(t.id),
                "judge score": scores.get(t.id),
                "verifiable reward": t.verifiable_reward,
                "judge rationale": rationale.get(t.id, ""),
                "id": t.id,
            }
        )
    df = pd.DataFrame(rows)
    st.dataframe(df, hide_index=True)
    if len(scores) == len(ranking) >= 2:
        ids = list(ranking)
        tau = kendall_tau_b([-ranking[k] for k in ids], [scores[k] for k in ids])
        if tau == tau:  # not NaN (all tied on one side)
            st.metric("Kendall τ-b, you vs judge (this group)", f"{tau:+.2f}")
        else:
            st.caption("τ undefined for this group: all ranks or all scores tied.")
    elif not scores:
        st.info("This group has no successful judgement to compare with.")
    if st.button("Next group", type="primary", key="next_group"):
        st.session_state.pop("blind_gid", None)
        st.session_state.pop("blind_revealed", None)
        st.rerun()
    with st.expander("The group with scores shown", expanded=False):
        render_group(
            group, order=order, labels=[f"Trajectory {letter(p)}" for p in range(len(order))]
        )


st.title("Blind ranking")
if not st.session_state.get(NAME_KEY) and st.query_params.get("labeler"):
    st.session_state[NAME_KEY] = st.query_params["labeler"].strip()  # ?labeler=NAME links
name = st.text_input(
    "Your name (stored with every ranking)",
    value=st.session_state.get(NAME_KEY, ""),
    key="w_labeler",
    on_change=remember_name,
)
st.session_state[NAME_KEY] = name.strip()
labeler = name.strip()

st.sidebar.subheader("Queue")
run_id = pickers.pick_run()
env_id = pickers.pick_env(run_id)
spec_hash = pickers.pick_spec(label="Reveal scores of judge", all_label="(latest judgement)")
include_labeled = st.sidebar.checkbox(
    "Include groups others ranked",
    key="q_include_labeled",
    help="For human-vs-human agreement. You never get a group you ranked or skipped.",
)
judged_only = st.sidebar.checkbox("Only judged groups", value=True, key="q_judged_only")

if not labeler:
    st.info("Enter your name to start. Judge scores and rewards stay hidden until you submit.")
    st.stop()

s = data.reader()
queue = labeling.LabelQueue(
    labeler,
    run_id=run_id,
    env_id=env_id,
    include_labeled=include_labeled,
    judged_only=judged_only,
)
strata = labeling.queue_strata(s, queue)
left = sum(r["n"] for r in strata)
shown: set[str] = st.session_state.setdefault("blind_shown", set())
gid = st.session_state.get("blind_gid")
if gid is None:
    gid = labeling.next_group(s, queue, exclude=shown, rng=random.Random())
    if gid is None:
        st.success("Queue empty: nothing left to rank with these settings. Thank you!")
        st.stop()
    st.session_state["blind_gid"] = gid
    shown.add(gid)

try:
    group = s.get_group(gid, spec_hash=spec_hash)
except StoreError as e:
    st.session_state.pop("blind_gid", None)
    show_error(e)
    st.stop()
order = labeling.presentation_order(group.id, labeler, len(group.trajectories))
letters = [letter(p) for p in range(len(order))]
st.caption(
    f"labeler {md_escape(labeler, 60)} · {left} groups left in this queue across "
    f"{len(strata)} run/env strata · env {md_escape(group.env_id, 60)} · "
    f"task {md_escape(group.task_id, 60)}"
)

revealed = st.session_state.get("blind_revealed")
if revealed and revealed.get("group_id") == group.id:
    reveal(group, order, revealed)
    st.stop()

with st.form(f"rank_{group.id}"):
    st.markdown("**Rank each trajectory** — 1 = best; give equal ranks for ties.")
    cols = st.columns(min(len(order), 6))
    choices: dict[str, int | None] = {}
    for pos, i in enumerate(order):
        t = group.trajectories[i]
        choices[t.id] = cols[pos % len(cols)].selectbox(
            f"Trajectory {letters[pos]}",
            list(range(1, len(order) + 1)),
            index=None,
            placeholder="rank",
            key=f"rank_{group.id}_{letters[pos]}",
        )
    b1, b2 = st.columns(2)
    submitted = b1.form_submit_button("Submit ranking", type="primary", key="submit_ranking")
    skipped = b2.form_submit_button("Skip this group", key="skip_group")

try:
    if skipped:
        data.write_label(s.path, group.id, labeler, {}, skipped=True)
        st.session_state.pop("blind_gid", None)
        st.rerun()
    if submitted:
        ranking = labeling.ranking_from_choices(choices)
        row_id = data.write_label(s.path, group.id, labeler, ranking)
        st.session_state["blind_revealed"] = {
            "group_id": group.id,
            "ranking": ranking,
            "row_id": row_id,
        }
        st.rerun()
except ValueError as e:  # not every trajectory ranked
    show_error(e)
except StoreError as e:  # e.g. the store stayed locked: nothing was written
    show_error(e, prefix="Your ranking was not saved: ")

render_group(group, hide_scores=True, order=order, labels=[f"Trajectory {x}" for x in letters])
