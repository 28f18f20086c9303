"""`rankgym judge-check`: calibration groups of known order, judged in several orders.

Two scripted judges (real ``litellm.CustomLLM`` providers, see judge_fakes): one that reads the
trajectories (scores the known order) and one that reads only positions (T1 best). The check
must tell them apart.
"""

from __future__ import annotations

import json
import re

import pytest
from judge_fakes import labels_in

from rankgym.cli import main
from rankgym.judges.spec import default_spec
from rankgym.store import Store
from rankgym.trainer.judge_check import (
    CheckConfig,
    CheckReport,
    Estimate,
    check_orders,
    known_order,
    run_check,
)

ENV = "rankgym/ToolUse-v0"


def position_judge(messages) -> str:
    """Scores by position only: T1 gets 1, the last gets 0."""
    labels = labels_in(messages)
    n = max(1, len(labels) - 1)
    return json.dumps(
        {"scores": [{"trajectory_id": lab, "score": 1 - k / n} for k, lab in enumerate(labels)]}
    )


def content_judge(messages) -> str:
    """Reads each block: a right final answer scores high, tool errors cost a little."""
    user = messages[1]["content"]
    blocks = dict(re.findall(r'<trajectory id="(T\d+)">\n(.*?)\n</trajectory>', user, re.S))
    out = []
    for lab, body in blocks.items():
        score = 0.8 if "The answer is" in body else 0.1
        score -= 0.05 * body.count("Error")
        out.append({"trajectory_id": lab, "score": max(0.0, score)})
    return json.dumps({"scores": out})


def _check(fake, script, tmp_path, permutations=4):
    fake.script = [script]
    cfg = CheckConfig(env_id=ENV, groups=8, group_size=4, permutations=permutations, resamples=500)
    with Store(tmp_path / "check.db") as store:
        return run_check(cfg, default_spec("fakejudge/m"), store)


def test_a_position_biased_judge_has_no_consistency_and_a_tau_ci_that_includes_0(fake, tmp_path):
    r = _check(fake, position_judge, tmp_path)
    assert r.judged == 8 and r.unjudged == 0
    assert abs(r.position_consistency.value) < 0.3  # 1.0 for a consistent judge
    assert r.kendall_tau.ci_low <= 0 <= r.kendall_tau.ci_high
    assert r.by_order["rollout"].kendall_tau.value > 0.5  # best first: looks great
    assert r.by_order["reversed"].kendall_tau.value < -0.5  # ... until reversed
    assert r.can_judge is False


def test_a_judge_that_reads_the_trajectories_passes_with_full_consistency(fake, tmp_path):
    r = _check(fake, content_judge, tmp_path)
    assert r.position_consistency.value == pytest.approx(1.0)
    assert r.kendall_tau.ci_low > 0.3 and r.can_judge is True
    scores = list(r.mean_score_by_noise.values())
    assert scores[0] > scores[-1]  # the clean oracle scores above the random policy


def test_a_rerun_reuses_groups_and_cached_judgements(fake, tmp_path):
    first = _check(fake, content_judge, tmp_path, permutations=3)
    calls = len(fake.requests)
    again = _check(fake, content_judge, tmp_path, permutations=3)
    assert len(fake.requests) == calls and again.calls == 0
    assert again.kendall_tau == first.kendall_tau


def test_orders_are_rollout_reversed_then_distinct_shuffles_and_twins_tie_in_the_truth(tmp_path):
    from rankgym.trainer.judge_check import calibration_groups

    (g,) = calibration_groups(CheckConfig(env_id=ENV, groups=1, group_size=4))
    ids = [t.id for t in g.trajectories]
    orders = check_orders(g, 4, seed=0)
    assert orders[0] == ids and orders[1] == ids[::-1] and len({tuple(o) for o in orders}) == 4
    truth = known_order(g)
    assert truth[ids[0]] >= max(truth.values())  # the clean oracle is (one of) the best


def test_judge_check_cli_prints_json_with_cis_and_the_dashboard_sees_the_groups(
    fake, tmp_path, capsys
):
    fake.script = [content_judge]
    db = tmp_path / "c.db"
    args = ["judge-check", "--env", ENV, "--judge", "fakejudge/m", "--groups", "4"]
    assert main([*args, "--store", str(db), "--json", "--resamples", "200"]) == 0
    out = json.loads(capsys.readouterr().out)
    for k in ("pairwise_accuracy", "kendall_tau", "top1", "position_consistency"):
        assert set(out[k]) == {"value", "ci_low", "ci_high"}
    assert list(out)[-15:] == [
        "env", "judge", "spec_hash", "groups", "group_size", "permutations", "seed", "calls",
        "cached", "input_tokens", "cost_usd", "errors", "rollout_s", "seconds", "store",
    ]  # fmt: skip
    assert CheckReport.from_dict(out).to_dict() == {k: v for k, v in out.items() if k != "store"}
    assert main(["agreement", "--store", str(db), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["pairs"]["judge_vs_verifier"]["n_groups"] >= 1
    assert rep["pairs"]["judge_vs_self"]["n_groups"] == 4


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--groups", "1"], "--groups"), (["--permutations", "1"], "--permutations"),
     (["--env", "rankgym/Nope-v0"], "Nope")],
)  # fmt: skip
def test_judge_check_refuses_bad_input_in_one_line(tmp_path, capsys, flags, named):
    args = ["judge-check", "--env", ENV, "--judge", "fakejudge/m", "--store", str(tmp_path / "x")]
    assert main([*args, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert named in err and "Traceback" not in err and len(err.splitlines()) == 1


# A judge-check report as the dict-building code wrote it to the trainer's judge-check cache
# (``$RANKGYM_CACHE/judge-checks/<key>.json``) and to a run's judge_check.json, with the keys
# the preflight adds (``decision``, ``message``, ``forced``).
OLD_CHECK = (
    '{"pairwise_accuracy": {"value": 0.8, "ci_low": 0.7, "ci_high": 0.9}, "kendall_tau": '
    '{"value": 0.6, "ci_low": 0.4, "ci_high": 0.8}, "top1": {"value": 1.0, "ci_low": 1.0, '
    '"ci_high": 1.0}, "position_consistency": {"value": null, "ci_low": null, "ci_high": null}, '
    '"by_order": {"rollout": {"pairwise_accuracy": {"value": 0.8, "ci_low": null, "ci_high": '
    'null}, "kendall_tau": {"value": 0.6, "ci_low": null, "ci_high": null}, "top1": {"value": '
    '1.0, "ci_low": null, "ci_high": null}}}, "averaged": {"pairwise_accuracy": {"value": 0.8, '
    '"ci_low": 0.7, "ci_high": 0.9}, "kendall_tau": {"value": 0.6, "ci_low": 0.4, "ci_high": '
    '0.8}, "top1": {"value": 1.0, "ci_low": 1.0, "ci_high": 1.0}}, "mean_score_by_noise": '
    '{"0": 0.9, "1": 0.2}, "mean_verifiable_by_noise": {"0": 1.0, "1": 0.0}, "can_judge": true, '
    '"judged": 8, "unjudged": 0, "env": "rankgym/ToolUse-v0", "judge": "local/smollm2", '
    '"spec_hash": "abc", "groups": 8, "group_size": 4, "permutations": 3, "seed": 0, "calls": '
    '24, "cached": 0, "input_tokens": 9000, "cost_usd": null, "errors": [], "rollout_s": 1.5, '
    '"seconds": 60.2, "decision": "ok", "message": "judge-check of ...", "forced": false}'
)


def test_an_old_cached_judge_check_reads_back_into_the_record():
    old = json.loads(OLD_CHECK)
    r = CheckReport.from_dict(old)
    assert r.kendall_tau == Estimate(0.6, 0.4, 0.8) and r.can_judge and r.calls == 24
    assert r.position_consistency.value is None and list(r.by_order) == ["rollout"]
    assert r.averaged.top1.ci_low == 1.0 and r.mean_score_by_noise == {"0": 0.9, "1": 0.2}
    added = ("decision", "message", "forced")
    assert json.dumps(r.to_dict()) == json.dumps({k: v for k, v in old.items() if k not in added})
