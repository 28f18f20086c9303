"""Test-wide settings: offline, local cost map, a shared model cache, few threads."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault(
    "RANKGYM_CACHE", str(Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "rgcache")
)

import pytest  # noqa: E402


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A path for a fresh SQLite store in the test's temp dir."""
    return tmp_path / "store.db"


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module: on a shared 2-core box, 2 OpenMP threads stall each other 10x+."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
