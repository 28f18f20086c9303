"""Training data of a pointwise judge (``rankgym judge-train --objective pointwise``).

Every trajectory with a verifier outcome (``judge_data.task_pools``: a reward, or cut at the
turn limit; errors left out; an episode that repeats another's content counts again, as the
policy's frequency of it) on a task that is not held out for the check becomes one :class:`~rankgym.trainer.judge_train.Example`: the pointwise
prompt (``rankgym.judges.point_judge``) of it inside a group of its task's trajectories, with
`` yes`` the correct verdict for full marks (verifier reward 1.0) and `` no`` for anything
less, or an episode cut off before it answered. The two classes are weighted to equal total
weight, so a pool of mostly failures does not teach "always no".

Unlike the pairwise data, the tasks whose trajectories all succeed or all fail count too: a
pool of 61 judge-split ToolUse tasks gave 35 real pairs and 366 labelled trajectories
(bench/RESULTS.md). What it does not do: read people's rankings (relative, not a yes/no), make
counterfactuals, or hold out tasks itself (the held-out tasks come from the pairwise split, so
the check runs on the same pairs as for a pairwise judge).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rankgym.judges.answers import agreement_counts
from rankgym.judges.judge_compare import pair_group
from rankgym.judges.judge_data import PairItem, task_pools
from rankgym.judges.pair_judge import decision_context
from rankgym.judges.point_judge import point_messages, verdict_ids
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.store import Store
from rankgym.types import Group, Trajectory

if TYPE_CHECKING:
    from rankgym.trainer.judge_train import Example, JudgeTrainConfig

SUCCESS_REWARD = 1.0
"""A trajectory is a `` yes`` example at this verifier reward (full marks) or above."""
TASK_GROUP = 8
"""Trajectories of one task rendered in one group prompt (its context and shared outputs)."""


def succeeded(t: Trajectory) -> bool:
    """Full marks from the verifier (an episode cut off before it answered has none)."""
    return t.verifiable_reward is not None and t.verifiable_reward >= SUCCESS_REWARD


def point_examples(
    tok: Any,
    stores: list[str],
    heldout_tasks: set[tuple[str, str]],
    cfg: JudgeTrainConfig,
    runs: Iterable[str] | None = None,
    ties: Sequence[PairItem] = (),
    agreement: bool = False,
) -> tuple[list[Example], dict[str, int]]:
    """The pointwise examples of ``stores`` outside ``heldout_tasks`` (env id, task id), and
    their counts (``trajectories``, ``success``, ``failure``, ``tasks``, ``too_long``: left
    out as longer than ``cfg.max_context_tokens``; ``ties``). ``ties``: tie pairs (two
    trajectories of one task with the same verifier outcome) whose two scores the tie loss
    pulls together (:func:`tie_examples`). ``agreement``: each prompt states how many of the
    other attempts in its group prompt (up to :data:`TASK_GROUP` of the task) gave the same
    final answer (``rankgym.judges.answers``)."""
    from rankgym.trainer.judge_train import Example

    yes, no = verdict_ids(tok)
    opened = {s: Store(s, readonly=True) for s in stores}
    try:
        pools = task_pools(opened, runs, dedupe=False)  # repeats are samples too
    finally:
        for s in opened.values():
            s.close()
    rubric = default_rubric()
    rows: list[tuple[str, Trajectory, list[int]]] = []  # (store|id, trajectory, context)
    too_long = 0
    tasks = 0
    for (env_id, task_id), pool in sorted(pools.items()):
        if (env_id, task_id) in heldout_tasks:
            continue
        tasks += 1
        items = list(pool.items())  # (store|id, (store, trajectory)): unique across stores
        for start in range(0, len(items), TASK_GROUP):
            part = dict(items[start : start + TASK_GROUP])
            g = Group(id=f"points-{task_id}", env_id=env_id, task_id=task_id,
                      trajectories=[t.model_copy(update={"id": k}) for k, (_, t) in part.items()])  # fmt: skip
            prompt = build_prompt(g, rubric)
            agree = agreement_counts(prompt.messages) if agreement else None
            for label, key in prompt.labels.items():
                ctx = decision_context(tok, point_messages(prompt.messages, label, cfg.max_line_chars, agree))  # fmt: skip
                if len(ctx) > cfg.max_context_tokens:
                    too_long += 1
                    continue
                rows.append((key, part[key][1], ctx))
    pos = sum(succeeded(t) for _, t, _ in rows)
    neg = len(rows) - pos
    weight = {True: len(rows) / (2 * max(pos, 1)), False: len(rows) / (2 * max(neg, 1))}
    examples = [
        Example(key=key, context=ctx, correct=yes if succeeded(t) else no,
                wrong=no if succeeded(t) else yes, weight=weight[succeeded(t)])
        for key, t, ctx in rows
    ]  # fmt: skip
    pairs = tie_examples(tok, ties, cfg, agreement)
    counts = {"trajectories": len(rows), "success": pos, "failure": neg, "tasks": tasks,
              "too_long": too_long, "ties": len(pairs) // 2}  # fmt: skip
    return examples + pairs, counts


def tie_examples(
    tok: Any, ties: Sequence[PairItem], cfg: JudgeTrainConfig, agreement: bool = False
) -> list[Example]:
    """Two tie rows per tie pair, one per trajectory, each reading `` yes`` against `` no``:
    with a served tie loss (``served-logit``: half the difference of the two yes-logits) the
    loss pulls the two scores together, so that what tells two equally good attempts apart
    (their length, in the data so far) earns nothing. A pair with a prompt over
    ``cfg.max_context_tokens`` is left out. ``agreement``: the counts are over the pair alone
    (a tie pair keeps no group)."""
    from rankgym.trainer.judge_train import Example

    yes, no = verdict_ids(tok)
    rubric = default_rubric()
    out: list[Example] = []
    for p in ties:
        msgs = build_prompt(pair_group(p), rubric).messages
        agree = agreement_counts(msgs) if agreement else None
        ctxs = [decision_context(tok, point_messages(msgs, lab, cfg.max_line_chars, agree)) for lab in ("T1", "T2")]  # fmt: skip
        if max(len(c) for c in ctxs) > cfg.max_context_tokens:
            continue
        out += [Example(key=f"tie-{p.id}:{k}", context=c, correct=yes, wrong=no, tie=True)
                for k, c in zip((1, 0), ctxs, strict=True)]  # fmt: skip
    return out
