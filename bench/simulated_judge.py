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


def group_stats(
    passes: Sequence[int], rewards: Sequence[float]
) -> tuple[int, int, float, float, float]:
    """``(decided pairs, ordered right, sum r*p, sum r*r, sum p*p)`` of one group, centred.

    The last three are the sums the monitor's signal cosine needs (trainer/monitor_signal.py).
    """
    right = decided = 0
    for i, (pi, ri) in enumerate(zip(passes, rewards, strict=True)):
        for pj, rj in zip(passes[i + 1 :], rewards[i + 1 :], strict=True):
            if pi != pj:
                decided += 1
                right += int((ri - rj) * (pi - pj) > 0)
    mr, mp = sum(rewards) / len(rewards), sum(passes) / len(passes)
    cr = [r - mr for r in rewards]
    cp = [p - mp for p in passes]
    return (
        decided,
        right,
        sum(a * b for a, b in zip(cr, cp, strict=True)),
        sum(a * a for a in cr),
        sum(b * b for b in cp),
    )


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
        labels = iter([t.verifier_outcome() for g in groups for t in g.trajectories])
        # step_rewards calls blend once per trajectory, groups then trajectories in order
        out = step_rewards(
            groups,
            judged=False,
            blend=lambda _judge, _verifiable: self.blend(None, next(labels)),
            hack_penalty=self.hack_penalty,
        )
        decided = right = 0
        rp = rr = pp = 0.0
        for g, row in zip(groups, out.rewards, strict=True):
            kept = [
                (int(o >= SUCCESS), r)
                for t, r in zip(g.trajectories, row, strict=True)
                if r is not None and (o := t.verifier_outcome()) is not None
            ]
            if len(kept) < 2:
                continue
            d, k, a, b, c = group_stats([p for p, _ in kept], [r for _, r in kept])
            decided, right, rp, rr, pp = decided + d, right + k, rp + a, rr + b, pp + c
        self.steps.append(
            {
                "decided_pairs": decided,
                "right": right,
                "pairwise": round(right / decided, 3) if decided else None,
                "signal": round(rp / math.sqrt(rr * pp), 3) if rr > 0 and pp > 0 else None,
            }
        )
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
