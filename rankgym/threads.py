"""How many torch threads to run: the cores free of other work now, or ``$RANKGYM_THREADS``.

Two jobs on two cores each asking for two OpenMP threads run many times slower than one
thread each (bench/threads.py), so every command calls ``set_torch_threads()`` once at start.
What it does not do: follow the load as it changes during a run.
"""

from __future__ import annotations

import logging
import os
import time

from rankgym.errors import UserError

log = logging.getLogger(__name__)


def other_busy_cores(window_s: float = 0.3) -> float:
    """How many CPU cores other processes keep busy right now (sampled over ``window_s``).

    Reads ``/proc/stat`` twice while this process sleeps; falls back to the 1-minute load
    average where there is no ``/proc`` (macOS). Counts all of the machine's cores, not a cgroup
    quota.
    """

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as fh:
            vals = [int(x) for x in fh.readline().split()[1:]]
        idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
        return sum(vals[:8]), idle

    try:
        t0, i0 = sample()
        time.sleep(window_s)
        t1, i1 = sample()
    except (OSError, ValueError, IndexError):
        return float(os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0.0
    total = t1 - t0
    if total <= 0:
        return 0.0
    return (1.0 - (i1 - i0) / total) * (os.cpu_count() or 1)


def choose_threads(cpus: int, busy: float) -> int:
    """Torch threads for ``cpus`` usable cores when others keep ``busy`` cores busy: the free
    cores, rounded, at least 1. More OpenMP threads than free cores stall each other."""
    return max(1, min(cpus, round(cpus - busy)))


def _usable_cores() -> int:
    """The cores this process may run on (its affinity mask, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def set_torch_threads() -> int:
    """Set torch's intra-op threads from ``$RANKGYM_THREADS``, else from the free cores now.

    Returns the number set; raises ``UserError`` for a bad ``RANKGYM_THREADS`` and warns when
    it asks for more threads than there are free cores. Does not adapt later if the load
    changes; set ``RANKGYM_THREADS`` to pin it.
    """
    import torch

    env = os.environ.get("RANKGYM_THREADS", "").strip()
    pinned: int | None = None
    if env:
        try:
            pinned = int(env)
        except ValueError:
            raise UserError(f"RANKGYM_THREADS={env!r} is not a whole number of threads") from None
        if pinned < 1:
            raise UserError(f"RANKGYM_THREADS={env!r} must be at least 1")
    cpus, busy = _usable_cores(), other_busy_cores()
    free = choose_threads(cpus, busy)
    if pinned is None:
        n = free
        log.info("torch threads: %d (%d cores, %.1f busy with other work)", n, cpus, busy)
    else:
        n = pinned
        if n > free:
            log.warning(
                "RANKGYM_THREADS=%d but only %d of %d cores are free (%.1f busy with other "
                "work): OpenMP threads beyond the free cores wait on each other and can make "
                "this run many times slower; unset RANKGYM_THREADS to fit the free cores",
                n, free, cpus, busy,
            )  # fmt: skip
    torch.set_num_threads(n)
    return n
