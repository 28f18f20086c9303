"""Runs page: reward curves (judge and verifiable), judge cost and latency, the judge monitor
(judge vs verifier per step and running, with CIs; a guard stop), KL, zero-variance groups per
step, for one run.

Curves come from two places and are labelled as such: aggregates computed from the stored
groups (every run has them) and the metrics the trainer logged with ``Store.log_step`` (train
runs only; read back as ``rankgym.step_metrics.StepMetrics``, one curve per numeric key,
so keys other writers logged show too). It does not re-derive trainer metrics (KL, clip
fraction) from trajectories.
"""

from __future__ import annotations

import time

import altair as alt
import pandas as pd
import streamlit as st

from rankgym.dashboard import data, pickers
from rankgym.dashboard.render import md_escape


def line_chart(
    df: pd.DataFrame,
    title: str,
    y_title: str,
    *,
    bars: bool = False,
    unit_interval: bool = False,
    counts: bool = False,
    legend_width: int = 360,
) -> None:
    """Per-step series (index = step, one column per series) as an Altair line/bar chart.

    ``counts``: whole numbers from 0 up (integer ticks, never a ``0.000000`` axis).

    The legend sits on the right: Streamlit gives a chart a fixed height, so a legend below
    it would squeeze the plot. A single series gets no legend (the title names it).
    """
    df = df.dropna(axis=1, how="all")
    if df.empty:
        return
    long = df.reset_index().melt(id_vars="step", var_name="series", value_name="value").dropna()
    base = alt.Chart(long, title=title)
    mark = base.mark_bar(opacity=0.8) if bars else base.mark_line(point=True)
    chart = mark.encode(
        x=alt.X(
            "step:O" if bars else "step:Q",
            title="step",
            axis=alt.Axis(format="d", tickMinStep=1, labelAngle=0),
        ),
        y=alt.Y(
            "value:Q",
            title=y_title,
            scale=alt.Scale(domain=[0, 1])
            if unit_interval
            else alt.Scale(domainMin=0, nice=True)
            if counts
            else alt.Undefined,
            axis=alt.Axis(format="d", tickMinStep=1) if counts else alt.Undefined,
        ),
        color=alt.Color(
            "series:N",
            title=None,
            legend=alt.Legend(labelLimit=legend_width) if df.shape[1] > 1 else None,
        ),
        xOffset="series:N" if bars else alt.Undefined,
        tooltip=["step", "series", alt.Tooltip("value:Q", format=".4g")],
    )
    st.altair_chart(chart, width="stretch")


def pick_columns(df: pd.DataFrame, *needles: str) -> list[str]:
    return [c for c in df.columns if any(n in c.lower() for n in needles)]


st.title("Runs")
runs = data.runs(data.cache_key())
if runs.empty:
    st.info("This store has no runs yet. Write some with `rankgym rollout` or `rankgym train`.")
    st.stop()

trains = runs[runs["kind"] == "train"]
default = trains["id"].iloc[0] if len(trains) else runs["id"].iloc[0]
st.session_state.setdefault("pick_run1", default)
run_id = pickers.pick_run(allow_all=False)
st.dataframe(
    runs,
    hide_index=True,
    column_config={"created_at": st.column_config.DatetimeColumn("created", format="localized")},
)
if run_id is None:
    st.stop()

key = data.cache_key()
st.subheader(f"Run {md_escape(run_id, 80)}")
name, res = data.store_curves(key, run_id, time.monotonic() + data.SLOW_WAIT_S)
if not pickers.show_slow(res, "the curves of this run"):
    pickers.refresh_when_done([name])
    st.stop()
curves = res.value
logged = data.step_metrics(key, run_id)

reward_parts = []
if "judge" in curves:
    reward_parts.append(curves["judge"].rename(columns=lambda c: f"{c} (mean score)"))
if "verifiable" in curves:
    reward_parts.append(
        curves["verifiable"][["verifiable_reward"]].rename(
            columns={"verifiable_reward": "verifiable reward (mean)"}
        )
    )
if not logged.empty:
    cols = pick_columns(logged, "reward")
    cols = [c for c in cols if "std" not in c.lower()]
    reward_parts.append(logged[cols].rename(columns=lambda c: f"{c} (trainer)"))
reward = pd.concat(reward_parts, axis=1).sort_index() if reward_parts else pd.DataFrame()
reward.index.name = "step"

if reward.empty:
    st.info("No judged or verified groups in this run yet.")
else:
    line_chart(reward, "Reward per step", "reward / score", unit_interval=True)

ops = curves.get("judge_ops")
left, right = st.columns(2)
if ops is None:
    left.info("No judgements in this run yet.")
else:
    with left:
        lat = ops.pivot_table(index="step", columns="judge", values="latency_s")
        split = [  # the judge's own time vs its calls' wait (behind concurrency, the one model)
            ops.pivot_table(index="step", columns="judge", values=col).rename(
                columns=lambda c, what=what: f"{c} · {what}"
            )
            for col, what in (("service_s", "judge service"), ("queue_s", "queued"))
            if col in ops and ops[col].notna().any()
        ]
        if split:
            lat = pd.concat([lat.rename(columns=lambda c: f"{c} · total"), *split], axis=1)
        line_chart(lat, "Judge latency per group (mean)", "seconds", legend_width=200)
    with right:
        cost = ops.pivot_table(index="step", columns="judge", values="cost_usd", aggfunc="sum")
        line_chart(cost, "Judge cost per step", "USD", legend_width=200)

zero = []
if "verifiable" in curves:
    zero.append(
        curves["verifiable"][["zero_variance_groups"]].rename(
            columns={"zero_variance_groups": "verifiable reward all equal"}
        )
    )
if ops is not None:
    z = ops.pivot_table(index="step", columns="judge", values="zero_variance_judged", aggfunc="sum")
    zero.append(z.rename(columns=lambda c: f"judge scores all equal · {c}"))
    u = ops.pivot_table(index="step", columns="judge", values="unjudged", aggfunc="sum")
    if u.to_numpy().sum() > 0:
        zero.append(u.rename(columns=lambda c: f"unjudged · {c}"))
if not logged.empty:
    zero.append(logged[pick_columns(logged, "zero")].rename(columns=lambda c: f"{c} (trainer)"))
if zero:
    zdf = pd.concat(zero, axis=1).sort_index()
    zdf.index.name = "step"
    if zdf.fillna(0).to_numpy().sum() > 0:
        line_chart(zdf, "Groups without learning signal per step", "groups", bars=True, counts=True)
    else:  # an all-zero bar chart draws nothing over a 0.000000 axis
        st.success(
            f"Groups without learning signal: none in {zdf.index.nunique()} step(s); every "
            "group's rewards differed."
        )
    st.caption(
        "A group whose rewards are all equal has zero advantage in GRPO: it contributes "
        "nothing to the update. Counted here, not hidden."
    )

hack_cols = pick_columns(logged, "hack_") if not logged.empty else []
if hack_cols:
    line_chart(
        logged[hack_cols].rename(
            columns={
                "hack_flagged": "trajectories the env flagged",
                "hack_penalized": "rewards lowered to the group's minimum",
            }
        ),
        "Hack signals in training",
        "trajectories",
        bars=True,
    )
    st.caption(
        "With reward.hack_penalty on (the default), a trajectory the env raised a hack signal "
        "for (e.g. answer_spam) is trained on its group's lowest reward. The Hack suspects page "
        "lists them."
    )

if not logged.empty and "truncated_trajectories" in logged:
    line_chart(
        logged[["truncated_trajectories"]].rename(
            columns={"truncated_trajectories": "episodes cut before answering"}
        ),
        "Episodes cut at the turn limit before answering",
        "trajectories",
        bars=True,
        counts=True,
    )
    if rising := data.flagged_steps(logged, "truncation_rising"):
        st.warning(
            f"More episodes were cut at the turn limit than at the first step, shown at step(s) "
            f"{', '.join(map(str, rising))}: the policy may be learning to never answer. Check "
            "what the env's reward pays an episode that never answers (docs/training.md, "
            "'Episodes cut at the turn limit')."
        )

monitor = data.monitor_frames(logged) if not logged.empty else {}
if monitor:
    st.subheader("Judge monitor")
    if stopped := data.flagged_steps(logged, "guard_stopped"):
        st.error(
            f"The judge guard stopped this run at step {stopped[0]}: its running agreement with "
            "the verifier was shown to be no better than chance (see guard_stop.json in the "
            "run's output dir)."
        )
    if below := data.flagged_steps(logged, "judge_below_chance"):
        st.warning(
            f"The judge's agreement with the verifier was shown no better than chance at step(s) "
            f"{', '.join(map(str, below))}: with a blended reward its share was noise or worse "
            "(the guard stops only judge-only runs)."
        )
    if dropped := data.flagged_steps(logged, "judge_dropped"):
        st.warning(
            f"The judge was dropped from the reward at step {dropped[0]} ([monitor] "
            'below_chance = "drop"): from there the verifier alone trained the policy; the '
            "judge kept judging."
        )
    left, right = st.columns(2)
    with left:
        if "pairwise" in monitor:
            line_chart(
                monitor["pairwise"], "Judge vs verifier: pairwise agreement (0.5 = chance)",
                "share of pairs", unit_interval=True, legend_width=200,
            )  # fmt: skip
    with right:
        if "tau" in monitor:
            line_chart(monitor["tau"], "Judge vs verifier: Kendall tau", "tau", legend_width=200)
    if "top_fail" in monitor:
        line_chart(
            monitor["top_fail"], "Judge's top trajectory fails the verifier", "share of groups",
            unit_interval=True, legend_width=200,
        )  # fmt: skip
    if "signal" in monitor:
        line_chart(
            monitor["signal"],
            "Judge's reward vs the verifier's pass/fail: the push toward success (cosine; +1 = all)",
            "cosine", legend_width=200,
        )  # fmt: skip
    if "judge_split" in monitor:
        line_chart(
            monitor["judge_split"], "Judge split: the verifier's reward on tasks GRPO never draws",
            "mean reward", unit_interval=True, legend_width=200,
        )  # fmt: skip
        if lower := data.flagged_steps(logged, "judge_split_lower"):
            st.error(
                f"At step {lower[0]} (after its update) the policy was shown to do worse on the "
                "judge split than the SFT start (99% interval of the change below 0): the reward "
                "is not teaching what the verifier checks. A judge-only run with the guard on "
                "stops there (guard_stop.json)."
            )
    pairs = logged["monitor_pairs_run"].dropna() if "monitor_pairs_run" in logged else None
    st.caption(
        "On every step's groups that the verifier (or a person) orders: how often the judge "
        "orders a pair of trajectories the same way (a tie counts half), Kendall tau, and how "
        "often the judge's favourite fails the verifier while a success was in the group (a "
        "gaming signal); running = over the run so far, with 95% bootstrap CIs over groups"
        + (f" ({int(pairs.iloc[-1])} pairs so far)" if pairs is not None and len(pairs) else "")
        + ". The push toward success: over every judged group, the cosine between the "
        "judge's reward as GRPO read it and the verifier's pass/fail, each centred per group "
        "(1 = the verifier's push, 0 = none of it). With a judge-only reward the guard stops "
        "the run once the running (or recent) pairwise CI lies at or below 0.5 (docs/judging.md)."
    )

kl_cols = pick_columns(logged, "kl") if not logged.empty else []
if kl_cols:
    line_chart(logged[kl_cols], "KL to the base model", "KL")
else:
    st.info(
        "No KL logged for this run (rollout-only runs and runs with `[loss] beta = 0` have none)."
    )

if not logged.empty:
    shown = set(pick_columns(logged, "reward", "kl", "zero", "hack_", "truncat"))
    shown |= data.monitor_columns()
    rest = [c for c in logged.columns if c not in shown]
    with st.expander("Other trainer metrics", expanded=bool(rest)):
        chosen = st.multiselect("Metrics", rest, default=rest[:6])
        grid = st.columns(3)
        for i, col in enumerate(chosen):  # one small chart each: their scales differ
            with grid[i % 3]:
                line_chart(logged[[col]], col, "")
        st.dataframe(logged)

pickers.refresh_when_done([name])
