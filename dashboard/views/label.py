"""Blind ranking page: rank a group's trajectories without seeing anything that gives them away.

Flow: enter a name (remembered for the session) -> a group from the queue is shown with ids,
judge scores, rationales, verifiable rewards, token counts, hack signals and run/step hidden,
trajectories in a shuffled order under letters -> give each a rank (ties allowed) and submit,
or skip (the page says it skipped) -> the ranking is written (one transaction) and only then
the judge's scores are shown next to yours, its rationales speaking of your letters -> next
group, opened on its first tab.

The queue state lives per labeler name: changing the name starts that name's own queue, and
"N left" counts what the store still holds for that name, so it is what the next clicks give.
"""

from __future__ import annotations

import random
from typing import Any

import pandas as pd
import streamlit as st

from rankgym.dashboard import data, labeling, pickers
from rankgym.dashboard.render import letter, md_escape, render_group, show_error
from rankgym.judges.agreement import kendall_tau_b
from rankgym.store import Store, StoreError
from rankgym.types import Group

NAME_KEY = "labeler_name"
QUEUES_KEY = "blind_queues"  # session state: labeler name -> that labeler's queue_state()
SERIAL_KEY = "blind_serial"  # session state: numbers each group shown, so its widgets are new
# (no bare string literals at module level: Streamlit's "magic" would print them on the page)


def queue_state(labeler: str) -> dict[str, Any]:
    """This session's state for ``labeler``: the group on screen (``gid``), the ``queue``
    settings it was drawn under (a change draws again), its widget ``serial``, the
    ``revealed`` ranking after a submit, and a one-off ``notice``."""
    queues: dict[str, dict[str, Any]] = st.session_state.setdefault(QUEUES_KEY, {})
    return queues.setdefault(labeler, {"gid": None, "serial": 0, "revealed": None, "notice": None})


def move_on(state: dict[str, Any], notice: str | None = None) -> None:
    """Forget the group on screen so the next run draws a new one."""
    state.update(gid=None, revealed=None, notice=notice)


def remember_name() -> None:
    st.session_state[NAME_KEY] = st.session_state["w_labeler"].strip()


def with_letters(group: Group, order: list[int]) -> Group:
    """``group`` with the judge's rationales rewritten to the labeler's letters (``T4`` -> ``C``)."""
    letters = {group.trajectories[i].id: letter(p) for p, i in enumerate(order)}
    return labeling.group_with_letters(group, letters)


def reveal(store: Store, gid: str, order: list[int], state: dict[str, Any]) -> None:
    """The labeler's ranks next to the judge's scores (and verifiable rewards), in letter order."""
    revealed = state["revealed"]
    st.success(f"Saved ranking #{revealed['row_id']} for group {md_escape(gid, 80)}.")
    spec_hash = pickers.pick_spec(
        label="Compare with judge", all_label="(latest judgement)", where=st
    )
    try:
        group = with_letters(store.get_group(gid, spec_hash=spec_hash), order)
    except StoreError as e:
        show_error(e)
        return
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
    st.dataframe(pd.DataFrame(rows), hide_index=True)
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
        move_on(state)
        st.rerun()
    with st.expander("The group with scores shown", expanded=False):
        render_group(
            group,
            order=order,
            labels=[f"Trajectory {letter(p)}" for p in range(len(order))],
            tabs_key=f"reveal_tabs_{state['serial']}",
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
include_labeled = st.sidebar.checkbox(
    "Include groups others ranked",
    key="q_include_labeled",
    help="For human-vs-human agreement: groups someone else ranked come first. You never get "
    "a group you ranked or skipped.",
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
state = queue_state(labeler)
strata = labeling.queue_strata(s, queue)
left = sum(r["n"] for r in strata)
if state["notice"]:
    st.info(state["notice"])
    state["notice"] = None
if state["gid"] is not None and not state["revealed"] and state.get("queue") != queue:
    move_on(state)  # the settings changed: a group from the new queue
if state["gid"] is None:
    gid = labeling.next_group(s, queue, rng=random.Random())
    if gid is None:
        st.success(
            f"Queue empty: nothing left for {md_escape(labeler, 60)} to rank with these "
            "settings. Thank you!"
        )
        st.stop()
    st.session_state[SERIAL_KEY] = serial = st.session_state.get(SERIAL_KEY, 0) + 1
    state.update(gid=gid, serial=serial, revealed=None, queue=queue)
gid = state["gid"]
serial = state["serial"]

try:
    group = s.get_group(gid)
except StoreError as e:
    move_on(state)
    show_error(e)
    st.stop()
order = labeling.presentation_order(group.id, labeler, len(group.trajectories))
letters = [letter(p) for p in range(len(order))]
revealed = state["revealed"]
done = bool(revealed and revealed.get("group_id") == group.id)
where = f"across {len(strata)} run/env strata" if len(strata) > 1 else "in this queue"
count = f"{left} groups left {where}" + ("" if done else ", this one included")
st.caption(
    f"labeler {md_escape(labeler, 60)} · {count} · env {md_escape(group.env_id, 60)} · "
    f"task {md_escape(group.task_id, 60)}"
)

if done:
    reveal(s, group.id, order, state)
    st.stop()

with st.form(f"blind_form_{serial}"):
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
            key=f"rank_{serial}_{letters[pos]}",
        )
    b1, b2 = st.columns(2)
    submitted = b1.form_submit_button("Submit ranking", type="primary", key="submit_ranking")
    skipped = b2.form_submit_button("Skip this group", key="skip_group")

try:
    if skipped:
        data.write_label(s.path, group.id, labeler, {}, skipped=True)
        move_on(
            state,
            f"Skipped the previous group; it will not be offered to {md_escape(labeler, 60)} "
            "again.",
        )
        st.rerun()
    if submitted:
        ranking = labeling.ranking_from_choices(choices)
        row_id = data.write_label(s.path, group.id, labeler, ranking)
        state["revealed"] = {"group_id": group.id, "ranking": ranking, "row_id": row_id}
        st.rerun()
except ValueError as e:  # not every trajectory ranked
    show_error(e)
except StoreError as e:  # e.g. the store stayed locked: nothing was written
    show_error(e, prefix="Your ranking was not saved: ")

render_group(
    group,
    hide_scores=True,
    order=order,
    labels=[f"Trajectory {x}" for x in letters],
    tabs_key=f"blind_tabs_{serial}",
)
