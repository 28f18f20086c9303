"""Which trained judge adapter a ``local/`` judge serves, and its content hash.

A ``local/NAME@DIR`` judge (and a bare ``local/smollm2``, which serves the shipped judge in
``rankgym/judges/default_judge/``) scores with a LoRA adapter; ``JudgeSpec.spec_hash`` adds the
adapter's content hash (:func:`adapter_fingerprint`), so scores cached for one adapter are never
reused for a retrained one in the same folder. Core, so the spec's hash needs no judge code;
``rankgym.judges.local_provider``, which loads and serves the adapter, re-exports these names.

What it does not do: load an adapter or a model, or check more than the adapter's files exist.
The shipped judge's folder is found without importing ``rankgym.judges``
(``importlib.util.find_spec`` reads where the package lives).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

__all__ = [
    "ADAPTER_FILES",
    "DEFAULT_JUDGE_DIR",
    "DEFAULT_MODEL",
    "PAIRWISE",
    "YESNO_MODEL",
    "adapter_dir",
    "adapter_fingerprint",
    "default_judge_dir",
    "reads_group",
    "states_agreement",
    "resolve_ref",
    "split_model",
]

_PREFIX = "local/"
DEFAULT_MODEL = "smollm2"
"""``local/smollm2``: the shipped judge (its adapter), or the yes/no reader where none ships."""
YESNO_MODEL = "smollm2-yesno"
"""``local/smollm2-yesno``: the untrained yes/no reader (no adapter)."""
PAIRWISE = "pairwise"
"""``local/smollm2@pairwise``: the pairwise prompt on the base model, no adapter."""
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "judge_train.json")


def _judges_dir() -> Path:
    spec = importlib.util.find_spec("rankgym.judges")  # where it lives; nothing is imported
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("rankgym.judges is not installed alongside rankgym")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


DEFAULT_JUDGE_DIR = _judges_dir() / "default_judge"
"""The shipped judge adapter that ``local/smollm2`` serves."""


def split_model(model: str) -> tuple[str, str | None]:
    """``"smollm2@DIR"`` -> ``("smollm2", "DIR")``; no ``@`` -> ``(model, None)``."""
    name, sep, ref = model.partition("@")
    return name, (ref if sep else None)


def default_judge_dir() -> Path | None:
    """The shipped judge adapter's directory, or None when this install has none (a source
    tree where ``make default-judge`` has not run; ``tests/judges/test_default_judge.py`` checks
    that the package ships it)."""
    d = DEFAULT_JUDGE_DIR
    return d if all((d / f).is_file() for f in ADAPTER_FILES) else None


def resolve_ref(model: str) -> str | None:
    """The adapter reference a ``local/`` model name serves: what follows ``@``, the shipped
    judge for a bare ``smollm2``, None for the yes/no reader."""
    name, ref = split_model(model)
    if ref is None and name == DEFAULT_MODEL:
        d = default_judge_dir()
        return str(d) if d is not None else None
    return ref


def adapter_dir(ref: str) -> Path:
    """The adapter directory named by ``ref``: ``ref`` itself or ``ref/adapter``.

    Raises ``FileNotFoundError`` naming the path when neither holds ``judge_train.json``.
    """
    for cand in (Path(ref), Path(ref) / "adapter"):
        if (cand / "judge_train.json").is_file() and (cand / "adapter_config.json").is_file():
            return cand
    raise FileNotFoundError(
        f"{ref!r} holds no judge adapter (adapter_config.json + judge_train.json); train one "
        "with `rankgym judge-train --out DIR` and pass DIR or DIR/adapter"
    )


_fingerprints: dict[tuple[str, tuple[tuple[int, int], ...]], str] = {}


def adapter_fingerprint(model: str) -> str | None:
    """Content hash of the adapter a ``local/NAME@DIR`` judge serves (None for other models,
    and ``"pairwise"`` for ``@pairwise``). Cached per file size and mtime."""
    if not model.startswith(_PREFIX):
        return None
    ref = resolve_ref(model[len(_PREFIX) :])
    if ref is None:
        return None
    if ref == PAIRWISE:
        return PAIRWISE
    try:
        d = adapter_dir(ref)
    except FileNotFoundError:
        return "missing:" + str(Path(ref).resolve())
    files = [d / f for f in ADAPTER_FILES if (d / f).is_file()]
    stamp = tuple((f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    key = (str(d.resolve()), stamp)
    if key not in _fingerprints:
        h = hashlib.sha256()
        for f in files:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        _fingerprints[key] = h.hexdigest()[:16]
    return _fingerprints[key]


def reads_group(model: str) -> bool:
    """Whether a ``local/NAME@DIR`` judge's score of an attempt reads the rest of its group: a
    pointwise judge trained with ``--agreement`` (``judge_train.json``). Such a judge is checked
    on a pair shown among other attempts of its task, not on the pair alone. False for any
    other model, and for an adapter that is not there."""
    if not model.startswith(_PREFIX):
        return False
    ref = resolve_ref(model[len(_PREFIX) :])
    if ref is None or ref == PAIRWISE:
        return False
    try:
        meta = json.loads((adapter_dir(ref) / "judge_train.json").read_text())
    except (FileNotFoundError, ValueError):
        return False
    return states_agreement(meta)


def states_agreement(meta: dict[str, object]) -> bool:
    """Whether a judge adapter's ``judge_train.json`` (``meta``) is a pointwise judge whose
    prompt states each attempt's answer agreement with its group (``--agreement``)."""
    return meta.get("objective") == "pointwise" and bool(meta.get("agreement"))
