"""Atomic per-step checkpoints: a standard peft adapter plus the trainer state to resume exactly.

Layout of ``<out_dir>/checkpoints/step-000003/`` (the state after 3 completed updates):

- ``adapter_config.json``, ``adapter_model.safetensors``: what ``model.save_pretrained`` writes,
  so ``PeftModel.from_pretrained(base, dir)`` (and vLLM ``--lora-modules``) load it as is;
- ``trainer_state.pt``: optimizer and scheduler state dicts, RNG states, step counter;
- ``meta.json``: step, run id, the step's metrics (re-logged if the process died before the
  store write).

A checkpoint is written into ``step-000003.tmp-<pid>`` and renamed into place, then the
``latest`` file is replaced (``os.replace``); a crash leaves either the old or the new
checkpoint, never half of one. Stale ``*.tmp-*`` dirs are removed on the next save.

What it does not do: it does not save the base model (the adapter names it in
``base_model_name_or_path``), and it does not sync to remote storage.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from rankgym.credentials import redact
from rankgym.errors import UserError

if TYPE_CHECKING:
    from peft import PeftModel
    from torch.optim.lr_scheduler import LRScheduler

PREFIX = "step-"
STATE_FILE = "trainer_state.pt"
META_FILE = "meta.json"


def checkpoint_dir(out_dir: str | Path) -> Path:
    return Path(out_dir) / "checkpoints"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


INFERENCE_ADAPTERS = ("judge-", "adapter-")
"""Name prefixes of adapters loaded by name into the shared base for inference only: a local
judge's (``judge-<hash>``, judges/local_provider.py) and another policy's (``adapter-<hash>``,
``rankgym.model.adapter_on_base``, e.g. the SFT policy the ``[judge_train]`` stage rolls out)."""


def training_adapters(model: PeftModel) -> list[str] | None:
    """The adapters a checkpoint holds: the trainer's own, i.e. not loaded for inference
    (:data:`INFERENCE_ADAPTERS`) and, where any has one, with a trainable weight. None (peft's
    "every adapter") only for a model that has no adapter names at all."""
    names = [str(n) for n in getattr(model, "peft_config", {}) or {}]
    own = [n for n in names if not n.startswith(INFERENCE_ADAPTERS)]
    trainable = {
        n for pn, p in model.named_parameters() if p.requires_grad for n in own if f".{n}." in pn
    }
    return [n for n in own if n in trainable] or own or None


def save_checkpoint(
    out_dir: str | Path,
    step: int,
    model: PeftModel,
    optimizer: torch.optim.Optimizer,
    scheduler: LRScheduler | None,
    meta: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write the checkpoint for ``step`` completed updates atomically; return its directory."""
    root = checkpoint_dir(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(f"{PREFIX}*.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    final = root / f"{PREFIX}{step:06d}"
    tmp = root / f"{final.name}.tmp-{os.getpid()}"
    model.save_pretrained(str(tmp), selected_adapters=training_adapters(model))
    torch.save(
        {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "rng": rng_state(),
        },
        tmp / STATE_FILE,
    )
    (tmp / META_FILE).write_text(json.dumps({"step": step, **meta}, default=str, indent=1))
    for f in tmp.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    if final.exists():  # a previous attempt at this step that finished but was not "latest"
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(root)
    latest_tmp = root / f"latest.tmp-{os.getpid()}"
    latest_tmp.write_text(final.name)
    os.replace(latest_tmp, root / "latest")
    _fsync_dir(root)
    done = [p for p in sorted(root.glob(f"{PREFIX}[0-9]*")) if ".tmp-" not in p.name]
    for old in done[:-keep]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete checkpoint directory, or None."""
    root = checkpoint_dir(out_dir)
    pointer = root / "latest"
    if pointer.is_file():
        p = root / pointer.read_text().strip()
        if (p / STATE_FILE).is_file() and (p / META_FILE).is_file():
            return p
    done = [
        p
        for p in sorted(root.glob(f"{PREFIX}[0-9]*"))
        if ".tmp-" not in p.name and (p / META_FILE).is_file()
    ]
    return done[-1] if done else None


def load_trainer_state(path: str | Path) -> dict[str, Any]:
    """The ``trainer_state.pt`` dict of a checkpoint (optimizer, scheduler, rng, step)."""
    return torch.load(Path(path) / STATE_FILE, map_location="cpu", weights_only=False)


def read_meta(path: str | Path) -> dict[str, Any]:
    return json.loads((Path(path) / META_FILE).read_text())


def copy_adapter(src: str | Path, dst: str | Path) -> Path:
    """Copy just the adapter files of a checkpoint to ``dst`` (atomically replaced)."""
    src, dst = Path(src), Path(dst)
    tmp = dst.with_name(dst.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for f in src.iterdir():
        if f.name.startswith("adapter_") or f.name in ("README.md", META_FILE):
            shutil.copy2(f, tmp / f.name)
    if dst.exists():
        shutil.rmtree(dst)
    os.rename(tmp, dst)
    return dst


# ---- run-dir state: run.json and step manifests --------------------------------------------

RUN_FILE = "run.json"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` via a fsynced temp file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def manifest_path(out_dir: str | Path, step: int) -> Path:
    """Where step ``step``'s manifest (group ids, spec hash, timing) lives."""
    return Path(out_dir) / "steps" / f"step-{step:06d}.json"


def has_progress(out_dir: str | Path) -> bool:
    """Whether ``out_dir`` holds any checkpoint or step manifest (a run that got somewhere)."""
    steps = Path(out_dir) / "steps"
    return latest_checkpoint(out_dir) is not None or (
        steps.is_dir() and any(steps.glob("step-*.json"))
    )


def read_run(out_dir: str | Path) -> dict[str, Any] | None:
    """The ``run.json`` of ``out_dir`` (``run_id``, ``config``), or None if there is none."""
    p = Path(out_dir) / RUN_FILE
    return json.loads(p.read_text()) if p.is_file() else None


def write_run(out_dir: str | Path, run_id: str, config: dict[str, Any]) -> None:
    write_json_atomic(Path(out_dir) / RUN_FILE, {"run_id": run_id, "config": config})


def restore_latest(
    out_dir: str | Path,
    model: PeftModel,
    optimizer: torch.optim.Optimizer,
    scheduler: LRScheduler | None,
) -> tuple[Path, int, dict[str, Any]] | None:
    """Load the newest checkpoint's adapter, optimizer, scheduler and RNG state into the given
    objects; returns ``(path, step, meta)``, or None when there is no checkpoint yet."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = latest_checkpoint(out_dir)
    if path is None:
        return None
    weights = load_file(str(path / "adapter_model.safetensors"))
    result = set_peft_model_state_dict(model, weights)
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise RuntimeError(f"checkpoint {path} has unexpected keys {unexpected[:3]}")
    state = load_trainer_state(path)
    optimizer.load_state_dict(state["optimizer"])
    if state.get("scheduler") is not None and scheduler is not None:
        scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return path, int(state["step"]), read_meta(path)


def run_identity(
    out_dir: str | Path,
    config: dict[str, Any],
    *,
    resume: bool,
    name: str | None,
    resumable: set[str],
    echo: Callable[[str], None] | None = None,
) -> str:
    """The run id of ``out_dir``: the saved one on resume (refusing a config that differs outside
    ``resumable``), else a new one written to run.json. A dir whose earlier start never finished
    a step is reused; one with a checkpoint or step manifest needs ``resume``."""
    import time

    out = Path(out_dir)
    config = redact(config)  # nothing credential-like reaches run.json (rankgym.credentials)
    saved = read_run(out)
    if resume:
        if saved is None:
            raise UserError(
                f"--resume: {str(out)!r} holds no run (no run.json); start without "
                "--resume, or pass the --out of the run to continue"
            )
        old = saved["config"]
        diff = sorted(
            k for k in set(old) | set(config) if k not in resumable and old.get(k) != config.get(k)
        )
        if diff:
            raise UserError(
                f"--resume: the config differs from the run in {str(out)!r} in "
                f"{', '.join(diff)}; resume with the same config (only "
                f"{', '.join(sorted(resumable))} may change), or start a new run with another --out"
            )
        return saved["run_id"]
    if has_progress(out):
        raise UserError(
            f"{str(out)!r} already holds a training run; pass --resume to continue it "
            "or choose another --out"
        )
    if saved is not None and echo is not None:
        echo(f"{out}: an earlier start never completed a step; starting afresh")
    run_id = name or f"train-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid() % 10000:04d}"
    write_run(out, run_id, config)
    return run_id
