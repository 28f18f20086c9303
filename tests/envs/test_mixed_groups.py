"""Mixed groups (`--policy a,b,c`) and the noisy oracle (`oracle~P`)."""

from __future__ import annotations

import pytest

from rankgym.cli import main
from rankgym.envs.policies import make_policy
from rankgym.envs.rollout import rollout_groups
from rankgym.errors import UserError
from rankgym.store import Store

ENV = "rankgym/ToolUse-v0"


def _policies(group) -> list[str | None]:
    return [t.turns[0].policy if t.turns else None for t in group.trajectories]


def test_a_comma_list_fills_each_group_round_robin_and_each_trajectory_names_its_policy():
    groups = rollout_groups(
        ENV, make_policy("oracle,random"), n_tasks=3, group_size=4, progress=False
    )
    for g in groups:
        assert _policies(g) == ["oracle", "random", "oracle", "random"]
        vr = [t.verifiable_reward for t in g.trajectories]
        assert vr[0] == 1.0 and vr[1] == 0.0  # the verifier varies inside the group


def test_noisy_oracle_is_the_oracle_at_0_and_the_random_policy_at_1():
    clean = rollout_groups(ENV, make_policy("oracle~0"), n_tasks=4, group_size=2, progress=False)
    assert all(t.verifiable_reward == 1.0 for g in clean for t in g.trajectories)
    assert _policies(clean[0]) == ["oracle~0", "oracle~0"]
    noisy = rollout_groups(ENV, make_policy("oracle~1"), n_tasks=4, group_size=2, progress=False)
    assert sum(t.verifiable_reward or 0 for g in noisy for t in g.trajectories) < 2


def test_noisy_oracle_rollouts_are_reproducible():
    a = rollout_groups(ENV, make_policy("oracle~0.5"), n_tasks=3, group_size=3, progress=False)
    b = rollout_groups(ENV, make_policy("oracle~0.5"), n_tasks=3, group_size=3, progress=False)
    assert [g.content_hash() for g in a] == [g.content_hash() for g in b]


@pytest.mark.parametrize("spec", ["oracle~2", "oracle~x", "oracle,nonsense"])
def test_bad_policy_specs_are_user_errors(spec):
    with pytest.raises(UserError):
        make_policy(spec)


def test_rollout_cli_with_mixed_policies_exports_the_policy_column(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    db, out = tmp_path / "s.db", tmp_path / "t.parquet"
    args = ["rollout", "--env", ENV, "--policy", "oracle,random,oracle~0.5", "--tasks", "2"]
    assert main([*args, "--group-size", "3", "--store", str(db), "-q"]) == 0
    with Store(db) as store:
        g = store.get_group(store.group_ids()[0])
        assert _policies(g) == ["oracle", "random", "oracle~0.5"]
    assert main(["export", "--store", str(db), "--out", str(out), "--format", "parquet"]) == 0
    assert pq.read_table(out).column("policy").to_pylist()[:3] == ["oracle", "random", "oracle~0.5"]
