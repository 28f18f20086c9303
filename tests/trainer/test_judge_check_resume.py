"""The judge check's calibration rollout is ``rollout_to_store``: stored as each group ends, so an
interrupted check resumes without rolling the stored groups out again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rankgym.envs.registry import make
from rankgym.errors import StoreError
from rankgym.store import Store
from rankgym.trainer import judge_check
from rankgym.trainer.judge_check import CheckConfig, calibration_groups

ENV = "rankgym/ToolUse-v0"
CFG = CheckConfig(env_id=ENV, groups=5, group_size=3, seed=2)


class RefusingStore:
    """A store that refuses the group of task ``refused`` (every other call goes through)."""

    def __init__(self, store: Store, refused: str) -> None:
        self.store, self.refused = store, refused

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def put_group(self, group: Any) -> None:
        if group.task_id == self.refused:
            raise ValueError("disk says no")
        self.store.put_group(group)


def _rows(store: Store) -> dict[str, list[str]]:
    """The stored runs, groups and trajectories, without timestamps and wall times."""
    out = {}
    for table in ("runs", "groups", "trajectories", "hack_signals"):
        rows = store.query(f"SELECT * FROM {table}")
        for r in rows:
            r.pop("created_at", None)
            if "metrics" in r:
                r["metrics"] = {
                    k: v for k, v in json.loads(r["metrics"]).items() if k != "wall_time_s"
                }
        out[table] = sorted(json.dumps(r, sort_keys=True) for r in rows)
    return out


def _spy_envs(
    monkeypatch: pytest.MonkeyPatch, interrupt: Callable[[], bool] = lambda: False
) -> list[str]:
    """The task ids of every env reset the check makes from now on; an env step raises
    ``KeyboardInterrupt`` (a Ctrl-C in the middle of the rollout) once ``interrupt()`` is true."""
    seen: list[str] = []

    def spying_make(env_id: str, **kwargs: Any) -> Any:
        env = make(env_id, **kwargs)
        reset, step = env.reset, env.step

        def spy_reset(*args: Any, **kw: Any) -> Any:
            seen.append(kw["options"]["task_id"])
            return reset(*args, **kw)

        def maybe_interrupted_step(*args: Any, **kw: Any) -> Any:
            if interrupt():
                raise KeyboardInterrupt
            return step(*args, **kw)

        env.reset, env.step = spy_reset, maybe_interrupted_step  # type: ignore[method-assign]
        return env

    monkeypatch.setattr(judge_check, "make", spying_make)
    return seen


def test_an_interrupted_calibration_rollout_resumes_without_redoing_the_stored_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(tmp_path / "whole.db") as s:
        whole = calibration_groups(CFG, s)
        whole_rows = _rows(s)
    with Store(tmp_path / "resumed.db") as s:
        with monkeypatch.context() as m:
            _spy_envs(m, interrupt=lambda: len(s.group_ids()) >= 2)
            with pytest.raises(KeyboardInterrupt):
                calibration_groups(CFG, s)
        kept = {s.get_group(i).task_id for i in s.group_ids()}
        assert 2 <= len(kept) < CFG.groups  # each group was stored as it ended
        resets = _spy_envs(monkeypatch)
        resumed = calibration_groups(CFG, s)
        assert kept.isdisjoint(resets) and len(set(resets)) == CFG.groups - len(kept)
        assert _rows(s) == whole_rows
    assert [g.id for g in resumed] == [g.id for g in whole]  # task order, as uninterrupted
    messages = [[t.messages for t in g.trajectories] for g in whole]
    assert [[t.messages for t in g.trajectories] for g in resumed] == messages


def test_a_finished_calibration_rollout_is_loaded_not_rolled_out_again(store_path, monkeypatch):
    store = Store(store_path)
    first = [g.id for g in calibration_groups(CFG, store)]
    resets = _spy_envs(monkeypatch)
    assert [g.id for g in calibration_groups(CFG, store)] == first and resets == []
    store.close()
    assert [g.id for g in calibration_groups(CFG)] == first  # the same ids without a store


def test_a_calibration_group_the_store_refuses_is_an_error_naming_it(tmp_path: Path) -> None:
    refused = calibration_groups(CFG)[1].task_id
    with Store(tmp_path / "c.db") as s:
        with pytest.raises(
            StoreError, match=r"1 calibration groups could not be stored.*disk says no.*rerun"
        ):
            calibration_groups(CFG, RefusingStore(s, refused))  # type: ignore[arg-type]
        assert len(s.group_ids()) == CFG.groups - 1
        assert len(calibration_groups(CFG, s)) == CFG.groups  # the rerun retries it
