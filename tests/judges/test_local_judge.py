"""The embedded judge (local/smollm2) judging real ToolUse-v0 groups end to end through LiteLLM."""

from __future__ import annotations

import json

import pytest

from rankgym.cli import main
from rankgym.store import Store
from rankgym.types import Group


def _real_groups(n_tasks: int = 2) -> list[Group]:
    """Oracle and random episodes of the same ToolUse tasks, merged into mixed groups."""
    from rankgym.envs.policies import OraclePolicy, RandomPolicy
    from rankgym.envs.rollout import rollout_groups

    env = "rankgym/ToolUse-v0"
    kw = {"n_tasks": n_tasks, "group_size": 2, "seed": 3, "progress": False}
    good = rollout_groups(env, OraclePolicy(), run_id="oracle", **kw)
    bad = rollout_groups(env, RandomPolicy(seed=1), run_id="random", **kw)
    groups = []
    for g, b in zip(good, bad, strict=True):
        assert g.task_id == b.task_id
        trajs = [g.trajectories[0], b.trajectories[0], g.trajectories[1], b.trajectories[1]]
        groups.append(Group(id=g.id, run_id="mixed", env_id=g.env_id, task_id=g.task_id, trajectories=trajs))
    return groups


@pytest.mark.slow
def test_embedded_judge_end_to_end(store_path, capsys):
    import torch

    torch.set_num_threads(1)  # 2 cores shared by several processes: 1 thread is fastest
    store = Store(store_path)
    groups = _real_groups()
    store.put_groups(groups)
    store.close()

    assert main(["judge", "--store", str(store_path), "--json", "-q"]) == 0  # default local/smollm2
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["model"] == "local/smollm2"
    assert (out["judged"], out["unjudged"], out["calls"]) == (2, 0, 2)
    assert out["input_tokens"] > 500 and out["output_tokens"] > 0 and out["cost_usd"] == 0

    store = Store(store_path)
    for g in groups:
        (j,) = store.judgements(group_id=g.id, status="ok")
        assert {s.trajectory_id for s in j.scores} == {t.id for t in g.trajectories}
        assert all(0.0 <= s.score <= 1.0 for s in j.scores)
        assert j.presentations[0]["raw_response"].startswith('{"scores"')
    # the spec names the model and the rubric; judging again is free (nothing left, all cached)
    spec = store.get_judge_spec(out["spec_hash"])
    assert spec.model == "local/smollm2" and "goal" in spec.rubric
    store.close()
    assert main(["judge", "--store", str(store_path), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["calls"] == 0
