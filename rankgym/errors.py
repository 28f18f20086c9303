"""rankgym's errors: one base, one line per subclass.

Every error a user can cause derives from :class:`RankgymError`; ``rankgym`` (the CLI) prints
its message on one line and exits 2, with no traceback. Errors of other packages keep their own
module (``JudgeFailed`` in ``rankgym.judges``, ``UnknownEnvError`` in ``rankgym.envs``,
``EmbeddedModelMissing`` in ``rankgym.model``) and add this base to their old one, so existing
``except RuntimeError``/``except KeyError`` clauses keep working.

What this module does not do: it holds no logic and no messages; the raiser words the message,
naming the bad input and what to do about it.
"""

from __future__ import annotations


class RankgymError(Exception):
    """Base of every error rankgym reports to a user as one line (exit code 2)."""


class UserError(RankgymError):
    """Bad user input (a flag, a path, a config value); the message names it and the fix."""


class StoreError(RankgymError, RuntimeError):
    """A store that cannot be used as asked (missing or damaged file, newer schema, bad input)."""


class StoreBusy(StoreError):
    """Another process held the store's write lock for longer than ``busy_seconds``."""
