"""The integrations' judge runner judges with any judge method (default: the group judge)."""

from __future__ import annotations

from fakes import LengthJudge

from rankgym.integrations.groups import JudgeRunner
from rankgym.judges.spec import default_spec
from rankgym.store import Store
from rankgym.types import Group, Message, Trajectory


def test_a_runner_with_another_judge_method_judges_and_stores_with_it(store_path):
    trajs = [
        Trajectory(id=f"t{i}", env_id="e", task_id="q",
                   messages=[Message(role="user", content="q"), Message(role="assistant", content=a)])
        for i, a in enumerate(["short", "a much longer answer"])
    ]  # fmt: skip
    g = Group(id="g", env_id="e", task_id="q", trajectories=trajs)
    spec = default_spec("baseline/longest")
    runner = JudgeRunner(spec, store_path, method=LengthJudge)
    try:
        (j,) = runner.judge_sync([g])
    finally:
        runner.close()
    assert j.status == "ok" and j.score_map() == {"t0": 0.0, "t1": 1.0}
    with Store(store_path, readonly=True) as s:
        stored = s.get_group("g", spec.spec_hash).judgement
    assert stored is not None and stored.score_map() == j.score_map()
