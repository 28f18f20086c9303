"""rankgym's group judge as a drop-in for OpenPipe ART's RULER, and ART trajectories into a store.

:func:`ruler_score_group` has the call shape of ``art.rewards.ruler_score_group``: an
``art.TrajectoryGroup`` in, a new group out whose trajectories carry ``reward`` = the judge's
score, ``metrics["ruler_score"]`` the same, ``metrics["independent_reward"]`` the reward they
had before, and the rationale in their logs (or None with ``swallow_exceptions`` when the
judge fails). Unlike RULER it goes through ``rankgym.judges.GroupJudge``: a judge cache in the
store (a rerun of the same group costs nothing), ``permutations`` shuffled presentations
averaged, identical trajectories shown once, and the group written to a rankgym store so
``rankgym dashboard``, ``agreement`` and blind labeling work on an ART run::

    groups = await art.gather_trajectory_groups(
        (art.TrajectoryGroup(rollout(model, s) for _ in range(4)) for s in scenarios),
        after_each=lambda g: ruler_score_group(g, "openai/gpt-4.1-mini", store="art.db",
                                               swallow_exceptions=True),
    )

:func:`import_art` (``rankgym import-art``) reads the trajectory files ART writes
(``.art/<project>/models/<model>/trajectories/<split>/<step>.parquet``) with ART's own reader
and stores every group: ART's reward in ``metrics["art_reward"]``, its
``independent_reward`` (when RULER scored the group) as the verifiable reward.

What it does not do: score ``additional_histories`` (refused, like RULER), or carry RULER's
own scores into the store as judgements (they have no rankgym judge spec; judge the imported
groups with ``rankgym judge --store``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.credentials import find_credentials
from rankgym.errors import UserError
from rankgym.integrations.groups import JudgeRunner, make_group, resolve_spec, to_messages
from rankgym.integrations.trl_env import require
from rankgym.types import Group, Judgement, JudgeSpec, Message, content_hash

if TYPE_CHECKING:
    from rankgym.store import Store

__all__ = ["group_from_art", "import_art", "ruler_score_group"]

log = logging.getLogger(__name__)
ART_NOTE = "in its own venv: it pins an older litellm; see docs/integrations.md"


def _task_id(group: Any, messages: Sequence[Message]) -> str:
    """The group's task: a ``task_id``/``scenario_id`` in its or its first trajectory's
    metadata, else a hash of the messages before the first assistant turn."""
    trajs = list(group.trajectories)
    for meta in [group.metadata, *(t.metadata for t in trajs[:1])]:
        for key in ("task_id", "scenario_id", "task", "scenario"):
            if meta and meta.get(key) not in (None, ""):
                return str(meta[key])
    head = []
    for m in messages:
        if m.role == "assistant":
            break
        head.append(m.to_openai())
    return "prompt-" + content_hash(head)


def group_from_art(
    group: Any, *, env_id: str = "art", run_id: str = "art", step: int = 0, key: str = ""
) -> Group:
    """A rankgym :class:`~rankgym.types.Group` of an ``art.TrajectoryGroup``'s trajectories
    (ids from their content, so the same group gives the same ids and hits the judge cache)."""
    trajs = list(group.trajectories)
    if not trajs:
        raise ValueError("the ART group has no trajectories")
    for t in trajs:
        if t.additional_histories:
            raise ValueError("additional histories are not supported (as in ART's RULER)")
    convs = [to_messages(t.messages()) for t in trajs]
    indep = [t.metrics.get("independent_reward") for t in trajs]
    metrics = [{"art_reward": float(t.reward), **{k: v for k, v in t.metrics.items()
                if isinstance(v, int | float) and not isinstance(v, bool)}} for t in trajs]  # fmt: skip
    return make_group(
        convs, env_id=env_id, task_id=_task_id(group, convs[0]), run_id=run_id, step=step,
        key=key, metrics=metrics,
        verifiable=[None if v is None else float(v) for v in indep],
        tools=[dict(x) for x in trajs[0].tools or []],
    )  # fmt: skip


def _spec(judge_model: str | JudgeSpec, extra: dict[str, object] | None, rubric: str | None) -> JudgeSpec:  # fmt: skip
    if isinstance(judge_model, JudgeSpec):
        return judge_model
    found = find_credentials(extra) if extra else []
    if found:
        raise UserError(
            f"extra_litellm_params: {', '.join(found)} holds a credential, which would be stored "
            "with the judge spec; set the provider's environment variable (e.g. OPENAI_API_KEY) "
            "instead"
        )
    spec = resolve_spec(judge_model)
    changes: dict[str, Any] = {}
    if rubric:
        changes["rubric"] = rubric
    if extra:
        changes["extra"] = {**spec.extra, **extra}
    return spec.model_copy(update=changes) if changes else spec


async def ruler_score_group(
    group: Any,
    judge_model: str | JudgeSpec = "local/smollm2",
    extra_litellm_params: dict[str, object] | None = None,
    rubric: str | None = None,
    *,
    swallow_exceptions: bool = False,
    debug: bool = False,
    store: str | Path | Store | None = None,
    permutations: int = 1,
    run_id: str = "art",
    step: int = 0,
    env_id: str = "art",
) -> Any:
    """Score an ``art.TrajectoryGroup`` with the rankgym group judge; a new group (see the
    module docstring). ``rubric`` None is rankgym's rubric (ART's ``DEFAULT_RUBRIC`` works
    too). Raises ``JudgeFailed`` when the judge gives no valid answer, unless
    ``swallow_exceptions`` (then None)."""
    art = require("art", "art", ART_NOTE)
    from rankgym.judges import JudgeFailed

    spec = _spec(judge_model, extra_litellm_params, rubric)
    rg = group_from_art(group, env_id=env_id, run_id=run_id, step=step)
    runner = JudgeRunner(spec, store, permutations=permutations, run_id=run_id, run_kind="art")
    try:
        (j,) = await runner.judge([rg])
    finally:
        runner.close()
    if j.status != "ok":
        if swallow_exceptions:
            log.warning("[rankgym ruler] judge failed, group skipped: %s", j.error)
            return None
        raise JudgeFailed(f"group {rg.id}: {j.error}")
    return _scored(art, group, rg, j, debug)


def _scored(art: Any, group: Any, rg: Group, j: Judgement, debug: bool) -> Any:
    by_id = {s.trajectory_id: s for s in j.scores}
    out = []
    for t, rt in zip(group.trajectories, rg.trajectories, strict=True):
        s = by_id[rt.id]
        new = t.__class__(
            messages_and_choices=t.messages_and_choices.copy(),
            tools=t.tools.copy() if t.tools else None,
            additional_histories=[],
            reward=s.score,
            metrics={**t.metrics, "independent_reward": t.reward, "ruler_score": s.score},
            metadata={**t.metadata, "rankgym_trajectory_id": rt.id},
            logs=[*t.logs, f"RULER explanation: {s.rationale}"],
        )
        if debug:
            print(f"[rankgym ruler] {rt.id}: {s.score:.3f} {s.rationale}")
        out.append(new)
    return art.TrajectoryGroup(out, metadata=dict(group.metadata), metrics=dict(group.metrics))


def _files(path: Path) -> list[tuple[Path, str, int]]:
    """(file, split, step) of every ``<split>/<step>.parquet`` under ``path`` (or ``path``)."""
    if path.is_file():
        step = int(path.stem) if path.stem.isdigit() else 0
        return [(path, path.parent.name, step)]
    found = sorted(path.rglob("*.parquet"))
    if not found:
        raise UserError(f"{path}: no ART trajectory files (*.parquet) under it; pass the model's trajectories/ folder or one file")  # fmt: skip
    return [(f, f.parent.name, int(f.stem) if f.stem.isdigit() else 0) for f in found]


def import_art(path: str | Path, store: Store, run_id: str | None = None) -> dict[str, Any]:
    """Store every trajectory group of ART's files under ``path``; returns counts.

    The run is ``run_id`` (default: the model folder's name), one run step per ART step;
    re-importing the same files writes the same group ids again (no duplicates).
    """
    require("art", "art", ART_NOTE)
    from art.utils.trajectory_logging import read_trajectory_groups_parquet

    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: no such file or folder; pass ART's .art/<project>/models/<model>/trajectories folder")  # fmt: skip
    model = p.parent.name if p.name == "trajectories" else p.name
    rid = run_id or model or "art"
    store.create_run(rid, kind="art", config={"source": str(p)}, run_id=rid)
    groups = trajectories = skipped = 0
    splits: dict[str, int] = {}
    for f, split, step in _files(p):
        try:
            art_groups = read_trajectory_groups_parquet(f)
        except Exception as e:
            raise UserError(f"{f}: not an ART trajectory file ({type(e).__name__}: {e})") from None
        batch = []
        for k, g in enumerate(art_groups):
            try:
                batch.append(group_from_art(g, run_id=rid, step=step, key=f"{split}:{step}:{k}"))
            except ValueError as e:
                log.warning("%s group %d skipped: %s", f, k, e)
                skipped += 1
        store.put_groups(batch)
        groups += len(batch)
        trajectories += sum(len(g.trajectories) for g in batch)
        splits[split] = splits.get(split, 0) + len(batch)
    return {"run_id": rid, "groups": groups, "trajectories": trajectories, "skipped": skipped,
            "splits": splits}  # fmt: skip
