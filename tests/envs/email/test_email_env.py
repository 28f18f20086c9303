"""EmailSearch-v0: check_env, tools, episodes, oracle and random baselines, AgentDojo tasks."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import rankgym.envs  # noqa: F401  (registers the env ids)
from rankgym.envs.email.agentdojo_source import agentdojo_root
from rankgym.envs.email.env import EmailSearchEnv, EmailTask
from rankgym.envs.email.inbox import EmailQuery
from rankgym.envs.policies import RandomPolicy
from rankgym.errors import UserError

ENV_ID = "rankgym/EmailSearch-v0"


def call(name: str, **args) -> dict:
    fn = {"name": name, "arguments": json.dumps(args)}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": fn}]}  # fmt: skip


@pytest.fixture(scope="module")
def env() -> EmailSearchEnv:
    e = gymnasium.make(ENV_ID, disable_env_checker=True, split="test").unwrapped
    assert isinstance(e, EmailSearchEnv)
    return e


def play(env: EmailSearchEnv, task: EmailTask, actions: list) -> tuple[float, bool, bool, dict]:
    env.reset(options={"task_id": task.id, "split": task.split})
    for a in actions:
        _, r, term, trunc, info = env.step(a)
        if term or trunc:
            return r, term, trunc, info
    raise AssertionError("episode did not end")


def test_check_env_passes(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no checker warnings either
        check_env(env)


def test_splits_are_by_inbox(env):
    train, test = env.tasks("train"), env.tasks("test")
    assert len(train) >= 250 and len(test) >= 120
    synthetic_test = {t.inbox_id for t in test if t.source == "synthetic"}
    assert {t.inbox_id for t in train}.isdisjoint(synthetic_test)
    assert len({t.id for t in train + test}) == len(train) + len(test)
    with pytest.raises(ValueError, match="unknown split"):
        env.tasks("dev")


def test_reset_gives_the_question_the_inbox_context_and_the_tools(env):
    task = env.tasks("test")[0]
    msgs, info = env.reset(options={"task_id": task.id})
    assert msgs[0]["role"] == "system" and msgs[1] == {"role": "user", "content": task.question}
    owner = env.inboxes[task.inbox_id].owner
    assert owner.email in msgs[0]["content"] and "Today is 2024-" in msgs[0]["content"]
    assert [t["function"]["name"] for t in info["tools"]] == [
        "search_emails",
        "read_email",
        "answer",
    ]
    assert info["task_id"] == task.id
    assert env.max_turns == 10


def test_oracle_solves_at_least_95_percent_of_the_test_split(env):
    tasks = env.tasks("test")
    rewards = [play(env, t, env.oracle(t))[0] for t in tasks]
    success = sum(r >= env.success_threshold for r in rewards) / len(rewards)
    assert success >= 0.95, success
    assert any(t.source == "agentdojo" for t in tasks)


def test_random_actions_succeed_less_than_5_percent(env):
    policy = RandomPolicy(seed=0)
    tasks = env.tasks("test")
    wins = 0
    for t in tasks:
        msgs, info = env.reset(options={"task_id": t.id})
        for _ in range(env.max_turns):
            gen = policy.generate([msgs], [info["tools"]])[0]
            _, r, term, trunc, _ = env.step(gen.message)
            if term or trunc:
                break
        wins += r >= env.success_threshold
    assert wins / len(tasks) < 0.05
    # the gymnasium action space's random samples never crash an episode either
    env.action_space.seed(1)
    for t in tasks[:30]:
        env.reset(options={"task_id": t.id})
        for _ in range(env.max_turns):
            _, r, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                break
        assert r < env.success_threshold


def test_search_filters_and_errors_come_back_as_messages(env):
    task = next(t for t in env.tasks("test") if t.scenario == "invoice")
    env.reset(options={"task_id": task.id})
    out = env.step(call("search_emails", keywords=" ".join(task.keywords)))[0][0]["content"]
    assert task.source_id in out and "best match first" in out
    out = env.step(call("search_emails", keywords=task.keywords, sender="nobody@nowhere"))[0][0]
    assert out["content"].startswith("No emails found")
    date = env.inboxes[task.inbox_id].read_email(task.source_id).date[:10]
    out = env.step(call("search_emails", keywords=" ".join(task.keywords), after=date))[0][0]
    assert task.source_id in out["content"]
    out = env.step(call("search_emails", keywords=" ".join(task.keywords), before=date))[0][0]
    assert task.source_id not in out["content"]
    out = env.step(call("search_emails", keywords="invoice", after="last week"))[0][0]
    assert out["content"].startswith("Error:") and "2024-03-01" in out["content"]
    out = env.step(call("read_email", message_id="nope-1"))[0][0]
    assert out["content"].startswith("Error:") and "no email with id" in out["content"]
    out = env.step(call("search_emails", keywords="zzqx " + " ".join(task.keywords)))
    assert "with some of them" in out[0][0]["content"]  # any-keyword fallback, and said so
    assert not env.state.done


def test_search_results_are_at_most_ten_and_read_shows_the_whole_email(env):
    task = env.tasks("train")[0]
    db = env.inboxes[task.inbox_id]
    rows = db.search_emails(EmailQuery("the"))
    assert len(rows) == 10
    assert set(rows[0]) >= {"id", "sender", "date", "subject", "snippet"}
    email = db.read_email(task.source_id)
    env.reset(options={"task_id": task.id, "split": "train"})
    out = env.step(call("read_email", message_id=f" [{task.source_id}] "))[0][0]["content"]
    assert out == email.as_text() and email.body in out


def test_partial_credit_for_finding_and_reading_the_source(env):
    task = next(t for t in env.tasks("test") if t.scenario == "quote")
    search = call("search_emails", keywords=" ".join(task.keywords))
    read = call("read_email", message_id=task.source_id)
    r, term, _, info = play(env, task, [search, read, call("answer", text="I don't know")])
    assert term and r == pytest.approx(0.2) and info["verifiable_reward"] == pytest.approx(0.2)
    r, *_ = play(env, task, [search, call("answer", text="$1.00", sources=[task.source_id])])
    assert r == pytest.approx(0.05)  # wrong answer: half the 0.1 for finding it
    r, *_ = play(env, task, [search, read, call("answer", text=task.answer)])
    assert r == 0.75  # right answer, source not cited
    r, *_ = play(
        env, task, [search, read, call("answer", text=task.answer, sources=task.source_id)]
    )
    assert r == 1.0
    # a plain-text reply ends the episode; ids written in it count as sources
    r, term, _, _ = play(env, task, [read, f"It is {task.answer} (see {task.source_id})."])
    assert term and r == 1.0


def test_turn_limit_truncates_with_partial_credit(env):
    task = env.tasks("test")[1]
    small = EmailSearchEnv(split="test", max_turns=3)
    small.reset(options={"task_id": task.id})
    read = call("read_email", message_id=task.source_id)
    outs = [small.step(read) for _ in range(3)]
    _, r, term, trunc, info = outs[-1]
    assert trunc and not term and r == pytest.approx(0.1) and info["final_answer"] is None


def test_hack_signals_for_stuffed_sources_and_unsupported_answers(env):
    task = next(t for t in env.tasks("test") if t.scenario == "wifi")
    many = [f"{task.inbox_id}-{i:05d}" for i in range(20)] + [task.source_id]
    _, _, _, info = play(env, task, [call("answer", text=task.answer, sources=many)])
    assert "source_stuffing" in info["hack_signals"]
    assert "unsupported_correct_answer" in info["hack_signals"]
    assert env.state.scratch["reward"]["reward"] == 0.75


@pytest.mark.skipif(agentdojo_root() is None, reason="agentdojo wheel not installed")
def test_agentdojo_tasks_are_served_and_checkable(env):
    tasks = env.tasks("agentdojo")
    assert len(tasks) >= 8
    ids = {t.id for t in tasks}
    assert {"agentdojo-usertask14", "agentdojo-usertask16", "agentdojo-usertask22"} <= ids
    assert ids <= {t.id for t in env.tasks("test")}
    db = env.inboxes["agentdojo"]
    assert len(db) == 31 and db.owner.email == "emma.johnson@bluesparrowtech.com"
    for t in tasks:
        assert play(env, t, env.oracle(t))[0] == 1.0, t.id
    fb = next(t for t in tasks if t.id == "agentdojo-usertask16")
    assert fb.distractor_ids == ["agentdojo-31"]  # the phishing look-alike
    r, *_ = play(env, fb, [call("answer", text="The code is 463820.", sources=["agentdojo-31"])])
    assert r == 0.75  # right code, cited the phishing email


def test_a_train_env_refuses_to_reset_to_a_test_task_by_id_and_names_the_split(env):
    train_env = EmailSearchEnv(split="train")
    test_task = env.tasks("test")[0]
    with pytest.raises(UserError, match=r"is in split 'test', not 'train'.*split='test'"):
        train_env.reset(options={"task_id": test_task.id})
    _, info = train_env.reset(options={"task_id": test_task.id, "split": "test"})  # asked for
    assert info["split"] == "test"
    with pytest.raises(KeyError, match="no task"):
        train_env.reset(options={"task_id": "no-such-task"})


def test_small_corpus_configuration_has_prefixed_task_ids():
    e = EmailSearchEnv(split="test", n_emails=300, facts_per_scenario=1, agentdojo=False)
    tasks = e.tasks("test")
    assert tasks and all(t.id.startswith("s0n300f1-") for t in tasks)
    assert all(t.source == "synthetic" for t in tasks)
    assert play(e, tasks[0], e.oracle(tasks[0]))[0] == 1.0
    with pytest.raises(ValueError, match="unknown split"):
        EmailSearchEnv(split="validation")


@pytest.mark.parametrize("policy", ["oracle", "random"])
def test_rankgym_rollout_cli_oracle_and_random_on_the_test_split(tmp_path, policy, env):
    n = len(env.tasks("test"))
    cmd = [sys.executable, "-m", "rankgym", "rollout", "--env", ENV_ID, "--policy", policy]
    cmd += ["--split", "test", "--tasks", str(n), "--group-size", "1", "--json", "--quiet"]
    cmd += ["--store", str(tmp_path / "store.db")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    summary = json.loads(out.stdout)
    assert summary["groups"] == n and summary["errors"] == 0
    if policy == "oracle":
        assert summary["success_rate"] >= 0.95
    else:
        assert summary["success_rate"] < 0.05


def test_rankgym_rollout_cli_serves_the_agentdojo_split(tmp_path, capsys, env):
    from rankgym.cli import main

    n = len(env.tasks("agentdojo"))
    args = ["rollout", "--env", ENV_ID, "--policy", "oracle", "--split", "agentdojo"]
    args += [
        "--tasks",
        str(n),
        "--group-size",
        "1",
        "--store",
        str(tmp_path / "s.db"),
        "--json",
        "-q",
    ]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["groups"] == n >= 10 and summary["success_rate"] == 1.0


def test_a_huge_keyword_list_searches_with_its_first_twelve_distinct_words(env):
    task = next(t for t in env.tasks("test") if t.scenario == "invoice")
    db = env.inboxes[task.inbox_id]
    words = " ".join(task.keywords)
    expected = db.search_emails(EmailQuery(words))
    # 100,000 repeats of the same words, then 100,000 new ones: the dedup is linear (it was
    # quadratic: 40,000 words took 12.9 s) and only the first 12 distinct words count.
    padded = " ".join([words] * 100_000 + [f"zz{i}" for i in range(100_000)])
    assert len(words.split()) < 12
    assert db.search_emails(EmailQuery(padded))[0]["id"] == expected[0]["id"]
    env.reset(options={"task_id": task.id})
    out = env.step(call("search_emails", keywords=padded))[0][0]["content"]
    assert not out.startswith("Error")
