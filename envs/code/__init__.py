"""``rankgym/CodeTests-v0``: HumanEval and our own function-writing tasks, graded in a sandbox.

See ``env.py`` for the episode and rewards, ``grading.py`` for how values are compared,
``signals.py`` for the hack signals and ``rankgym.envs.sandbox`` for what the sandbox does and
does not protect against.
"""

from rankgym.envs.code.env import CodeTestsEnv, Grade, grade_submission
from rankgym.envs.code.tasks import CodeTask, all_specs

__all__ = ["CodeTask", "CodeTestsEnv", "Grade", "all_specs", "grade_submission"]
