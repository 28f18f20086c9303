"""Agreement page: the tables of ``rankgym agreement`` (judge vs people, vs verifier, people vs
people, judge vs itself) with 95% cluster-bootstrap CIs, per environment and per judge spec,
and the groups where judge and people disagree most, each linking to its group.

All numbers come from ``rankgym.judges.agreement``; this page only lays them out. CIs here use
:data:`rankgym.dashboard.data.AGREEMENT_RESAMPLES` resamples, so their last digit can differ
from the CLI's.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import streamlit as st

from rankgym.dashboard import data, pickers
from rankgym.dashboard.render import md_escape, show_error
from rankgym.judges.agreement import Aggregate, AgreementReport, Disagreement

PAIR_TITLES = {
    "judge_vs_human": "Judge vs people",
    "judge_vs_verifier": "Judge vs verifiable reward",
    "human_vs_human": "People vs people",
    "judge_vs_self": "Judge vs itself (shuffled presentations)",
}


def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:+.3f}"


def fmt_ci(ci: tuple[float, float] | None) -> str:
    return "—" if not ci else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def metric_table(agg: Aggregate) -> pd.DataFrame:
    """One pair's metrics: micro and macro with their CIs."""
    return pd.DataFrame(
        [
            {
                "metric": m,
                "micro": fmt(v.micro),
                "micro 95% CI": fmt_ci(v.micro_ci),
                "macro": fmt(v.macro),
                "macro 95% CI": fmt_ci(v.macro_ci),
            }
            for m, v in agg.metrics.items()
        ]
    )


def summary_rows(report: AgreementReport, label: dict[str, str]) -> list[dict[str, Any]]:
    """Compact rows (one per comparison with data) for the per-env / per-spec tables."""
    rows = []
    for pair, agg in report.pairs.items():
        if not agg.n_groups:
            continue
        m = agg.metrics
        rows.append(
            label
            | {
                "comparison": PAIR_TITLES[pair],
                "groups": agg.n_groups,
                "comparisons": agg.n_units,
                "τ-b (micro)": fmt(m["kendall_tau_b"].micro),
                "τ-b 95% CI": fmt_ci(m["kendall_tau_b"].micro_ci),
                "pairwise acc.": fmt(m["pairwise_accuracy"].micro),
                "pairwise 95% CI": fmt_ci(m["pairwise_accuracy"].micro_ci),
                "top-1": fmt(m["top1"].micro),
                "spearman": fmt(m["spearman"].micro),
            }
        )
    return rows


st.title("Agreement")
key = data.cache_key()
specs = data.judge_specs(key)
if not specs:
    st.info("No judge specs in this store yet: run `rankgym judge --store PATH` first.")
    st.stop()
best = max(specs, key=lambda r: r["groups"])["hash"]
st.session_state.setdefault("pick_spec1", best)
spec_hash = pickers.pick_spec(allow_all=False)
env_id = pickers.pick_env()
envs = data.env_ids(key)

deadline = time.monotonic() + data.SLOW_WAIT_S
names: list[tuple] = []


name, res = data.agreement(key, spec_hash, env_id, deadline)
names.append(name)
if pickers.show_slow(res, "agreement"):
    report: AgreementReport = res.value
    st.caption(
        f"judge {md_escape(report.model or '—', 80)} · spec "
        f"{md_escape(report.spec_hash or '—')}"
        + (f" · env {md_escape(env_id, 80)}" if env_id else " · all envs")
    )
    c = st.columns(4)
    c[0].metric("groups", report.n_groups)
    c[1].metric("judged", report.n_judged)
    c[2].metric("unjudged (judge failed)", report.n_unjudged)
    c[3].metric("labeled by people", report.n_labeled)
    if report.skipped_rankings:  # damaged rows are left out, never a crash
        st.warning(
            f"{len(report.skipped_rankings)} damaged ranking row(s) left out: "
            + md_escape("; ".join(report.skipped_rankings[:5]), 600)
        )
    st.caption(
        "Kendall τ-b, Spearman, top-1 overlap and pairwise accuracy (ties count), micro = "
        "pooled over pairs, macro = mean over groups; 95% CIs from a bootstrap over groups. "
        "1 = perfect agreement; τ-b 0 = chance."
    )
    cols = st.columns(2)
    for i, (pair, agg) in enumerate(report.pairs.items()):
        with cols[i % 2]:
            st.markdown(f"**{PAIR_TITLES[pair]}**")
            if not agg.n_groups:
                st.caption(
                    "no data yet"
                    + (" — rank groups on the Blind ranking page" if "human" in pair else "")
                )
                continue
            st.caption(f"{agg.n_groups} groups · {agg.n_units} comparisons")
            st.dataframe(metric_table(agg), hide_index=True)

st.subheader("Where the judge and people disagree most")
name, res = data.disagreement_rows(key, spec_hash, env_id, 20, deadline)
names.append(name)
if pickers.show_slow(res, "the disagreement list"):
    worst: list[Disagreement] = res.value
    if not worst:
        st.info("No group is both judged by this spec and ranked by a person yet.")
    else:
        table = pd.DataFrame(
            [
                {
                    "group": r.group_id,
                    "env": r.env_id,
                    "task": r.task_id,
                    "people": r.n_labelers,
                    "pairwise acc.": r.pairwise_accuracy,
                    "τ-b": r.kendall_tau_b,
                    "top-1": r.top1,
                    "same first choice": bool(set(r.judge_top) & set(r.human_top)),
                }
                for r in worst
            ]
        )
        st.dataframe(table, hide_index=True)
        st.caption("Open a group to read it:")
        for r in worst:
            acc = r.pairwise_accuracy
            pickers.group_link(
                r.group_id,
                f"{r.group_id} · {r.env_id} · pairwise acc. "
                + ("—" if acc is None else f"{acc:.2f}")
                + f" · {r.n_labelers} labeler(s)",
            )


def breakdown(title: str, scopes: list[tuple[dict[str, str], str | None, str | None]]) -> None:
    """A table of summary rows, one agreement report per (label, spec, env) scope."""
    st.subheader(title)
    rows: list[dict[str, Any]] = []
    waiting = False
    for label, sp, e in scopes:
        name, res = data.agreement(key, sp, e, deadline)
        names.append(name)
        if res.error:
            show_error(res.error, prefix=f"{md_escape(next(iter(label.values())), 80)}: ")
        elif res.ready:
            rows += summary_rows(res.value, label)
            waiting |= not res.fresh
        else:
            waiting = True
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True)
    if waiting:
        st.caption("Some rows are still being computed or updated…")
    elif not rows:
        st.caption("No comparisons yet.")


breakdown("Per environment", [({"env": e}, spec_hash, e) for e in envs])
breakdown(
    "Per judge spec",
    [({"judge spec": data.spec_label(sp)}, sp["hash"], env_id) for sp in specs if sp["groups"]],
)

pickers.refresh_when_done(names)
