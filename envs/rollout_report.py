"""What a rollout did: counts, rewards, throughput, and its errors named (not just counted).

``summarize`` turns finished groups into the dict ``rankgym rollout --json`` prints;
``error_lines`` words its errors for the text summary; ``RolloutResult`` is what
``rollout_to_store`` returns.

What this module does not do: no rollout and no storing; it only reads Groups.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rankgym.terminal import printable
from rankgym.types import Group

__all__ = ["RolloutResult", "error_kind", "error_lines", "summarize"]


@dataclass
class RolloutResult:
    """What ``rollout_to_store`` did: the groups it wrote and the ones it found already there."""

    run_id: str
    groups: list[Group]
    skipped_group_ids: list[str]
    wall_s: float
    success_threshold: float = 1.0
    failed: list[dict[str, str]] = field(default_factory=list)
    """Groups rolled out but not stored: ``group_id``, ``task_id`` and the store's ``error``."""
    group_ids: list[str] = field(default_factory=list)
    """Every group of the task selection in task order: stored, skipped and failed (``groups``
    is in the order they finished)."""

    def summary(self) -> dict[str, Any]:
        """``summarize`` of the stored groups plus ``run_id``, ``skipped_groups``,
        ``failed_groups`` (count) and ``failures`` (the first 20 failed groups)."""
        out = summarize(self.groups, self.wall_s, self.success_threshold)
        out.update(
            run_id=self.run_id,
            skipped_groups=len(self.skipped_group_ids),
            failed_groups=len(self.failed),
            failures=self.failed[:20],
        )
        return out


def summarize(
    groups: Sequence[Group], wall_s: float, success_threshold: float = 1.0
) -> dict[str, Any]:
    """Counts, mean verifiable reward, success rate and throughput of finished groups.

    ``success_rate`` is the share of *all* trajectories (errors included) whose verifiable
    reward is >= ``success_threshold``; ``mean_verifiable_reward`` averages the trajectories
    that have one (None if none has).
    """
    trajs = [t for g in groups for t in g.trajectories]
    kinds = Counter(error_kind(t.error) for t in trajs if t.error)
    rewards = [t.verifiable_reward for t in trajs if t.verifiable_reward is not None]
    tokens = sum(int(t.metrics.get("completion_tokens") or 0) for t in trajs)
    turns = sum(int(t.metrics.get("turns") or 0) for t in trajs)
    return {
        "groups": len(groups),
        "trajectories": len(trajs),
        "errors": sum(t.error is not None for t in trajs),
        "error_kinds": [{"error": k, "count": n} for k, n in kinds.most_common(5)],
        "invalid_unicode": sum(bool(t.metrics.get("invalid_unicode")) for t in trajs),
        "truncated": sum(t.truncated for t in trajs),
        "mean_verifiable_reward": (sum(rewards) / len(rewards)) if rewards else None,
        "success_rate": (
            sum(r >= success_threshold for r in rewards) / len(trajs) if trajs else None
        ),
        "success_threshold": success_threshold,
        "mean_turns": turns / len(trajs) if trajs else None,
        "completion_tokens": tokens,
        "hack_signals": sum(len(t.hack_signals) for t in trajs),
        "wall_s": round(wall_s, 3),
        "tokens_per_s": round(tokens / wall_s, 2) if wall_s > 0 else None,
        "episodes_per_min": round(60 * len(trajs) / wall_s, 2) if wall_s > 0 else None,
    }


def error_kind(error: str) -> str:
    """An error's first line, cut to 160 characters (so alike errors count together)."""
    line = error.strip().splitlines()[0] if error.strip() else "(empty error)"
    return line if len(line) <= 160 else line[:157] + "..."


def error_lines(summary: dict[str, Any]) -> list[str]:
    """Text lines naming a rollout summary's errors: the commonest kinds and unstored groups.

    Control characters from agent or env text are escaped (safe to print to a terminal).
    """
    lines = [
        f"  {k['count']} x {printable(k['error'], one_line=True)}"
        for k in summary.get("error_kinds") or []
    ]
    if lines:
        lines.insert(0, "episode errors (commonest first):")
    failed = summary.get("failures") or []
    if summary.get("failed_groups"):
        lines.append(f"{summary['failed_groups']} groups could not be stored (rerun to retry):")
        lines += [
            printable(f"  group {f['group_id']} (task {f['task_id']}): {f['error']}", True)
            for f in failed
        ]
    return lines
