"""The rollout driver and `rankgym rollout`: groups, turns, errors, determinism, store, resume."""

from __future__ import annotations

import json
import re

import pytest

from rankgym.cli import main
from rankgym.envs import Env, Task
from rankgym.envs.policies import (
    EpisodeContext,
    Generation,
    OraclePolicy,
    RandomPolicy,
    TransformersPolicy,
)
from rankgym.envs.rollout import rollout_groups, rollout_to_store, select_tasks, summarize
from rankgym.store import Store

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


class AddEnv(Env):
    """Tiny env: "What is a + b?"; the answer is the last number of the final reply."""

    env_id = "test/Add-v0"
    max_turns = 3
    tools = [add]
    system_prompt = "Add numbers."
    success_threshold = 1.0

    def tasks(self, split="train"):
        base = 0 if split == "train" else 100
        return [
            Task(
                id=f"add-{base + i}",
                prompt=f"What is {base + i} + {i}?",
                answer=base + 2 * i,
                split=split,
            )
            for i in range(6)
        ]

    def verify(self, task, answer, state):
        nums = re.findall(r"-?\d+", answer or "")
        return float(bool(nums) and int(nums[-1]) == task.answer)

    def hack_signals_for(self, task, state):
        return ["no_tool_used"] if state.tool_successes == 0 else []

    def oracle(self, task):
        a, b = (int(x) for x in re.findall(r"\d+", task.prompt))
        call = {"name": "add", "arguments": json.dumps({"a": a, "b": b})}
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "o0", "type": "function", "function": call}],
            },
            {"role": "assistant", "content": f"It is {a + b}."},
        ]


class FlakyEnv(AddEnv):
    """Raises in step for task add-1 and in reset for task add-2."""

    def reset(self, *, seed=None, options=None):
        if (options or {}).get("task_id") == "add-2":
            raise RuntimeError("reset broke")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.state.task.id == "add-1":
            raise ValueError("step broke")
        return super().step(action)


class PickyPolicy(OraclePolicy):
    """The oracle, except that any batch containing task add-3 raises."""

    def generate(self, batch, tools, contexts=None):
        if any(c.task.id == "add-3" for c in contexts):
            raise RuntimeError("cannot do add-3")
        return super().generate(batch, tools, contexts)


@pytest.fixture(scope="module")
def tiny_policy(tiny, tokenizer):
    return TransformersPolicy(tiny, tokenizer, name="tiny@step0", max_new_tokens=6, autocast=False)


def test_oracle_rollout_groups_shape_and_turns():
    groups = rollout_groups(
        AddEnv, OraclePolicy(), n_tasks=4, group_size=3, run_id="r", step=2, progress=False
    )
    assert [g.task_id for g in groups] == [
        t.id for t in select_tasks(AddEnv().tasks(), n_tasks=4, step=2)
    ]
    for g in groups:
        assert (g.run_id, g.step, g.env_id, len(g.trajectories)) == ("r", 2, "test/Add-v0", 3)
        assert len({t.seed for t in g.trajectories}) == 3
        for t in g.trajectories:
            assert t.error is None and t.verifiable_reward == 1.0 and not t.truncated
            assert [m.role for m in t.messages] == [
                "system",
                "user",
                "assistant",
                "tool",
                "assistant",
            ]
            assert [turn.message_index for turn in t.turns] == [2, 4]
            assert all(turn.policy == "oracle" for turn in t.turns)
            assert t.metrics["turns"] == 2 and t.metrics["tool_calls"] == 1
            assert t.metrics["tool_errors"] == 0 and t.metrics["wall_time_s"] >= 0
            assert t.hack_signals == []
    s = summarize(groups, wall_s=1.0)
    assert (s["groups"], s["trajectories"], s["errors"], s["success_rate"]) == (4, 12, 0, 1.0)


def test_ids_and_seeds_are_deterministic():
    kw = dict(n_tasks=3, group_size=2, run_id="r", seed=5, progress=False)
    a = rollout_groups(AddEnv, RandomPolicy(seed=1), **kw)
    b = rollout_groups(AddEnv, RandomPolicy(seed=1), **kw)
    assert [g.id for g in a] == [g.id for g in b]
    assert [t.id for g in a for t in g.trajectories] == [t.id for g in b for t in g.trajectories]
    assert [g.model_dump(exclude={"trajectories"}) for g in a] == [
        g.model_dump(exclude={"trajectories"}) for g in b
    ]
    assert [[m.model_dump() for m in t.messages] for g in a for t in g.trajectories] == [
        [m.model_dump() for m in t.messages] for g in b for t in g.trajectories
    ]
    c = rollout_groups(AddEnv, RandomPolicy(seed=1), **{**kw, "seed": 6})
    assert {g.id for g in a}.isdisjoint(g.id for g in c)


def test_random_policy_rarely_succeeds_and_never_crashes():
    groups = rollout_groups(
        AddEnv, RandomPolicy(seed=0), group_size=8, split="test", progress=False
    )
    trajs = [t for g in groups for t in g.trajectories]
    assert len(trajs) == 48 and all(t.error is None for t in trajs)
    assert summarize(groups, 1.0)["success_rate"] < 0.1
    assert any(t.metrics["tool_calls"] for t in trajs)
    assert any("no_tool_used" in t.hack_signals for t in trajs)


def test_env_and_policy_errors_are_recorded_not_raised():
    groups = rollout_groups(
        FlakyEnv,
        PickyPolicy(),
        task_ids=["add-0", "add-1", "add-2", "add-3"],
        group_size=2,
        progress=False,
    )
    by_task = {g.task_id: g.trajectories for g in groups}
    assert all(t.error is None and t.verifiable_reward == 1.0 for t in by_task["add-0"])
    assert all("env.step: ValueError: step broke" in t.error for t in by_task["add-1"])
    for t in by_task["add-1"]:  # the generated turn is kept, with its message
        assert [t.messages[turn.message_index].role for turn in t.turns] == ["assistant"]
    assert all(t.error.startswith("env.reset: RuntimeError") for t in by_task["add-2"])
    assert all(
        t.error == "policy.generate: RuntimeError: cannot do add-3" for t in by_task["add-3"]
    )
    assert all(t.verifiable_reward is None for t in by_task["add-3"])
    assert summarize(groups, 1.0)["errors"] == 6


def test_env_that_never_ends_is_stopped():
    class Endless(AddEnv):
        def step(self, action):
            call = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 1}}</tool_call>'
            new, r, _, _, info = super().step(call)
            self.state.done = False  # a buggy env: never ends
            return new, r, False, False, info

    (g,) = rollout_groups(Endless, RandomPolicy(), n_tasks=1, group_size=1, progress=False)
    t = g.trajectories[0]
    assert t.truncated and "did not end" in t.error and len(t.turns) == Endless.max_turns + 2
    (g,) = rollout_groups(
        Endless, RandomPolicy(), n_tasks=1, group_size=1, progress=False, max_turns=2
    )
    assert g.trajectories[0].truncated and g.trajectories[0].error is None


def test_transformers_rollout_keeps_tokens_and_is_batch_independent(tiny_policy):
    kw = dict(n_tasks=2, group_size=3, seed=3, progress=False)
    together = rollout_groups(AddEnv, tiny_policy, **kw)
    one_by_one = rollout_groups(AddEnv, tiny_policy, max_concurrent=1, **kw)
    for g in together:
        for t in g.trajectories:
            assert t.error is None and t.turns
            for turn in t.turns:
                assert t.messages[turn.message_index].role == "assistant"
                assert turn.prompt_token_ids and turn.policy == "tiny@step0"
                assert len(turn.completion_token_ids) == len(turn.completion_logprobs) >= 1
            assert t.metrics["completion_tokens"] == sum(
                len(x.completion_token_ids) for x in t.turns
            )
    # per-episode sampling seeds: the same tokens whether 6 episodes run at once or 1 at a time
    assert [
        [x.completion_token_ids for x in t.turns] for g in together for t in g.trajectories
    ] == [[x.completion_token_ids for x in t.turns] for g in one_by_one for t in g.trajectories]


def test_contexts_reach_the_policy():
    seen: list[EpisodeContext] = []

    class Spy:
        name = "spy"

        def generate(self, batch, tools, contexts=None):
            seen.extend(contexts)
            return [
                Generation(message={"role": "assistant", "content": "0"}, policy="spy")
                for _ in batch
            ]

    rollout_groups(AddEnv, Spy(), n_tasks=2, group_size=2, seed=1, progress=False)
    assert len(seen) == 4 and len({c.seed for c in seen}) == 4
    assert all(c.turn == 0 and isinstance(c.env, AddEnv) for c in seen)


def test_rollout_to_store_writes_groups_and_resumes_after_a_crash(store_path):
    class CrashingStore:
        """Writes one group, then dies like a killed process would."""

        def __init__(self, store):
            self.store, self.writes = store, 0

        def __getattr__(self, name):
            return getattr(self.store, name)

        def put_group(self, group):
            if self.writes == 1:
                raise KeyboardInterrupt
            self.writes += 1
            self.store.put_group(group)

    kw = dict(n_tasks=4, group_size=2, seed=0, progress=False)
    store = Store(store_path)
    with pytest.raises(KeyboardInterrupt):
        rollout_to_store(CrashingStore(store), AddEnv, OraclePolicy(), run_id="run1", **kw)
    assert store.count_groups(run_id="run1") == 1
    result = rollout_to_store(store, AddEnv, OraclePolicy(), run_id="run1", **kw)
    assert len(result.groups) == 3 and len(result.skipped_group_ids) == 1
    assert store.count_groups(run_id="run1") == 4
    again = rollout_to_store(store, AddEnv, OraclePolicy(), run_id="run1", **kw)
    assert again.groups == [] and len(again.skipped_group_ids) == 4
    g = store.get_group(store.group_ids(run_id="run1")[0])
    assert len(g.trajectories) == 2 and all(t.turns for t in g.trajectories)
    assert result.summary()["run_id"] == "run1"
    store.close()


def _cli_json(capsys, *args: str) -> dict:
    assert main(["rollout", *args, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_cli_oracle_succeeds_and_random_fails_on_tooluse_test_split(capsys, store_path):
    common = ["--env", "rankgym/ToolUse-v0", "--split", "test", "--store", str(store_path)]
    n = 116
    oracle = _cli_json(
        capsys, *common, "--tasks", str(n), "--group-size", "1", "--policy", "oracle", "--run", "o"
    )
    assert oracle["groups"] == n and oracle["errors"] == 0
    assert oracle["success_rate"] >= 0.95
    rnd = _cli_json(
        capsys, *common, "--tasks", str(n), "--group-size", "2", "--policy", "random", "--run", "r"
    )
    assert rnd["trajectories"] == 2 * n and rnd["success_rate"] < 0.10
    for key in (
        "groups",
        "trajectories",
        "errors",
        "mean_verifiable_reward",
        "success_rate",
        "tokens_per_s",
    ):
        assert key in rnd
    assert (rnd["run_id"], rnd["store"]) == ("r", str(store_path))
    resumed = _cli_json(
        capsys, *common, "--tasks", str(n), "--group-size", "2", "--policy", "random", "--run", "r"
    )
    assert resumed["groups"] == 0 and resumed["skipped_groups"] == n


def test_cli_user_errors(capsys, store_path):
    assert main(["rollout", "--env", "nope/Nope-v0", "--store", str(store_path)]) == 2
    assert "unknown env 'nope/Nope-v0'" in capsys.readouterr().err
    args = ["rollout", "--env", "rankgym/ToolUse-v0", "--store", str(store_path)]
    assert main([*args, "--policy", "gpt9"]) == 2
    assert "unknown policy 'gpt9'" in capsys.readouterr().err
    assert main([*args, "--split", "test", "--tasks", "100000", "--policy", "random"]) == 2
    assert "has only" in capsys.readouterr().err
    assert main([*args, "--split", "agentdojo", "--policy", "oracle"]) == 2
    assert "has splits train, test" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_embedded_rollout_writes_tokens_and_logprobs(capsys, store_path):
    out = _cli_json(
        capsys,
        "--env", "rankgym/ToolUse-v0", "--tasks", "8", "--group-size", "4",
        "--store", str(store_path), "--max-new-tokens", "12", "--run", "e2e",
    )  # fmt: skip
    assert (out["groups"], out["trajectories"], out["errors"]) == (8, 32, 0)
    assert out["tokens_per_s"] > 0
    store = Store(store_path, readonly=True)
    ids = store.group_ids(run_id="e2e")
    assert len(ids) == 8
    for gid in ids:
        g = store.get_group(gid)
        assert len(g.trajectories) == 4
        for t in g.trajectories:
            assistant = [i for i, m in enumerate(t.messages) if m.role == "assistant"]
            assert [turn.message_index for turn in t.turns] == assistant and assistant
            for turn in t.turns:
                assert turn.prompt_token_ids and turn.policy == "embedded"
                assert 1 <= len(turn.completion_token_ids) == len(turn.completion_logprobs) <= 12
    store.close()


def test_select_tasks_stratify_balances_each_step_and_stays_seeded() -> None:
    from collections import Counter

    tasks = [Task(id=f"{f}-{i}", family=f) for f in "abc" for i in range(5 if f != "c" else 2)]
    for step in range(6):
        picked = select_tasks(tasks, n_tasks=6, step=step, stratify="family")
        counts = Counter(t.family for t in picked)  # type: ignore[attr-defined]
        assert counts == {"a": 2, "b": 2, "c": 2}, counts
        assert len({t.id for t in picked}) == 6
        assert picked == select_tasks(tasks, n_tasks=6, step=step, stratify="family")
    # past the smallest stratum the others keep alternating; the whole split is reachable
    every = select_tasks(tasks, n_tasks=len(tasks), step=1, stratify="family")
    assert sorted(t.id for t in every) == sorted(t.id for t in tasks)
    # metadata works like a field; a field no task has is an error that names it
    meta = [Task(id=str(i), metadata={"kind": i % 2}) for i in range(6)]
    kinds = [t.metadata["kind"] for t in select_tasks(meta, n_tasks=4, stratify="kind")]
    assert sorted(kinds) == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="stratify='nope'"):
        select_tasks(tasks, n_tasks=2, stratify="nope")
    # without stratify the draw is unchanged (the historic seeded shuffle)
    import random

    from rankgym.envs.policies.base import derive_seed

    order = list(tasks)
    random.Random(derive_seed("tasks", 0, 3)).shuffle(order)
    assert select_tasks(tasks, n_tasks=5, step=3) == order[:5]
