"""The ``judge`` split: train tasks set aside for judge data, which GRPO never draws.

A judge trained on the groups of the policy it will reward must see that policy's failures,
but not on the tasks the policy is then trained on (a judge that memorised a task's answer
would reward it without reading the trajectory). So each built-in env (ToolUse, EmailSearch,
CodeTests) carves a fixed share of its ``train`` tasks into a ``judge`` split:
``env.tasks("judge")`` returns them and ``env.tasks("train")`` no longer does, so every draw
from ``train`` (GRPO's steps, SFT demonstrations, ``rankgym rollout``) leaves them out;
``[sft] judge_split = true`` lets SFT's oracle demonstrations imitate them (GRPO still never
draws them).

The choice is deterministic and depends on the task id only (a salted SHA-256 of it), so it is
the same on every machine and does not move when tasks are added or filtered (e.g. ToolUse's
``difficulty``/``families``). An env made with ``judge_split=False`` (``env.kwargs``) carves
nothing: ``train`` holds every train task, for runs that train no judge on the policy's groups
(``rankgym demo`` without ``--judge-train``), and asking it for the judge split is an error.
What it does not do: touch the ``test`` split, or give an env that does not call :func:`carve`
(e.g. a ``rankgym new-env`` scaffold) a judge split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

from rankgym.envs.base import Task

JUDGE_SPLIT = "judge"
JUDGE_SHARE_PERMILLE = 150
"""Share of the train tasks in the judge split, in thousandths (15%)."""

T = TypeVar("T", bound=Task)


def in_judge_split(task_id: str) -> bool:
    """True when the train task ``task_id`` belongs to the judge split."""
    digest = hashlib.sha256(f"rankgym-judge-split|{task_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 1000 < JUDGE_SHARE_PERMILLE


def carve(train_tasks: Sequence[T], split: str, enabled: bool = True) -> list[T]:
    """The tasks of ``split`` ("train" or "judge") out of an env's full list of train tasks.

    ``judge`` tasks are returned with ``split="judge"``; order is kept. With ``enabled`` False
    (an env made with ``judge_split=False``) ``train`` is every task and ``judge`` raises
    ``ValueError``.
    """
    if not enabled:
        if split == JUDGE_SPLIT:
            raise ValueError(
                "this env was made with judge_split=False, so it has no judge split: drop "
                "judge_split = false from env.kwargs to carve one (15% of the train tasks, "
                "which GRPO then never draws)"
            )
        return list(train_tasks)
    if split == JUDGE_SPLIT:
        return [
            t.model_copy(update={"split": JUDGE_SPLIT}) for t in train_tasks if in_judge_split(t.id)
        ]
    if split != "train":
        raise ValueError(f"carve() splits train tasks into train and judge, not {split!r}")
    return [t for t in train_tasks if not in_judge_split(t.id)]
