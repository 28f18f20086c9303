"""rankgym.judges: the group judge over LiteLLM, its prompt, the embedded local judge, and
the agreement metrics that check the judge against people, verifiers and itself.

Entry points: :func:`judge_groups` (async; the trainer calls it every step),
:func:`default_spec`, ``rankgym.judges.agreement.agreement_report``. See docs/judging.md.

Modules: ``spec`` (JudgeSpec building, credentials, context budget), ``prompt`` (the
comparison request), ``calling`` (one LiteLLM call, error classes), ``parse`` (the reply),
``record`` (a presentation's record), ``subsets`` (groups too big for the context),
``signals`` (hack signals), ``method`` (the judge protocol: ``JudgeMethod`` with ``plan`` and
``judge``; docs/judging.md "Adding a judge method"), ``group_judge`` (the built-in method:
retry, cache, average, store),
``metrics``/``agreement`` (agreement statistics and reports), ``local_provider`` (the
embedded ``local/`` judge), ``commands`` (the CLI). ``rankgym judge-check`` (can a judge
judge?) rolls out an env, so it lives above both: ``rankgym.trainer.judge_check``.
"""

from .calling import JudgeFailed, RetryPolicy
from .group_judge import GroupJudge, judge_groups, judge_groups_sync
from .method import JudgeMethod, JudgePlan
from .parse import JudgeOutputError
from .prompt import build_prompt, default_rubric
from .record import judge_summary
from .signals import judge_hack_signals
from .spec import default_spec

summarize = judge_summary

__all__ = [
    "GroupJudge",
    "JudgeFailed",
    "JudgeMethod",
    "JudgeOutputError",
    "JudgePlan",
    "RetryPolicy",
    "build_prompt",
    "default_rubric",
    "default_spec",
    "judge_groups",
    "judge_groups_sync",
    "judge_hack_signals",
    "judge_summary",
    "summarize",
]
