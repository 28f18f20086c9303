"""A simulated judge for calibration: the verifier's pass/fail seen through random ranking errors.

Question it answers: how often must a judge order GRPO's own decided pairs right (a pass above
a failure) before judge-only GRPO teaches the demo's policy as much as the verifier does? Its
reward for one trajectory is ``pass + sigma * z``, ``pass`` = 1 when the verifiable reward is at
least 1.0 (the success threshold of the evaluation and of the judge monitor), ``z`` a standard
normal draw per trajectory, and ``sigma`` set so a pass outranks a failure with probability
``Phi(1 / (sigma * sqrt(2)))`` = the accuracy asked for. Two trajectories the verifier ties are
ordered at random, as a judge that ranks every group does (the verifier would give them no
advantage). ``simulated-1.0`` is the pass/fail itself (no noise, ties stay tied).

What it is not: a judge. No model reads anything, and its errors are independent of the
trajectory, where a real judge's follow its length, wording and position (bench/RESULTS.md,
sessions 16-24). So an arm at accuracy ``a`` bounds from above what a judge of accuracy ``a``
without such a lean can teach in the same steps.

Arms ``simulated-0.85`` etc. in bench/reward_ablation.py register themselves through
:func:`simulated_kind`; each run's realized pairwise accuracy and signal (the monitor's cosine
between the centred reward and the centred pass/fail) are recorded per step.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any, ClassVar

from rankgym.judges.metrics import unit_stats
from rankgym.trainer.monitor_signal import centred_unit, judge_signal
from rankgym.trainer.rewards import REWARDS, Reward, StepRewards, register_reward, step_rewards
from rankgym.types import Group

PREFIX = "simulated-"
SUCCESS = 1.0


def sigma_for(accuracy: float) -> float:
    """The noise scale at which a pass outranks a failure with probability ``accuracy``; 0 at
    1.0 (the verifier's pass/fail itself: equal labels tie and give no advantage)."""
    if accuracy == 1.0:
        return 0.0
    if not 0.5 < accuracy < 1.0:
        raise ValueError(f"simulated judge accuracy {accuracy} must lie in (0.5, 1]")
    return 1.0 / (math.sqrt(2.0) * NormalDist().inv_cdf(accuracy))


def step_record(groups: Sequence[tuple[Sequence[int], Sequence[float]]]) -> dict[str, Any]:
    """A step's decided pairs (a pass and a failure of one group), how many the rewards order
    right, their share, and the monitor's signal cosine (trainer/monitor_signal.py), from each
    group's ``(passes, rewards)``."""
    decided = right = 0
    units = []
    for i, (passes, rewards) in enumerate(groups):
        stats = unit_stats(rewards, passes)
        decided += stats.pairs - stats.tied_b  # pairs the verifier's pass/fail tells apart
        right += stats.concordant
        units.append(centred_unit(str(i), 0, rewards, [float(p) for p in passes]))
    signal = judge_signal(units)
    return {
        "decided_pairs": decided,
        "right": right,
        "pairwise": round(right / decided, 3) if decided else None,
        "signal": None if signal is None else round(signal, 3),
    }


class SimulatedJudgeReward(Reward):
    """Judge-only reward ``pass + sigma * z`` (module docstring); needs no judge call."""

    name: ClassVar[str] = ""
    needs_judge: ClassVar[bool] = False
    accuracy: ClassVar[float] = 0.75

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sigma = sigma_for(self.accuracy)
        self.rng = random.Random(self.name)  # a rerun of an arm draws the same noise
        self.steps: list[dict[str, Any]] = []
        """Per scored step: decided pairs, how many ordered right, the signal cosine."""

    def blend(self, judge: float | None, verifiable: float | None) -> float | None:
        """``pass + sigma * z`` of a verifier label (None: unlabelled, no signal)."""
        if verifiable is None:
            return None
        return float(verifiable >= SUCCESS) + self.sigma * self.rng.gauss(0.0, 1.0)

    def score(self, groups: Sequence[Group]) -> StepRewards:
        """Rewards from each trajectory's ``verifier_outcome`` (an episode cut at its turn limit
        is a failure the judge sees, where the verifier arm gives it no signal), then the step's
        realized pairwise accuracy and signal."""
        labels = [[t.verifier_outcome() for t in g.trajectories] for g in groups]
        flat = iter([o for row in labels for o in row])
        # step_rewards calls blend once per trajectory, groups then trajectories in order
        out = step_rewards(
            groups,
            judged=False,
            blend=lambda _judge, _verifiable: self.blend(None, next(flat)),
            hack_penalty=self.hack_penalty,
        )
        scored = []
        for outcomes, row in zip(labels, out.rewards, strict=True):
            kept = [(int(o >= SUCCESS), r) for o, r in zip(outcomes, row, strict=True)
                    if r is not None and o is not None]  # fmt: skip
            if len(kept) >= 2:
                scored.append(([p for p, _ in kept], [r for _, r in kept]))
        self.steps.append(step_record(scored))
        return out

    def calibration(self) -> dict[str, Any]:
        """The run's realized pairwise accuracy over every decided pair, and per step."""
        decided = sum(s["decided_pairs"] for s in self.steps)
        right = sum(s["right"] for s in self.steps)
        return {
            "accuracy_asked": self.accuracy,
            "sigma": round(self.sigma, 4),
            "pairwise_run": round(right / decided, 3) if decided else None,
            "decided_pairs_run": decided,
            "steps": self.steps,
        }


def simulated_kind(kind: str) -> str:
    """Register ``simulated-<accuracy>`` as a reward kind (idempotent) and return it."""
    if not kind.startswith(PREFIX):
        raise ValueError(f"{kind!r} is not a simulated judge arm ({PREFIX}<accuracy>)")
    if kind in REWARDS:
        return kind
    try:
        acc = float(kind[len(PREFIX) :])
    except ValueError:
        raise ValueError(f"{kind!r}: write the accuracy as a number, e.g. {PREFIX}0.85") from None
    sigma_for(acc)  # fails early on an accuracy outside (0.5, 1]
    cls = type(
        f"SimulatedJudge{int(round(acc * 1000))}",
        (SimulatedJudgeReward,),
        {"name": kind, "accuracy": acc, "__doc__": SimulatedJudgeReward.__doc__},
    )
    register_reward(cls)
    return kind
