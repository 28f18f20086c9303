"""Before training on a judge: a small judge-check, and a refusal when it cannot judge.

When the reward uses the judge (``Reward.needs_judge``: ``reward.kind`` ``judge`` or
``judge+verifiable``) and ``judge.check_groups > 0``, :func:`judge_preflight` runs
``rankgym judge-check`` with the reward's judge method on the run's env (``check_groups`` calibration groups of 4 noise levels, 3 orders each; see
``rankgym.trainer.judge_check``). The result is cached by (judge spec hash, env, kwargs, size, seed)
under ``$RANKGYM_CACHE/judge-checks/`` (with the store holding its groups and judgements), so a second run with the same judge costs nothing, and
it is written to the run's ``judge_check.json`` and returned in the run summary.

Decision, from the Kendall tau CI against the known order:

- CI above 0: the run goes on.
- judge-only reward and a CI that includes 0: the run stops before anything is written, with a
  one-line error naming the numbers and the ways out (``--force``, a stronger ``judge.model``,
  ``reward.kind = "judge+verifiable"``).
- blended reward (``judge+verifiable``): a warning, and the run goes on (the verifier carries
  the signal the judge may lack; the demo's embedded judge is in this case).
- no numbers (every calibration group unjudged, or an env without an oracle): a warning.

What it does not do: prove a judge good on the run's real groups (calibration groups come from
the oracle and random calls, easier than two similar policies), or re-check during the run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.errors import UserError
from rankgym.judges.group_judge import GroupJudge
from rankgym.judges.method import JudgeMethod
from rankgym.model import cache_dir
from rankgym.trainer.rewards import reward_class
from rankgym.types import JudgeSpec, content_hash

if TYPE_CHECKING:
    from rankgym.trainer.config import TrainConfig

__all__ = ["decide", "judge_preflight"]

log = logging.getLogger(__name__)

CHECK_GROUP_SIZE = 4
CHECK_PERMUTATIONS = 3
CACHE_VERSION = 2
"""2: the judge is shown the env's tools (older cached checks judged without them)."""


def checks_dir() -> Path:
    """Where judge-check results and their store live: ``$RANKGYM_CACHE/judge-checks``."""
    return cache_dir() / "judge-checks"


def _cache_path(
    cfg: TrainConfig, spec: JudgeSpec, groups: int, method: type[JudgeMethod] = GroupJudge
) -> Path:
    other = {} if method is GroupJudge else {"method": f"{method.__module__}.{method.__qualname__}"}
    key = content_hash(
        {
            **other,  # another judge method than the group judge is checked on its own
            "v": CACHE_VERSION,
            "spec": spec.spec_hash,
            "env": cfg.env.id,
            "kwargs": cfg.env.kwargs,
            "split": cfg.env.split,
            "groups": groups,
            "size": CHECK_GROUP_SIZE,
            "orders": CHECK_PERMUTATIONS,
            "seed": cfg.seed,
        }
    )
    return checks_dir() / f"{key}.json"


def _ci(r: dict[str, Any], name: str) -> str:
    v = r.get(name) or {}
    if v.get("value") is None:
        return f"{name} undefined"
    if v.get("ci_low") is None:
        return f"{name} {v['value']:+.2f}"
    return f"{name} {v['value']:+.2f} [{v['ci_low']:+.2f}, {v['ci_high']:+.2f}]"


def decide(report: dict[str, Any], reward_kind: str) -> tuple[str, str]:
    """``("ok" | "warn" | "stop", message)`` for a judge-check report and a reward kind."""
    tau = report.get("kendall_tau") or {}
    numbers = (
        f"judge-check of {report.get('judge')} on {report.get('env')} "
        f"({report.get('judged', 0)} groups): {_ci(report, 'kendall_tau')}, "
        f"{_ci(report, 'pairwise_accuracy')}, {_ci(report, 'position_consistency')}"
    )
    if tau.get("ci_low") is None:
        return "warn", numbers + "; too few judged groups to tell whether this judge can judge"
    if tau["ci_low"] > 0:
        return "ok", numbers
    if reward_class(reward_kind).judge_only:
        return "stop", (
            numbers + ": the tau CI includes 0, so this judge is not shown to tell better from "
            "worse, and a judge-only reward would train on noise. Options: rerun with --force "
            "to train anyway; a stronger judge.model (any LiteLLM model, e.g. "
            'openai/gpt-4.1-mini); or reward.kind = "judge+verifiable" (the blended reward)'
        )
    return "warn", (
        numbers + "; the tau CI includes 0: the verifier part of the blended reward carries "
        "the signal"
    )


def judge_preflight(
    cfg: TrainConfig,
    spec: JudgeSpec | None,
    *,
    force: bool = False,
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """Run (or read from cache) the judge-check for a training config; stop or warn.

    Returns the report with ``decision`` and ``message`` added, or None when the reward does
    not use the judge or ``judge.check_groups`` is 0. Raises ``UserError`` for a judge-only
    reward whose tau CI includes 0, unless ``force``.
    """
    from rankgym.store import Store
    from rankgym.trainer.judge_check import CheckConfig, run_check

    groups = int(getattr(cfg.judge, "check_groups", 0) or 0)
    if spec is None or not reward_class(cfg.reward.kind).needs_judge or groups <= 0:
        return None
    say = echo or (lambda m: log.info("%s", m))
    method = reward_class(cfg.reward.kind).judge_method
    path = _cache_path(cfg, spec, groups, method)
    report: dict[str, Any] | None = None
    if path.is_file():
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            report["cached"] = True
        except (OSError, ValueError):
            report = None  # a damaged cache file: run the check again
    if report is None:
        say(
            f"judge-check: {groups} calibration groups of {cfg.env.id} with {spec.model} "
            "(once per judge spec; judge.check_groups = 0 skips it)"
        )
        check = CheckConfig(
            env_id=cfg.env.id, groups=groups, group_size=CHECK_GROUP_SIZE,
            permutations=CHECK_PERMUTATIONS, seed=cfg.seed, split=cfg.env.split,
            resamples=1000, concurrency=max(1, cfg.judge.concurrency), env_kwargs=cfg.env.kwargs,
        )  # fmt: skip
        try:
            checks_dir().mkdir(parents=True, exist_ok=True)
            with Store(checks_dir() / "judge-check.db") as store:
                report = run_check(check, spec, store, method=method).to_dict()
        except UserError:
            raise
        except Exception as e:  # the check is advice: a failure to run it must not stop training
            log.warning("judge-check could not run: %s: %s", type(e).__name__, e)
            report = {"judge": spec.model, "env": cfg.env.id, "error": f"{type(e).__name__}: {e}"}
        path.parent.mkdir(parents=True, exist_ok=True)
        if "error" not in report:
            path.write_text(json.dumps(report), encoding="utf-8")
    decision, message = decide(report, cfg.reward.kind)
    report.update(decision=decision, message=message, forced=bool(force and decision == "stop"))
    if decision == "stop" and not force:
        raise UserError(message)
    if decision != "ok":
        say("warning: " + message + (" (--force: training anyway)" if force else ""))
    else:
        say(message)
    return report
