"""One bad trajectory never costs the other groups of a rollout (issue 16).

A lone surrogate in a policy reply is stored exactly and counted; a group the store refuses is
listed (``failed_groups``/``failures`` in ``--json``) while every other group is stored; the
text summary names the errors, not just their count.
"""

from __future__ import annotations

import json

import pytest

from rankgym.cli import main
from rankgym.envs import rollout_command
from rankgym.envs.policies import OraclePolicy
from rankgym.envs.rollout import MAX_FAILED_IN_A_ROW, error_lines, rollout_to_store
from rankgym.errors import StoreBusy, StoreError
from rankgym.store import Store

ENV = "rankgym/ToolUse-v0"


class SurrogatePolicy(OraclePolicy):
    """The oracle, except that every reply of the second task's episodes ends in '\\ud800'.

    The first call holds every episode (group size 2), so its third context is task two's.
    """

    bad_task: str | None = None

    def generate(self, batch, tools, contexts=None):
        self.bad_task = self.bad_task or contexts[2].task.id
        gens = super().generate(batch, tools, contexts)
        for gen, ctx in zip(gens, contexts, strict=True):
            if ctx.task.id == self.bad_task:
                gen.message["content"] = (gen.message.get("content") or "") + " \ud800"
        return gens


class RefusingStore:
    """A real store that refuses the groups whose ids are in ``refuse`` (a test double)."""

    def __init__(self, store: Store, refuse: set[str] | None = None, all_: bool = False):
        self.store, self.refuse, self.all = store, refuse or set(), all_

    def __getattr__(self, name):
        return getattr(self.store, name)

    def put_group(self, group):
        if self.all or group.id in self.refuse:
            raise StoreError(f"refused {group.id}")
        self.store.put_group(group)


def test_a_reply_with_a_lone_surrogate_is_stored_with_every_other_group(
    capsys, store_path, monkeypatch
):
    policy = SurrogatePolicy()
    monkeypatch.setattr(rollout_command, "make_policy", lambda *a, **k: policy)
    args = ["rollout", "--env", ENV, "--store", str(store_path), "--tasks", "5"]
    assert main([*args, "--group-size", "2", "--policy", "oracle", "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["groups"] == 5 and summary["failed_groups"] == 0
    assert summary["invalid_unicode"] == 2  # both episodes of the bad task, visible in --json
    store = Store(store_path, readonly=True)
    assert store.count_groups() == 5
    bad = [
        t
        for gid in store.group_ids()
        for t in store.get_group(gid).trajectories
        if t.metrics.get("invalid_unicode")
    ]
    assert len(bad) == 2
    assert all(any("\ud800" in (m.content or "") for m in t.messages) for t in bad)


def test_a_group_the_store_refuses_is_listed_and_the_others_are_stored(store_path):
    store = Store(store_path)
    first = rollout_to_store(
        RefusingStore(store, all_=False), ENV, OraclePolicy(), run_id="r", n_tasks=4,
        group_size=1, progress=False,
    )  # fmt: skip
    ids = [g.id for g in first.groups]
    store.close()
    store_path.unlink()
    store = Store(store_path)
    result = rollout_to_store(
        RefusingStore(store, {ids[1]}), ENV, OraclePolicy(), run_id="r", n_tasks=4,
        group_size=1, progress=False,
    )  # fmt: skip
    assert [g.id for g in result.groups] == [ids[0], *ids[2:]]
    assert store.group_ids(run_id="r") == [ids[0], *ids[2:]]
    summary = result.summary()
    assert summary["failed_groups"] == 1
    assert summary["failures"][0]["group_id"] == ids[1]
    assert "StoreError: refused" in summary["failures"][0]["error"]
    assert any(ids[1] in line for line in error_lines(summary))
    # a rerun of the same run retries exactly the group that was not stored
    again = rollout_to_store(
        store, ENV, OraclePolicy(), run_id="r", n_tasks=4, group_size=1, progress=False
    )
    assert [g.id for g in again.groups] == [ids[1]] and len(again.skipped_group_ids) == 3


def test_a_store_that_refuses_every_group_stops_the_rollout(store_path):
    store = Store(store_path)
    with pytest.raises(StoreError, match="refused"):
        rollout_to_store(
            RefusingStore(store, all_=True), ENV, OraclePolicy(), run_id="r",
            n_tasks=MAX_FAILED_IN_A_ROW + 2, group_size=1, progress=False,
        )  # fmt: skip
    assert store.count_groups() == 0


def test_the_text_summary_names_the_errors(capsys, store_path, monkeypatch):
    class Broken(OraclePolicy):
        def generate(self, batch, tools, contexts=None):
            raise RuntimeError("\x1b[2Jmodel server went away")

    monkeypatch.setattr(rollout_command, "make_policy", lambda *a, **k: Broken())
    args = ["rollout", "--env", ENV, "--store", str(store_path), "--tasks", "2", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "8 x policy.generate: RuntimeError: \\x1b[2Jmodel server went away" in out
    assert "\x1b" not in out


def test_a_store_locked_by_another_writer_stops_the_rollout_at_once(store_path):
    class Locked(RefusingStore):
        def put_group(self, group):
            raise StoreBusy("store stayed locked by another process for 120s")

    store = Store(store_path)
    with pytest.raises(StoreBusy):
        rollout_to_store(
            Locked(store), ENV, OraclePolicy(), run_id="r", n_tasks=4, group_size=1,
            progress=False, max_concurrent=1,
        )  # fmt: skip
