"""The rollout driver: N episodes per task, stepped in lockstep, returned as Groups.

``rollout_groups`` makes ``group_size`` envs per task and runs every episode of every task in
the batch together. Each round it collects the episodes waiting for the model, makes *one*
batched ``policy.generate`` call for all of them, then steps each env with its message. An
assistant turn keeps the policy's prompt/completion token ids and sampler logprobs as a
``rankgym.types.Turn``; a group is handed to ``on_group`` the moment its last episode ends,
carrying the env's tool schemas once (``Group.tools``, from ``reset``'s ``info["tools"]``; see
``rollout_episode.py``), so the judge sees the tools the agent had.

Determinism: the task selection, each episode's env seed and the per-episode sampling seed the
policy receives all derive from ``(seed, step, task id, index)``, so the same call gives the
same episodes however many run at once (up to floating-point differences between batch
shapes). Group and trajectory ids derive from ``(run_id, step, env, task, seed, slot)``, which
is what lets ``rollout_to_store`` resume a run by skipping groups already in the store.

Failures are data: a policy or env exception ends *that* episode with ``Trajectory.error`` set
(a failing batch is retried one conversation at a time to find the culprit); the rollout goes
on. ``rollout_groups`` lets exceptions from ``on_group`` propagate; ``rollout_to_store``
catches a group the store refuses, counts and lists it (``RolloutResult.failed``) and goes on
with the others, unless :data:`MAX_FAILED_IN_A_ROW` groups in a row fail (then the store, not
the data, is the problem, and the error is raised). A policy reply holding a lone surrogate
(text that is not valid Unicode) is kept as it is and counted in the trajectory's
``invalid_unicode`` metric; the store keeps it exactly.

What it does not do: no threads or processes (envs step one after another between batched
generations; slow tools slow everyone), no judging, no training, no retries of failed episodes,
and ``rollout_groups`` itself writes nothing.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from rankgym.envs.base import Env, Task
from rankgym.envs.policies import EpisodeContext, Generation, Policy, derive_seed
from rankgym.envs.registry import make
from rankgym.envs.rollout_episode import Episode as _Episode
from rankgym.envs.rollout_episode import advance as _advance
from rankgym.envs.rollout_episode import assemble_group
from rankgym.envs.rollout_episode import start as _start
from rankgym.envs.rollout_report import RolloutResult, error_kind, error_lines, summarize
from rankgym.errors import StoreBusy
from rankgym.terminal import printable
from rankgym.types import Group, content_hash

if TYPE_CHECKING:
    from rankgym.store import Store

__all__ = [
    "EnvFactory",
    "RolloutResult",
    "error_lines",
    "first_then",
    "rollout_groups",
    "rollout_to_store",
    "select_tasks",
    "summarize",
]

log = logging.getLogger(__name__)

MAX_FAILED_IN_A_ROW = 3
"""``rollout_to_store`` stops when this many groups in a row cannot be stored."""

EnvSource = str | Callable[[], Env]
"""A registered env id, or a zero-argument factory returning a fresh ``Env``."""


def _env_factory(env: EnvSource) -> tuple[Callable[[], Env], str | None]:
    if isinstance(env, EnvFactory):
        return env.make, env.env_id
    if isinstance(env, str):
        env_id = env
        return (lambda: make(env_id)), env_id
    return env, None


def _env_id_of(env: Env, fallback: str | None) -> str:
    if fallback:
        return fallback
    return (env.spec.id if env.spec is not None else None) or env.env_id or type(env).__name__


def _task_field(task: Task, name: str) -> Any:
    """``task.<name>`` (an extra field such as ToolUse's ``family``), else ``task.metadata[name]``."""
    value = getattr(task, name, None)
    return task.metadata.get(name) if value is None else value


def select_tasks(
    tasks: Sequence[Task],
    task_ids: Sequence[str] | None = None,
    n_tasks: int | None = None,
    seed: int = 0,
    step: int = 0,
    stratify: str | None = None,
) -> list[Task]:
    """The tasks of a rollout: ``task_ids`` in that order, or ``n_tasks`` drawn without repeats.

    The draw shuffles the whole split with a seed from ``(seed, step)`` and takes the first
    ``n_tasks``, so asking for more tasks extends, not reshuffles, the selection. With
    ``stratify`` (a task field, e.g. ``"family"``), the shuffled strata are interleaved round
    robin (in an order also drawn per step), so each step's tasks cover the strata evenly.
    Raises ValueError for unknown ids, more tasks than the split has, or a ``stratify`` field
    that no task has.
    """
    if task_ids is not None:
        by_id = {t.id: t for t in tasks}
        missing = [t for t in task_ids if t not in by_id]
        if missing:
            raise ValueError(f"unknown task ids {missing[:5]} (the split has {len(tasks)} tasks)")
        return [by_id[t] for t in task_ids]
    if n_tasks is None:
        return list(tasks)
    if not 1 <= n_tasks <= len(tasks):
        raise ValueError(f"asked for {n_tasks} tasks but the split has {len(tasks)}")
    rng = random.Random(derive_seed("tasks", seed, step))
    if not stratify:
        order = list(tasks)
        rng.shuffle(order)
        return order[:n_tasks]
    strata: dict[str, list[Task]] = {}
    for t in tasks:
        strata.setdefault(str(_task_field(t, stratify)), []).append(t)
    if list(strata) == ["None"]:
        raise ValueError(f"stratify={stratify!r}: no task has that field (or metadata key)")
    keys = sorted(strata)
    for k in keys:
        rng.shuffle(strata[k])
    rng.shuffle(keys)
    rounds = max(len(v) for v in strata.values())
    order = [strata[k][i] for i in range(rounds) for k in keys if i < len(strata[k])]
    return order[:n_tasks]


def _group_id(run_id: str, step: int, env_id: str, task_id: str, seed: int, slot: int) -> str:
    return "grp-" + content_hash([run_id, step, env_id, task_id, seed, slot])[:12]


def rollout_groups(
    env: EnvSource,
    policy: Policy,
    task_ids: Sequence[str] | None = None,
    n_tasks: int | None = None,
    group_size: int = 4,
    split: str = "train",
    seed: int = 0,
    run_id: str = "default",
    step: int = 0,
    progress: bool = True,
    on_group: Callable[[Group], None] | None = None,
    skip_group_ids: Collection[str] = (),
    max_concurrent: int | None = None,
    max_turns: int | None = None,
    skipped: list[str] | None = None,
    stratify: str | None = None,
    planned: list[str] | None = None,
) -> list[Group]:
    """Roll out ``group_size`` episodes for each selected task; returns the Groups in task order.

    ``env`` is a registered env id or a zero-argument factory returning a fresh ``Env`` (one is
    made per episode). Tasks: ``task_ids`` or ``n_tasks`` from ``split`` (see ``select_tasks``;
    neither = the whole split). Groups whose id is in ``skip_group_ids`` are not run (resume).
    ``max_concurrent`` caps the episodes in flight (None = all; 1 = one episode at a time).
    ``max_turns`` stops an episode the env has not ended after that many assistant turns
    (``truncated``); by default the env's own ``max_turns`` applies, and an env that overruns
    it by two turns is stopped with an error. ``skipped``, if given, receives the ids of the
    groups that were skipped, ``planned`` the ids of every selected group in task order (run or
    skipped). ``stratify``: balance the drawn tasks over a task field.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    factory, env_id = _env_factory(env)
    first = factory()
    env_id = _env_id_of(first, env_id)
    tasks = select_tasks(first.tasks(split), task_ids, n_tasks, seed, step, stratify)
    plans = _plan_groups(tasks, run_id, step, env_id, seed, skip_group_ids, skipped, planned)
    if not plans:
        return []
    pending = _episodes(plans, group_size, seed, step)
    bar = None
    if progress:
        # smoothing=0: ETA from the mean rate; episodes end in bursts, and tqdm's default
        # moving average made one long gap read as an hour left a moment before the end
        bar = tqdm(total=len(pending), desc="episodes", unit="ep", leave=False, smoothing=0)
    groups = _Groups(plans, group_size, run_id, step, env_id, on_group, bar)
    turn_cap = max_turns or int(first.max_turns) + 2
    try:
        _run(pending, [first], factory, split, policy, max_concurrent or len(pending),
             (turn_cap, max_turns is not None), groups)  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    return groups.in_task_order()


@dataclass(frozen=True)
class _Plan:
    """One group to roll out: its slot in the task selection, its task and its id."""

    slot: int
    task: Task
    gid: str


def _plan_groups(
    tasks: Sequence[Task],
    run_id: str,
    step: int,
    env_id: str,
    seed: int,
    skip_group_ids: Collection[str],
    skipped: list[str] | None,
    planned: list[str] | None = None,
) -> list[_Plan]:
    """The groups of ``tasks`` still to run (ids in ``skip_group_ids`` go to ``skipped``; every
    id, in task order, to ``planned``)."""
    plans = []
    for slot, task in enumerate(tasks):
        gid = _group_id(run_id, step, env_id, task.id, seed, slot)
        if planned is not None:
            planned.append(gid)
        if gid not in skip_group_ids:
            plans.append(_Plan(slot, task, gid))
        elif skipped is not None:
            skipped.append(gid)
    return plans


def _episodes(plans: list[_Plan], group_size: int, seed: int, step: int) -> list[_Episode]:
    """Every episode of ``plans``, seeded, in reverse start order (``pop()`` keeps task order)."""
    pending = [
        _Episode(
            group=g,
            index=i,
            task=p.task,
            env=None,
            seed=derive_seed("episode", seed, step, p.task.id, p.slot, i) % (2**31),
            traj_id="traj-" + content_hash([p.gid, i])[:12],
        )
        for g, p in enumerate(plans)
        for i in range(group_size)
    ]
    pending.reverse()
    return pending


class _Groups:
    """The episodes of each planned group; a group is assembled and handed to ``on_group`` the
    moment its last episode ends."""

    def __init__(
        self,
        plans: list[_Plan],
        group_size: int,
        run_id: str,
        step: int,
        env_id: str,
        on_group: Callable[[Group], None] | None,
        bar: Any,
    ) -> None:
        self.plans, self.run_id, self.step, self.env_id = plans, run_id, step, env_id
        self.on_group, self.bar = on_group, bar
        self.remaining = {g: group_size for g in range(len(plans))}
        self.episodes_of: dict[int, list[_Episode]] = {g: [] for g in range(len(plans))}
        self.finished: dict[int, Group] = {}

    def started(self, ep: _Episode) -> None:
        self.episodes_of[ep.group].append(ep)

    def finish(self, ep: _Episode) -> None:
        ep.done, ep.ended = True, time.perf_counter()
        if self.bar is not None:
            self.bar.update(1)
        self.remaining[ep.group] -= 1
        if self.remaining[ep.group] == 0:
            p = self.plans[ep.group]
            group = assemble_group(p.gid, self.run_id, self.step, self.env_id, p.task,
                                   self.episodes_of[ep.group])  # fmt: skip
            self.finished[ep.group] = group
            if self.on_group is not None:
                self.on_group(group)

    def in_task_order(self) -> list[Group]:
        return [self.finished[g] for g in sorted(self.finished)]


def _run(
    pending: list[_Episode],
    spare_env: list[Env],
    factory: Callable[[], Env],
    split: str,
    policy: Policy,
    limit: int,
    turn_cap: tuple[int, bool],
    groups: _Groups,
) -> None:
    """The lockstep loop: start episodes up to ``limit`` in flight, one batched generation for
    all of them, step each env, repeat until every episode has ended."""
    active: list[_Episode] = []
    while pending or active:
        while pending and len(active) < limit:
            ep = pending.pop()
            groups.started(ep)
            ep.env = spare_env.pop() if spare_env else None
            _start(ep, factory, split)
            if ep.done:
                groups.finish(ep)
            else:
                active.append(ep)
        if not active:
            continue
        gens = _generate(policy, active)
        for ep, gen in zip(active, gens, strict=True):
            _advance(ep, gen, *turn_cap)
            if ep.done:
                groups.finish(ep)
        active = [e for e in active if not e.done]
        if groups.bar is not None:
            groups.bar.set_postfix(active=len(active), groups=len(groups.finished))


def _generate(policy: Policy, active: list[_Episode]) -> list[Generation]:
    """One batched call; if it raises, retry one conversation at a time to isolate failures."""

    def ctx(ep: _Episode) -> EpisodeContext:
        return EpisodeContext(
            task=ep.task, env=ep.env, seed=ep.seed, turn=len(ep.turns), index=ep.index
        )

    def call(eps: list[_Episode]) -> list[Generation]:
        gens = policy.generate(
            [copy.deepcopy(e.messages) for e in eps], [e.tools for e in eps], [ctx(e) for e in eps]
        )
        if len(gens) != len(eps):
            raise RuntimeError(f"policy returned {len(gens)} generations for {len(eps)} prompts")
        return gens

    try:
        return call(active)
    except Exception as e:
        if len(active) == 1:
            return [_failed(policy, e)]
        why = printable(f"{type(e).__name__}: {e}", one_line=True)
        log.warning("batched generate failed (%s); retrying one by one", why)
    out = []
    for ep in active:
        try:
            out.extend(call([ep]))
        except Exception as e:
            out.append(_failed(policy, e))
    return out


def _failed(policy: Policy, e: Exception) -> Generation:
    return Generation.failed(policy.name, f"policy.generate: {type(e).__name__}: {e}")


class _StoreWriter:
    """``on_group`` for ``rollout_to_store``: one group the store refuses is listed, not fatal."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.failed: list[dict[str, str]] = []
        self.stored: list[Group] = []
        self._in_a_row = 0

    def __call__(self, group: Group) -> None:
        try:
            self.store.put_group(group)
        except StoreBusy:
            raise  # another writer holds the file: every next group would wait as long
        except Exception as e:
            self._in_a_row += 1
            error = f"{type(e).__name__}: {error_kind(str(e))}"
            where = printable(f"group {group.id} (task {group.task_id})", one_line=True)
            log.warning("%s not stored: %s", where, printable(error, one_line=True))
            self.failed.append({"group_id": group.id, "task_id": group.task_id, "error": error})
            if self._in_a_row >= MAX_FAILED_IN_A_ROW:
                raise
            return
        self._in_a_row = 0
        self.stored.append(group)


def rollout_to_store(
    store: Store,
    env: EnvSource,
    policy: Policy,
    *,
    run_id: str | None = None,
    run_name: str | None = None,
    config: dict[str, Any] | None = None,
    **kwargs: Any,
) -> RolloutResult:
    """``rollout_groups`` writing each group to ``store`` (``put_group``) as soon as it ends.

    Each group is its own transaction, so a crash keeps the finished groups; calling again
    with the same ``run_id`` (and the same seed/step/tasks) skips the groups already stored
    and retries the ones that failed. ``kwargs`` go to ``rollout_groups``. Returns the stored
    groups, the skipped ids and the groups the store refused (see the module docstring).
    """
    run_id = store.create_run(name=run_name or run_id, kind="rollout", config=config, run_id=run_id)
    step = int(kwargs.get("step", 0))
    existing = set(store.group_ids(run_id=run_id, step=step))
    factory, env_id = _env_factory(env)
    probe = factory()  # also the first episode's env
    skipped: list[str] = []
    planned: list[str] = []
    writer = _StoreWriter(store)
    started = time.perf_counter()
    rollout_groups(
        EnvFactory(first_then(probe, factory), _env_id_of(probe, env_id)),
        policy,
        run_id=run_id,
        on_group=writer,
        skip_group_ids=existing,
        skipped=skipped,
        planned=planned,
        **kwargs,
    )
    wall = time.perf_counter() - started
    threshold = float(probe.success_threshold)
    return RolloutResult(run_id, writer.stored, skipped, wall, threshold, writer.failed, planned)


def first_then(first: Env, factory: Callable[[], Env]) -> Callable[[], Env]:
    """A factory that hands out ``first`` (an env built already) once, then ``factory()``'s.

    For a caller that needed an env before the rollout (its tasks, its splits): the rollout's
    first episode reuses it instead of building another (an EmailSearch env loads its inboxes).
    """
    handed_out = False

    def make_env() -> Env:
        nonlocal handed_out
        if handed_out:
            return factory()
        handed_out = True
        return first

    return make_env


@dataclass
class EnvFactory:
    """A zero-argument env factory that also names the env id its envs are recorded under."""

    make: Callable[[], Env]
    env_id: str

    def __call__(self) -> Env:
        return self.make()
