"""Agreement metrics: equal to scipy on tied data, sane aggregates, honest bootstrap CIs."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from judge_fakes import make_group
from scipy import stats

from rankgym.judges.agreement import (
    METRICS,
    PAIRS,
    AgreementReport,
    aggregate,
    agreement_report,
    disagreements,
    format_report,
    kendall_tau_b,
    pairwise_accuracy,
    spearman,
    top1_agreement,
)
from rankgym.judges.spec import default_spec
from rankgym.store import Store
from rankgym.types import Judgement, TrajectoryScore


def test_match_scipy_on_random_rankings_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 9))
        a = rng.integers(0, 4, n).astype(float)  # few levels: many ties
        b = rng.integers(0, 4, n).astype(float)
        with warnings.catch_warnings():  # scipy warns on constant input and returns nan
            warnings.simplefilter("ignore")
            tau = stats.kendalltau(a, b).statistic
            rho = stats.spearmanr(a, b).statistic
        for ours, theirs in ((kendall_tau_b(a, b), tau), (spearman(a, b), rho)):
            if math.isnan(theirs):
                assert math.isnan(ours)
            else:
                assert ours == pytest.approx(theirs, abs=1e-12)


def test_top1_and_pairwise_with_ties():
    assert top1_agreement([3, 1, 2], [5, 0, 0]) == 1.0
    assert top1_agreement([3, 3, 1], [3, 0, 0]) == 0.5  # {0,1} vs {0}
    assert top1_agreement([1, 2, 3], [3, 2, 1]) == 0.0
    assert pairwise_accuracy([1, 2, 3], [1, 2, 3]) == 1.0
    assert pairwise_accuracy([1, 2, 3], [3, 2, 1]) == 0.0
    # pairs: (0,1) tie vs tie -> agree; (0,2) < vs < agree; (1,2) < vs tie -> disagree
    assert pairwise_accuracy([1, 1, 2], [0, 0, 0.5 + 0.5]) == pytest.approx(1.0)
    assert pairwise_accuracy([1, 1, 2], [0, 0, 0]) == pytest.approx(1 / 3)


def test_micro_macro_aggregates():
    units = [("g1", [1, 2, 3], [1, 2, 3]), ("g2", [1, 2, 3, 4], [4, 3, 2, 1]), ("g3", [1], [1])]
    out = aggregate(units, n_resamples=200)
    assert out.n_groups == 2  # single-item unit skipped
    tau = out.metrics["kendall_tau_b"]
    assert tau.macro == pytest.approx(0.0)
    assert tau.micro == pytest.approx((3 - 6) / 9)  # pooled pairs: 3 concordant, 6 discordant
    assert tau.micro_ci[0] <= tau.micro <= tau.micro_ci[1]
    pa = out.metrics["pairwise_accuracy"]
    assert pa.micro == pytest.approx(3 / 9) and pa.macro == pytest.approx(0.5)
    empty = aggregate([])
    assert empty.n_groups == 0 and empty.metrics["spearman"].micro is None


def test_cluster_bootstrap_ci_covers_truth_in_simulation():
    """Judge = truth + noise; the 95% CI of macro tau should cover the population value."""
    rng = np.random.default_rng(1)

    def sample_groups(n_groups):
        units = []
        for g in range(n_groups):
            truth = rng.normal(size=6)
            judge = truth + rng.normal(scale=1.0, size=6)
            units.append((f"g{g}", judge, truth))
        return units

    # population value from a large sample
    big = aggregate(sample_groups(4000), n_resamples=10)
    true_tau = big.metrics["kendall_tau_b"].macro
    covered, trials = 0, 40
    for t in range(trials):
        out = aggregate(sample_groups(40), n_resamples=300, seed=t)
        lo, hi = out.metrics["kendall_tau_b"].macro_ci
        covered += lo <= true_tau <= hi
    assert covered / trials >= 0.85


def _store_with_labels(path):
    store = Store(path)
    spec = default_spec("fakejudge/m", rubric="r")
    store.put_judge_spec(spec)
    groups = []
    for k in range(4):
        g = make_group(3, gid=f"grp-{k}")
        for t in g.trajectories:
            t.id = f"{g.id}-{t.id}"
        store.put_group(g)
        groups.append(g)
        ids = [t.id for t in g.trajectories]
        # judge: traj 0 > 1 > 2 on groups 0-2; reversed on group 3 (a disagreement)
        scores = [0.9, 0.5, 0.1] if k < 3 else [0.1, 0.5, 0.9]
        pres = [
            {"order": ids, "scores": dict(zip(ids, scores, strict=True))},
            {"order": ids[::-1], "scores": dict(zip(ids, [s * 0.9 for s in scores], strict=True))},
        ]
        store.put_judgement(
            Judgement(
                group_id=g.id,
                spec_hash=spec.spec_hash,
                scores=[
                    TrajectoryScore(trajectory_id=i, score=s)
                    for i, s in zip(ids, scores, strict=True)
                ],
                presentations=pres,
            )
        )
        store.add_human_ranking(g.id, "ann", {ids[0]: 1, ids[1]: 2, ids[2]: 3})
        store.add_human_ranking(g.id, "bob", {ids[0]: 1, ids[1]: 2, ids[2]: 2})
    return store, spec


def test_agreement_report_from_store(store_path):
    store, spec = _store_with_labels(store_path)
    rep = agreement_report(store, n_resamples=200)
    assert rep.spec_hash == spec.spec_hash and rep.model == "fakejudge/m"
    assert (rep.n_groups, rep.n_judged, rep.n_labeled) == (4, 4, 4)
    jh = rep.pairs["judge_vs_human"]
    assert jh.n_groups == 4 and jh.n_units == 8
    assert 0 < jh.metrics["kendall_tau_b"].macro < 1
    assert rep.pairs["judge_vs_self"].metrics["kendall_tau_b"].micro == pytest.approx(1.0)
    hh = rep.pairs["human_vs_human"]
    assert hh.n_units == 4 and hh.metrics["top1"].micro == pytest.approx(1.0)
    jv = rep.pairs["judge_vs_verifier"]  # traj 0 has reward 1, the others 0
    assert jv.n_groups == 4 and jv.metrics["top1"].macro == pytest.approx(0.75)
    assert jv.metrics["top1"].micro == pytest.approx(3 / 5)  # summed inter / union
    text = format_report(rep)
    assert "judge_vs_human" in text and "kendall_tau_b" in text
    assert agreement_report(store, spec_hash=spec.spec_hash[:6], env_id="nope").n_groups == 0


def test_disagreements_lists_worst_group_first(store_path):
    store, _ = _store_with_labels(store_path)
    rows = disagreements(store)
    assert rows[0].group_id == "grp-3" and rows[0].kendall_tau_b < 0
    assert rows[0].judge_top == ["grp-3-traj-2"] and rows[0].human_top == ["grp-3-traj-0"]
    assert rows[0].n_labelers == 2 and len(rows) == 4


def test_bootstrap_matches_scipy_percentile_bootstrap():
    rng = np.random.default_rng(2)
    units = [(f"g{g}", rng.normal(size=5), rng.normal(size=5)) for g in range(60)]
    ours = aggregate(units, n_resamples=4000, seed=3).metrics["kendall_tau_b"]
    per_group = np.array([kendall_tau_b(a, b) for _, a, b in units])
    ref = stats.bootstrap((per_group,), np.mean, method="percentile", n_resamples=4000, rng=4)
    assert ours.macro == pytest.approx(per_group.mean())
    assert ours.macro_ci == pytest.approx(tuple(ref.confidence_interval), abs=0.03)


# ``rankgym agreement --json`` as the dict-building code (before AgreementReport) wrote it: its
# key order and nesting, with small made-up numbers (one judged group, no people).
OLD_JSON = (
    '{"spec_hash": "abc", "model": "fakejudge/m", "env_id": null, "n_groups": 2, '
    '"n_judged": 1, "n_unjudged": 1, "n_labeled": 0, "pairs": {"judge_vs_human": '
    '{"n_groups": 0, "n_units": 0, "metrics": {"kendall_tau_b": {"micro": null, "micro_ci": '
    'null, "macro": null, "macro_ci": null}, "spearman": {"micro": null, "micro_ci": null, '
    '"macro": null, "macro_ci": null}, "top1": {"micro": null, "micro_ci": null, "macro": '
    'null, "macro_ci": null}, "pairwise_accuracy": {"micro": null, "micro_ci": null, "macro": '
    'null, "macro_ci": null}}}, "judge_vs_verifier": {"n_groups": 1, "n_units": 1, "metrics": '
    '{"kendall_tau_b": {"micro": 0.5, "micro_ci": null, "macro": 0.5, "macro_ci": null}, '
    '"spearman": {"micro": 0.6, "micro_ci": null, "macro": 0.6, "macro_ci": null}, "top1": '
    '{"micro": 1.0, "micro_ci": null, "macro": 1.0, "macro_ci": null}, "pairwise_accuracy": '
    '{"micro": 0.75, "micro_ci": [0.5, 1.0], "macro": 0.75, "macro_ci": [0.5, 1.0]}}}}}'
)


def test_an_old_agreement_json_reads_back_and_writes_the_same_bytes():
    rep = AgreementReport.from_dict(json.loads(OLD_JSON))
    jv = rep.pairs["judge_vs_verifier"]
    assert (rep.n_judged, rep.n_unjudged, jv.n_units) == (1, 1, 1)
    assert jv.metrics["pairwise_accuracy"].macro_ci == (0.5, 1.0)
    assert json.dumps(rep.to_dict()) == OLD_JSON
    assert "judge_vs_verifier: 1 groups, 1 comparisons" in format_report(rep)


def test_the_report_and_the_disagreements_serialise_to_their_documented_shape(store_path):
    store, _ = _store_with_labels(store_path)
    out = json.loads(json.dumps(agreement_report(store, n_resamples=50).to_dict()))
    assert list(out) == ["spec_hash", "model", "env_id", "n_groups", "n_judged", "n_unjudged",
                         "n_labeled", "pairs"]  # fmt: skip
    assert list(out["pairs"]) == list(PAIRS)
    for agg in out["pairs"].values():
        assert list(agg["metrics"]) == list(METRICS)
        for v in agg["metrics"].values():
            assert list(v) == ["micro", "micro_ci", "macro", "macro_ci"]
            assert v["micro_ci"] is None or isinstance(v["micro_ci"], list)
    assert AgreementReport.from_dict(out) == agreement_report(store, n_resamples=50)
    row = disagreements(store)[0].to_dict()
    assert list(row) == ["group_id", "env_id", "task_id", "n_labelers", "kendall_tau_b",
                         "pairwise_accuracy", "top1", "judge_top", "human_top", "judge_scores",
                         "human_mean_rank"]  # fmt: skip
    assert json.loads(json.dumps(row)) == row
