"""The embedded judge (local/smollm2) judging real ToolUse-v0 groups end to end through LiteLLM."""

from __future__ import annotations

import json

import pytest

from rankgym.cli import main
from rankgym.store import Store


def _rollout(store_path, policy: str, group_size: int) -> None:
    """Real ToolUse-v0 groups written by `rankgym rollout`."""
    argv = ["rollout", "--env", "rankgym/ToolUse-v0", "--policy", policy, "--tasks", "1",
            "--group-size", str(group_size), "--store", str(store_path), "--json", "-q"]  # fmt: skip
    assert main(argv) == 0


@pytest.mark.slow
def test_embedded_judge_end_to_end(store_path, capsys):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 2 cores shared by several processes: 1 thread is fastest
    try:
        _end_to_end(store_path, capsys)
    finally:
        torch.set_num_threads(threads)


def _end_to_end(store_path, capsys) -> None:
    _rollout(store_path, "oracle", 2)
    _rollout(store_path, "random", 3)
    capsys.readouterr()
    with Store(store_path) as store:
        groups = [store.get_group(gid) for gid in store.group_ids()]

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
