"""Peak resident memory of each phase of ``rankgym demo``, in one process, as the demo runs.

Runs ``rankgym demo`` in this process (same arguments) with its phases wrapped: judge-check
(preflight), model load, SFT, and per GRPO step rollout / judge / update, then the evaluation's
model load and each evaluated policy. At every phase boundary it reads the kernel's peak
resident size (``VmHWM``) for the phase that ends, the resident size at its end, glibc's heap
bytes in use / free / mmapped (``mallinfo2``), and the bytes of live torch tensors
(deduplicated by storage: what the Python side still holds), then resets the peak counter
(``/proc/self/clear_refs``). So "peak" is exact per phase, not sampled, and "end" vs
"tensors" vs the heap numbers separates live data from memory the allocator has not handed
back.

What it does not do: change what the demo computes, or count child processes (there are none).

    RANKGYM_CACHE=/tmp/h1/cache .venv/bin/python bench/demo_memory.py --json /tmp/h1/phases.json \
        -- --steps 1 --eval-tasks 6 --eval-samples 5 --out /tmp/h1/run --quiet
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from memory import proc_status  # bench/memory.py, beside this script

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def heap_stats() -> dict[str, float]:
    """glibc's ``mallinfo2``: heap bytes in use and free (not returned), and mmapped blocks, in GB;
    empty where there is no glibc."""
    import ctypes
    import ctypes.util

    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in names.split()]

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallinfo2.restype = MallInfo2
        m = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    gb = 2**30
    return {"heap_used_gb": round(m.uordblks / gb, 3), "heap_free_gb": round(m.fordblks / gb, 3),
            "mmapped_gb": round(m.hblkhd / gb, 3)}  # fmt: skip


def live_tensor_bytes() -> int:
    """Bytes of the distinct storages of every torch tensor the garbage collector can see."""
    import torch

    seen: dict[int, int] = {}
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.Tensor) and o.device.type == "cpu":
                s = o.untyped_storage()
                seen[s.data_ptr()] = s.nbytes()
        except (RuntimeError, ReferenceError):
            continue
    return sum(seen.values())


class Phases:
    """Flat phase bookkeeping: :meth:`enter` closes the current phase and opens ``name``."""

    def __init__(self, tensors: bool) -> None:
        self.rows: list[dict[str, Any]] = []
        self.name = "start (imports, config)"
        self.t = time.perf_counter()
        self.tensors = tensors

    def enter(self, name: str) -> None:
        peak, end = proc_status("VmHWM"), proc_status("VmRSS")
        row = {
            "phase": self.name,
            "seconds": round(time.perf_counter() - self.t, 1),
            "peak_gb": round(peak / 2**30, 3),
            "end_gb": round(end / 2**30, 3),
        }
        if self.tensors:
            row["tensors_gb"] = round(live_tensor_bytes() / 2**30, 3)
        row.update(heap_stats())
        self.rows.append(row)
        print("PHASE " + json.dumps(row), file=sys.stderr, flush=True)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        self.name, self.t = name, time.perf_counter()

    def wrap(self, fn: Callable[..., Any], name: str | Callable[..., str]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def inner(*a: Any, **kw: Any) -> Any:
            label = name(*a, **kw) if callable(name) else name
            self.enter(label)
            try:
                return fn(*a, **kw)
            finally:
                self.enter(f"after {label}")

        return inner


def instrument(ph: Phases) -> None:
    """Wrap the demo's phase entry points (module attributes the demo looks up at call time)."""
    from rankgym.envs import rollout
    from rankgym.judges import group_judge
    from rankgym.trainer import demo, evaluate, loop

    loop.judge_preflight = ph.wrap(loop.judge_preflight, "judge-check")
    loop.Trainer._build_model = ph.wrap(loop.Trainer._build_model, "load model")
    loop.Trainer._warm_start = ph.wrap(loop.Trainer._warm_start, "sft")
    loop.grpo_update = ph.wrap(loop.grpo_update, "update")
    group_judge.judge_groups_sync = ph.wrap(group_judge.judge_groups_sync, "judge")
    rollout.rollout_groups = ph.wrap(rollout.rollout_groups, "rollout")
    demo.policy_from_adapter = ph.wrap(demo.policy_from_adapter, "eval: load adapter")
    names = iter(["eval: base", "eval: sft", "eval: trained", "eval: more"])
    evaluate.rollout_groups = ph.wrap(evaluate.rollout_groups, lambda *a, **k: next(names))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--json", help="write the phase rows to this file")
    ap.add_argument("--no-tensors", action="store_true", help="skip the live-tensor count")
    ap.add_argument("demo_args", nargs=argparse.REMAINDER, help="-- then `rankgym demo` options")
    args = ap.parse_args()
    ph = Phases(tensors=not args.no_tensors)
    from rankgym.cli import main as cli_main

    instrument(ph)
    demo_args = [a for a in args.demo_args if a != "--"]
    with open("/proc/loadavg") as fh:
        load0 = fh.read().split()[:3]
    t0 = time.perf_counter()
    try:
        cli_main(["demo", "--json", *demo_args])
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    ph.enter("end")
    with open("/proc/loadavg") as fh:
        load1 = fh.read().split()[:3]
    peak = max(r["peak_gb"] for r in ph.rows)
    print(f"overall peak {peak:.2f} GB, {time.perf_counter() - t0:.0f} s, load {load0} -> {load1}")
    for r in ph.rows:
        extra = f"  tensors {r['tensors_gb']:.2f}" if "tensors_gb" in r else ""
        print(f"{r['phase']:28s} {r['seconds']:7.1f} s  peak {r['peak_gb']:.2f}  end {r['end_gb']:.2f}{extra}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_start": load0, "load_end": load1, "phases": ph.rows}, fh, indent=1)


if __name__ == "__main__":
    main()
