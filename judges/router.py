"""Old home of the LiteLLM Router: ``rankgym.judges.router`` is now ``rankgym.router``.

The router moved to core so that the envs' ``litellm:`` policy and the judges share it
without importing each other. This name stays importable for existing code and configs: it is
the same module object (so ``install``/``uninstall`` and module state are shared), not a copy.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rankgym import router as _router

if TYPE_CHECKING:  # what the swap below makes true at run time, spelled for the type checker
    from rankgym.router import *  # noqa: F403

sys.modules[__name__] = _router
