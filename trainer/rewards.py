"""From judged groups to training rewards.

A :class:`Reward` is built once from the config's ``[reward]`` section
(:func:`build_reward`); its class is looked up by ``reward.kind`` in :data:`REWARDS`, the one
registry of reward types (the config validator and ``rankgym demo --reward`` read their names
from it). A reward says whether it ``needs_judge`` (the loop then builds a judge spec, runs the
judge-check and the monitor), whether the judge is its only signal (``judge_only``: the
judge-check then stops a run, the guard is on by default), which judge method judges its groups
(``judge_method``), and how one trajectory's judge score and verifiable reward combine
(``blend``). Adding a reward type is one subclass with ``@register_reward`` (docs/training.md).

:meth:`Reward.score` (``step_rewards``) is the seam TRL calls ``_calculate_rewards``: per
trajectory, the reward's blend of the judge's score and the env's verifiable reward, then the
hack penalty: a trajectory the *env* flagged (any ``hack_signals`` entry not starting with
``judge_``) gets the lowest reward of its group, so GRPO never pushes towards it. Signals the
judge derived itself (``judge_hack_suspected``, ``judge_top_verifier_failed``) are not used:
the first is noise with the embedded judge, the second would leak the verifier into a
judge-only reward.

:class:`StepMetrics` (core: ``rankgym.step_metrics``, re-exported here) is what a step logs to
the store (and the Runs page reads), built from a step's :class:`StepRewards` by
``trainer/step_report.py``.

What this module does not do: no reward shaping beyond the blend and the penalty (no length
penalty, no format reward: format credit is the env's business), and no normalisation (that is
``grpo.group_advantages``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, ClassVar, TypeVar

from rankgym.errors import UserError
from rankgym.judges.group_judge import GroupJudge
from rankgym.judges.method import JudgeMethod
from rankgym.step_metrics import StepMetrics
from rankgym.types import Group, Trajectory

if TYPE_CHECKING:
    from rankgym.trainer.config import RewardSection

__all__ = [
    "ENTRY_POINT_GROUP",
    "REWARDS",
    "BlendedReward",
    "JudgeDroppedReward",
    "JudgeReward",
    "Reward",
    "StepMetrics",
    "StepRewards",
    "VerifiableReward",
    "blend_reward",
    "build_reward",
    "env_hack_signals",
    "judge_verdict",
    "load_reward_plugins",
    "register_reward",
    "reward_class",
    "reward_names",
    "step_rewards",
]

log = logging.getLogger(__name__)


class Reward:
    """A training reward type: what it needs, and how a trajectory's signals become its reward.

    Subclasses set ``name`` (the ``reward.kind`` that selects them), ``needs_judge``,
    ``judge_only`` and, to judge with another method than the group judge, ``judge_method``;
    they implement :meth:`blend`. Instances carry the ``[reward]`` settings they read
    (``verifiable_weight``, ``hack_penalty``, ``judge_threshold``). What it does not do: call
    the judge (the loop judges with ``judge_method`` before it scores) or normalise
    (``grpo.group_advantages``).
    """

    name: ClassVar[str] = ""
    """The config name, ``reward.kind = "<name>"``."""
    needs_judge: ClassVar[bool] = True
    """The loop builds a judge spec, judges every step's groups, runs the judge-check."""
    judge_only: ClassVar[bool] = False
    """The judge is the only signal: a failed judge-check stops the run (unless ``--force``) and
    ``[monitor] guard = "auto"`` is on."""
    judge_method: ClassVar[type[JudgeMethod]] = GroupJudge
    """The judging method (``rankgym.judges.method.JudgeMethod``) the loop judges groups with."""

    def __init__(
        self,
        verifiable_weight: float = 0.5,
        hack_penalty: bool = True,
        judge_threshold: float | None = None,
    ) -> None:
        self.verifiable_weight = verifiable_weight
        self.hack_penalty = hack_penalty
        self.judge_threshold = judge_threshold
        """When set, a judge score counts as its verdict, 1.0 at or above it and 0.0 below
        (:func:`judge_verdict`), before :meth:`blend` reads it."""

    @classmethod
    def from_section(cls, section: RewardSection) -> Reward:
        """This reward with a config's ``[reward]`` settings."""
        return cls(
            verifiable_weight=section.verifiable_weight,
            hack_penalty=section.hack_penalty,
            # "fit": graded until the [judge_train] stage fits a cut (trainer/judge_cut.py)
            judge_threshold=cut if isinstance(cut := section.judge_threshold, float) else None,
        )

    def blend(self, judge: float | None, verifiable: float | None) -> float | None:
        """Training reward of one trajectory; None (no signal) when a needed part is missing."""
        raise NotImplementedError(f"{type(self).__name__} must implement blend()")

    def without_judge(self) -> Reward | None:
        """This reward with the judge's share taken out (what ``[monitor] below_chance = "drop"``
        trains on once the judge is shown below chance), or None when nothing would be left to
        train on (a judge-only reward: its guard stops the run instead)."""
        return None

    def score(self, groups: Sequence[Group]) -> StepRewards:
        """The training rewards of one step's (judged, when ``needs_judge``) groups."""
        cut = self.judge_threshold

        def blend(judge: float | None, verifiable: float | None) -> float | None:
            return self.blend(judge if cut is None else judge_verdict(judge, cut), verifiable)

        return step_rewards(
            groups, judged=self.needs_judge, blend=blend, hack_penalty=self.hack_penalty
        )


def judge_verdict(score: float | None, threshold: float) -> float | None:
    """``score`` as a verdict: 1.0 at or above ``threshold``, 0.0 below, None stays None.

    What ``[reward] judge_threshold`` trains on: GRPO then learns, like from a pass/fail
    verifier, only where the judge splits a group into passes and failures, and nothing from
    the judge's graded order among attempts it places on the same side (on this project's
    tasks, a trained judge's order among failures leaned to the shorter, bench/RESULTS.md).
    """
    if score is None:
        return None
    return 1.0 if score >= threshold else 0.0


REWARDS: dict[str, type[Reward]] = {}
"""Reward types by config name, in registration order (``reward.kind``'s choices)."""

_R = TypeVar("_R", bound=type[Reward])


def register_reward(cls: _R) -> _R:
    """Class decorator: make ``cls`` selectable as ``reward.kind = cls.name``.

    Raises ``ValueError`` for a class without a name or a name already taken by another class.
    """
    if not cls.name:
        raise ValueError(f"{cls.__name__}.name is empty; give the reward type its config name")
    taken = REWARDS.get(cls.name)
    if taken is not None and taken is not cls:
        raise ValueError(f"reward kind {cls.name!r} is taken by {taken.__qualname__}")
    REWARDS[cls.name] = cls
    return cls


ENTRY_POINT_GROUP = "rankgym.rewards"
"""Installed packages add reward types here, one entry point per class:
``[project.entry-points."rankgym.rewards"] strict = "my_pkg.rewards:StrictReward"``."""

_plugins_loaded = False


def load_reward_plugins() -> None:
    """Import every ``rankgym.rewards`` entry point once and register its class.

    A plugin that fails to import, is not a :class:`Reward` subclass or takes a name already
    used is logged with its name and error and skipped; the others still load.
    """
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            cls = ep.load()
            if not (isinstance(cls, type) and issubclass(cls, Reward)):
                raise TypeError(f"{ep.value} is not a rankgym.trainer.rewards.Reward subclass")
            register_reward(cls)
        except Exception as e:  # a broken plugin must not break the other reward types
            log.warning("rankgym reward plugin %r failed to load: %s: %s", ep.name, type(e).__name__, e)  # fmt: skip


def reward_names() -> list[str]:
    """The registered ``reward.kind`` names (installed plugins included), in registration order."""
    load_reward_plugins()
    return list(REWARDS)


def reward_class(kind: str) -> type[Reward]:
    """The reward type registered as ``kind`` (looking in installed plugins too); ``UserError``
    naming the choices otherwise."""
    if kind not in REWARDS:
        load_reward_plugins()
    try:
        return REWARDS[kind]
    except KeyError:
        raise UserError(
            f"reward.kind {kind!r} is not a reward type; use one of "
            + ", ".join(repr(n) for n in REWARDS)
        ) from None


def build_reward(section: RewardSection) -> Reward:
    """The :class:`Reward` a config's ``[reward]`` section describes (built once per run)."""
    return reward_class(section.kind).from_section(section)


@register_reward
class JudgeReward(Reward):
    """``judge``: the judge's score alone, so a judge that cannot judge trains on noise (the
    judge-check then stops the run, and the guard watches it)."""

    name = "judge"
    judge_only = True

    def blend(self, judge: float | None, verifiable: float | None) -> float | None:
        """The judge's score; None for a trajectory of an unjudged group (it then has no
        signal and is left out of the update)."""
        return judge


@register_reward
class VerifiableReward(Reward):
    """``verifiable``: the env's verifiable reward alone; no judge runs."""

    name = "verifiable"
    needs_judge = False

    def blend(self, judge: float | None, verifiable: float | None) -> float | None:
        """The env's verifiable reward (None where the env has no check for the task)."""
        return verifiable


@register_reward
class BlendedReward(Reward):
    """``judge+verifiable``: ``(1 - w) * judge + w * verifiable``, ``w = verifiable_weight``."""

    name = "judge+verifiable"

    def blend(self, judge: float | None, verifiable: float | None) -> float | None:
        if judge is None or verifiable is None:
            return None
        return (1.0 - self.verifiable_weight) * judge + self.verifiable_weight * verifiable

    def without_judge(self) -> Reward:
        """The verifier's reward alone; the judge still runs, so the monitor keeps watching."""
        return JudgeDroppedReward(hack_penalty=self.hack_penalty)


class JudgeDroppedReward(VerifiableReward):
    """A blend whose judge was dropped (``[monitor] below_chance = "drop"``): the env's
    verifiable reward alone (``VerifiableReward.blend``), while the judge still judges every
    step (``needs_judge``) for the monitor and the store. Not a ``reward.kind`` of its own: the
    run's config keeps its kind."""

    name = "verifiable (judge dropped)"
    needs_judge = True


def blend_reward(
    judge: float | None, verifiable: float | None, kind: str, weight: float
) -> float | None:
    """Training reward of one trajectory under reward type ``kind`` (see :meth:`Reward.blend`)."""
    return reward_class(kind)(verifiable_weight=weight).blend(judge, verifiable)


def env_hack_signals(t: Trajectory) -> list[str]:
    """The hack signals the env raised for ``t`` (the judge's own ``judge_*`` ones left out)."""
    return [s for s in t.hack_signals if not s.startswith("judge_")]


@dataclass
class StepRewards:
    """The rewards of one step's groups, row per group, plus what went into them.

    ``rewards[g][i]`` is None when trajectory ``i`` of group ``g`` has no signal (unjudged, or
    no verifiable reward when the blend needs one). ``hack_penalized`` counts trajectories whose
    reward the penalty lowered (a flagged trajectory already at its group's minimum is not counted).
    """

    rewards: list[list[float | None]] = field(default_factory=list)
    judge_scores: list[float] = field(default_factory=list)
    verifiable: list[float] = field(default_factory=list)
    train: list[float] = field(default_factory=list)
    unjudged_groups: int = 0
    hack_flagged: int = 0
    hack_penalized: int = 0


def step_rewards(
    groups: Sequence[Group],
    *,
    judged: bool,
    blend: Callable[[float | None, float | None], float | None],
    hack_penalty: bool,
) -> StepRewards:
    """Training rewards of ``groups`` (see the module docstring). ``judged``: a judge ran;
    ``blend(judge_score, verifiable)`` is one trajectory's reward (a :meth:`Reward.blend`)."""
    out = StepRewards()
    for g in groups:
        ok = g.judgement is not None and g.judgement.status == "ok"
        out.unjudged_groups += int(judged and not ok)
        smap = g.judgement.score_map() if ok and g.judgement is not None else {}
        row: list[float | None] = []
        for t in g.trajectories:
            js, vr = smap.get(t.id), t.verifiable_reward
            row.append(blend(js, vr))
            if js is not None:
                out.judge_scores.append(js)
            if vr is not None:
                out.verifiable.append(vr)
        flagged = [bool(env_hack_signals(t)) for t in g.trajectories]
        out.hack_flagged += sum(flagged)
        scored = [r for r in row if r is not None]
        if hack_penalty and scored:
            low = min(scored)
            for i, bad in enumerate(flagged):
                r = row[i]
                if bad and r is not None and r > low:
                    row[i] = low
                    out.hack_penalized += 1
        out.train.extend(r for r in row if r is not None)
        out.rewards.append(row)
    return out
