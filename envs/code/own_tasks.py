"""The project's own code tasks: a canonical solution each, with visible and hidden inputs.

Each entry is ``(canonical source, visible inputs, hidden inputs)``. The prompt shown to the
agent is the function's signature and docstring (``tasks.prompt_of``); the expected outputs are
the canonical solution's return values, computed in the grading process (never in a sandbox).
Hidden inputs include the edge cases the visible ones leave out, so code that special-cases the
visible tests fails them.
"""

from __future__ import annotations

from rankgym.envs.code.own_sequences import SEQUENCE_TASKS
from rankgym.envs.code.own_strings import STRING_TASKS

__all__ = ["OWN_TASKS"]

OWN_TASKS: list[tuple[str, list[tuple], list[tuple]]] = SEQUENCE_TASKS + STRING_TASKS
"""``(canonical source, visible inputs, hidden inputs)`` per task, in a fixed order."""
