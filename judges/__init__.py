"""rankgym.judges: the group judge over LiteLLM, its prompt, the embedded local judge, and
the agreement metrics that check the judge against people, verifiers and itself.

Entry points: :func:`judge_groups` (async; the trainer calls it every step),
:func:`default_spec`, ``rankgym.judges.agreement.agreement_report``. See docs/judging.md.
"""

from .group_judge import (
    GroupJudge,
    JudgeFailed,
    JudgeOutputError,
    RetryPolicy,
    default_spec,
    judge_groups,
    judge_groups_sync,
    judge_hack_signals,
    summarize,
)
from .prompt import build_prompt, default_rubric

__all__ = [
    "GroupJudge",
    "JudgeFailed",
    "JudgeOutputError",
    "RetryPolicy",
    "build_prompt",
    "default_rubric",
    "default_spec",
    "judge_groups",
    "judge_groups_sync",
    "judge_hack_signals",
    "summarize",
]
