"""Compare judges on the same held-out pairs, with paired cluster-bootstrap CIs.

Every held-out pair (``rankgym.judges.judge_data``) is judged as a group of two, once in each
order, through LiteLLM (the product path: any model string works, ``local/...`` included),
with the same rubric for every judge. Per judge:

- ``pairwise_accuracy``: share of presentations where the labelled winner scores strictly
  higher (a tie counts as wrong; the labels never tie);
- ``position_consistency``: share of pairs whose two presentations order the two trajectories
  the same way (three-way: better, worse, tie), i.e. ``judge_vs_self`` of
  ``rankgym.judges.agreement`` restricted to the two orders.

Both are computed overall, per label source (``verifier``, ``human``) and per env (when there
are several). CIs are 95%
percentile intervals of a cluster bootstrap over **tasks** (pairs of one task move together);
the same resamples are used for every judge, so ``paired`` gives the CI of each difference
(judge minus the first judge), which is narrower than comparing two separate CIs.

A judge whose score of one attempt reads the rest of the group (a pointwise judge with answer
agreement) is given each pair among other attempts of its task (``peers`` of
:func:`judge_pairs`); only the pair's two scores are read.

What it does not do: judge groups larger than two (a trained pairwise judge would need
N(N-1)/2 calls per group; see ``pair_judge.score_pairs``), retry failed calls (a failure is
counted as a wrong and inconsistent answer and reported in ``errors``), or correct for multiple
comparisons.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from rankgym.types import Group, Trajectory

from .agreement import unit_stats
from .judge_data import PairItem, baselines
from .parse import parse_judge_output
from .prompt import build_prompt
from .spec import ensure_provider

Respond = Callable[[list[dict[str, str]]], str]


def pair_group(p: PairItem) -> Group:
    """The pair as a group of two (winner first)."""
    return Group(
        id=f"pair-{p.id}", env_id=p.env_id, task_id=p.task_id, trajectories=[p.winner, p.loser]
    )


def litellm_respond(model: str, max_tokens: int = 512) -> Respond:
    """A ``Respond`` calling ``model`` through LiteLLM at temperature 0, seed 0."""
    import litellm

    ensure_provider(model)

    def respond(messages: list[dict[str, str]]) -> str:
        r = litellm.completion(
            model=model, messages=messages, temperature=0.0, seed=0, max_tokens=max_tokens
        )
        return r.choices[0].message.content or ""

    return respond


Peers = Callable[[PairItem], list[Trajectory]]
"""Other attempts at a pair's task to show after the pair (for a judge whose score reads the
group: ``rankgym.judge_adapter.reads_group``)."""


def judge_pairs(
    respond: Respond,
    pairs: list[PairItem],
    rubric: str,
    progress: bool = False,
    desc: str = "",
    peers: Peers | None = None,
) -> list[dict[str, Any]]:
    """Scores of winner and loser for every pair in both orders (``None`` on a failed call).
    ``peers``: each pair is shown with these other attempts of its task after it (their
    scores are not read), for a judge whose score of one attempt reads the rest of the group."""
    rows = []
    bar = None
    if progress:
        bar = tqdm(total=2 * len(pairs), desc=desc or "judging", unit="pres", leave=False)
    for p in pairs:
        g = pair_group(p)
        rest = [t for t in (peers(p) if peers else []) if t.id not in (p.winner.id, p.loser.id)]
        if rest:
            g = g.model_copy(update={"trajectories": [*g.trajectories, *rest]})
        for winner_first in (True, False):
            order = [p.winner.id, p.loser.id] if winner_first else [p.loser.id, p.winner.id]
            order += [t.id for t in rest]
            prompt = build_prompt(g, rubric, order)
            row: dict[str, Any] = {"pair": p.id, "task": p.task_key, "source": p.source,
                                   "env": p.env_id, "winner_first": winner_first}  # fmt: skip
            try:
                parsed = parse_judge_output(respond(prompt.messages), list(prompt.labels))
                by_id = {prompt.labels[k]: v.score for k, v in parsed.items()}
                row.update(winner=by_id[p.winner.id], loser=by_id[p.loser.id], error=None)
            except Exception as e:  # counted, reported; the comparison goes on
                row.update(winner=None, loser=None, error=f"{type(e).__name__}: {e}"[:200])
            rows.append(row)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return rows


def _per_pair(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """pair id -> task, source, correct presentations (0..2), consistent (0/1)."""
    by_pair: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_pair[r["pair"]].append(r)
    out = {}
    for pid, rs in by_pair.items():
        ok = [r for r in rs if r["winner"] is not None]
        correct = sum(unit_stats([r["winner"], r["loser"]], [1, 0]).agree for r in ok)
        consistent = 0
        if len(ok) == 2:
            a, b = ok
            consistent = unit_stats([a["winner"], a["loser"]], [b["winner"], b["loser"]]).agree
        out[pid] = {"task": rs[0]["task"], "source": rs[0]["source"], "correct": correct,
                    "n": len(rs), "consistent": consistent}  # fmt: skip
    return out


def _ci(d: np.ndarray) -> list[float] | None:
    d = d[np.isfinite(d)]
    return [float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975))] if len(d) else None


def compare(
    results: dict[str, list[dict[str, Any]]],
    pairs: list[PairItem],
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Metrics with CIs per judge and paired differences against the first judge.

    ``results`` maps a judge name to :func:`judge_pairs` rows over the same ``pairs``.
    """
    names = list(results)
    per = {n: _per_pair(results[n]) for n in names}
    sources = sorted({p.source for p in pairs})
    envs = sorted({p.env_id for p in pairs}) if len({p.env_id for p in pairs}) > 1 else []
    report: dict[str, Any] = {"n_pairs": len(pairs), "n_tasks": len({p.task_key for p in pairs}),
                              "baselines": baselines(pairs), "judges": {}, "paired": {}}  # fmt: skip
    rng = np.random.default_rng(seed)
    for scope in ["all", *sources, *envs]:
        ids = [p.id for p in pairs if scope in ("all", p.source, p.env_id)]
        if not ids:
            continue
        tasks = sorted({per[names[0]][i]["task"] for i in ids})
        t_index = {t: k for k, t in enumerate(tasks)}
        # per task sums: correct, presentations, consistent, pairs
        sums = {n: np.zeros((len(tasks), 4)) for n in names}
        for n in names:
            for i in ids:
                r = per[n][i]
                sums[n][t_index[r["task"]]] += [r["correct"], r["n"], r["consistent"], 1]
        counts = rng.multinomial(len(tasks), [1 / len(tasks)] * len(tasks), size=n_resamples)
        draws = {}
        for n in names:
            tot, boot = sums[n].sum(0), counts @ sums[n]
            with np.errstate(invalid="ignore", divide="ignore"):
                draws[n] = {"pairwise_accuracy": boot[:, 0] / boot[:, 1],
                            "position_consistency": boot[:, 2] / boot[:, 3]}  # fmt: skip
            entry = report["judges"].setdefault(n, {})
            entry[scope] = {
                "pairwise_accuracy": float(tot[0] / tot[1]),
                "pairwise_accuracy_ci": _ci(draws[n]["pairwise_accuracy"]) if len(tasks) > 1 else None,
                "position_consistency": float(tot[2] / tot[3]),
                "position_consistency_ci": _ci(draws[n]["position_consistency"]) if len(tasks) > 1 else None,
                "pairs": int(tot[3]),
                "tasks": len(tasks),
                "errors": sum(1 for r in results[n] if r["error"] and scope in ("all", r["source"], r["env"])),
            }  # fmt: skip
        for n in names[1:]:
            key = f"{n} - {names[0]}"
            entry = report["paired"].setdefault(key, {})
            for m in ("pairwise_accuracy", "position_consistency"):
                diff = report["judges"][n][scope][m] - report["judges"][names[0]][scope][m]
                ci = _ci(draws[n][m] - draws[names[0]][m]) if len(tasks) > 1 else None
                entry.setdefault(scope, {})[m] = {"diff": diff, "ci": ci}
    return report


def format_comparison(report: dict[str, Any]) -> str:
    """Plain-text tables of :func:`compare` output."""

    def ci(c: list[float] | None) -> str:
        return f"[{c[0]:.2f}, {c[1]:.2f}]" if c else "-"

    b = report["baselines"]
    lines = [
        f"held-out: {report['n_pairs']} pairs of {report['n_tasks']} tasks, each in both orders; "
        f"content-blind rules: first wins {b['first_wins']}, longer wins "
        + (f"{b['longer_wins']:.3f}" if b["longer_wins"] is not None else "-"),
        f"{'judge':<44} {'scope':<22} {'pairwise acc':>12} {'95% CI':<13} "
        f"{'pos. consist.':>13} {'95% CI':<13} errors",
    ]
    for name, scope, v in _by_scope(report["judges"]):
        lines.append(
            f"{name[-44:]:<44} {scope[-22:]:<22} {v['pairwise_accuracy']:>12.3f} "
            f"{ci(v['pairwise_accuracy_ci']):<13} {v['position_consistency']:>13.3f} "
            f"{ci(v['position_consistency_ci']):<13} {v['errors']}"
        )
    for key, scope, ms in _by_scope(report["paired"]):
        lines.append(
            f"paired {key[-60:]} ({scope}): accuracy {ms['pairwise_accuracy']['diff']:+.3f} "
            f"{ci(ms['pairwise_accuracy']['ci'])}, consistency "
            f"{ms['position_consistency']['diff']:+.3f} {ci(ms['position_consistency']['ci'])}"
        )
    return "\n".join(lines)


def _by_scope(table: dict[str, dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """``(name, scope, value)`` for every scope of every name in a ``{name: {scope: value}}``."""
    return [(name, scope, v) for name, scopes in table.items() for scope, v in scopes.items()]
