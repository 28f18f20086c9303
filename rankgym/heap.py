"""Keeping freed activation memory from staying resident (glibc's ``mallopt``/``malloc_trim``).

Training and long prefills free GBs of activations; glibc keeps much of it mapped unless told
otherwise (bench/memory.py measured 5.6 GB resident for ~1 GB live). :func:`bound_heap` sets
the thresholds once per process, :func:`release_freed_memory` returns what is free between
phases, :func:`bound_primitive_caches` caps oneDNN's per-shape kernel caches (the heap that
stayed *in use* and grew over a demo). Re-exported by ``rankgym.model``.

What it does not do: anything where there is no glibc (macOS, musl: both return False), or
run the garbage collector.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

__all__ = [
    "MMAP_THRESHOLD",
    "PRIMITIVE_CACHE_CAPACITY",
    "bound_heap",
    "bound_primitive_caches",
    "default_mmap_threshold",
    "release_freed_memory",
]


def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


MMAP_THRESHOLD = 4 << 20
"""Allocations of at least this many bytes get their own mapping (see :func:`bound_heap`)."""
THRESHOLD_ENV = "RANKGYM_MMAP_THRESHOLD"
"""Environment variable: bytes for :func:`bound_heap`'s default threshold (bench/memory.py)."""


PRIMITIVE_CACHE_CAPACITY = 64
"""Entries kept in each of oneDNN's two per-shape caches (see :func:`bound_primitive_caches`)."""
CACHE_ENV = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
"""oneDNN's primitive cache and ideep's (PyTorch's oneDNN wrapper) computation cache."""


def bound_primitive_caches(capacity: int = PRIMITIVE_CACHE_CAPACITY) -> bool:
    """Cap oneDNN's caches of compiled kernels, one entry per distinct matmul shape.

    PyTorch runs bf16 matmuls on CPU through oneDNN, which keeps each shape's primitive in two
    LRU caches of 1,024 entries by default. Every prefill, decode batch size and training
    micro-batch is a new shape, so over a demo glibc's heap *in use* grew by ~0.9 GB while live
    tensors stayed at 0.3 GB (bench/demo_memory.py; ~0.5 MB per entry). ``capacity`` entries
    hold a step's working set (a few shapes per forward or backward). Sets the environment
    variables ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` and ``LRU_CACHE_CAPACITY`` unless already set
    (a user's value wins); oneDNN reads them at its first matmul, so this must run before the
    process's first bf16 forward and changes nothing after it. Returns whether it set either.
    A capacity of 0 (no cache) crashes PyTorch 2.x's CPU matmul here; refused.
    """
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1 (0 crashes oneDNN's matmul), got {capacity}")
    changed = False
    for name in CACHE_ENV:
        if not os.environ.get(name):
            os.environ[name] = str(int(capacity))
            changed = True
    return changed


def default_mmap_threshold() -> int:
    """``$RANKGYM_MMAP_THRESHOLD`` (bytes) when set to a whole number, else :data:`MMAP_THRESHOLD`."""
    raw = os.environ.get(THRESHOLD_ENV, "").strip()
    return int(raw) if raw.isdigit() else MMAP_THRESHOLD


def bound_heap(mmap_threshold: int | None = None, trim_threshold: int = 32 << 20) -> bool:
    """Stop glibc from keeping freed activation memory resident (``mallopt``).

    By default glibc raises its mmap threshold each time a large block is freed (up to 32 MB),
    so later activations come from the heap, and a fragmented heap is not returned to the OS:
    one GRPO micro-batch of 12 rows x 1,100 tokens then left 5.6 GB resident for ~1 GB live
    (bench/memory.py). A fixed threshold keeps blocks of ``mmap_threshold`` bytes and more in
    their own mappings, unmapped on free. Costs page faults on each large allocation (measured
    ~0-25% slower on a loaded 2-core box). Also calls :func:`bound_primitive_caches` (effective
    only before the first bf16 matmul). Process-wide and idempotent; returns False where
    there is no glibc (macOS, musl); never raises.
    """
    threshold = default_mmap_threshold() if mmap_threshold is None else mmap_threshold
    bound_primitive_caches()  # the heap in use that grows with every new matmul shape
    try:
        libc = _libc()
        ok = libc.mallopt(-3, int(threshold))  # M_MMAP_THRESHOLD
        ok &= libc.mallopt(-1, int(trim_threshold))  # M_TRIM_THRESHOLD
        return bool(ok)
    except (OSError, AttributeError):
        return False


def release_freed_memory() -> bool:
    """Hand memory that glibc keeps after large frees back to the OS (``malloc_trim(0)``).

    Call between phases (after SFT, after a GRPO update): glibc otherwise keeps several GB of
    freed arenas resident. Cheap (well under a millisecond when there is little to return); does
    not run the garbage collector. Returns False where there is no glibc (macOS, musl); never
    raises.
    """
    try:
        return bool(_libc().malloc_trim(0))
    except (OSError, AttributeError):
        return False
