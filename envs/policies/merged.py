"""Sampling with the active LoRA folded into the base weights: one matmul per layer, not three.

A peft LoRA layer computes ``x @ W + s * (x @ A) @ B``: on a CPU the two small matmuls (and the
casts to the LoRA's float32) cost as much as the base matmul in a prefill (bench/RESULTS.md,
"Rollouts: the LoRA merged for sampling"). :class:`MergedLora` computes ``W + s * B @ A`` once
per set of LoRA weights (in float64, rounded once to the base weight's dtype), and while a
policy samples it swaps those merged tensors in for the base weights and switches the layer's
LoRA path off; on exit the *original* weight tensors are put back, so the base model is
bit-for-bit what it was (peft's ``merge``/``unmerge`` would round ``W + d - d`` in bf16 and
drift a little every call). The merged copies are kept until the LoRA weights change
(``kvreuse.weights_tag``), so a multi-turn rollout merges once per policy update.

What it does not do: merge anything but vanilla LoRA on ``nn.Linear`` (DoRA and other variants,
a LoRA bias, or a layer with adapters off keep peft's own path), or make sampling
token-identical to the unmerged path (the sum is rounded once per weight instead of once per
output; the GRPO loss never reads the sampler's log-probs, ``trainer/grpo.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _mergeable(layer: Any) -> list[str]:
    """The active adapters of a peft LoRA ``layer`` that can be folded into its weight ([]
    when any active one cannot, or the layer runs no adapter)."""
    import torch

    if layer.disable_adapters or layer.merged:
        return []
    names = [a for a in layer.active_adapters if a in layer.lora_A]
    plain = all(
        a not in getattr(layer, "lora_variant", {}) and not getattr(layer, "lora_bias", {}).get(a)
        for a in names
    )
    linear = isinstance(getattr(layer, "base_layer", None), torch.nn.Linear)
    return names if plain and names and linear else []


def _delta(layer: Any, name: str) -> Any:
    """``s * B @ A`` of adapter ``name`` of a peft ``lora.Linear``, in float64: rounded once to
    the weight's dtype it is the same at any thread count (a float32 matmul's rounding is not,
    and it moved sampled tokens between 1 and 2 threads: bench/RESULTS.md, issue 23)."""
    delta = layer.lora_B[name].weight.double() @ layer.lora_A[name].weight.double()
    delta = delta * layer.scaling[name]
    return delta.T if layer.fan_in_fan_out else delta


class MergedLora:
    """Merged weights of a model's active LoRA, cached under a fingerprint (see module doc)."""

    def __init__(self) -> None:
        self._tag: tuple[Any, ...] | None = None
        self._merged: list[tuple[Any, Any]] = []  # (peft layer, merged weight)

    def clear(self) -> None:
        """Forget the merged copies (their memory goes back to the allocator)."""
        self._tag, self._merged = None, []

    def _build(self, model: Any) -> list[tuple[Any, Any]]:
        import torch
        from peft.tuners.lora import LoraLayer

        out = []
        with torch.no_grad():
            for module in model.modules():
                if not isinstance(module, LoraLayer):
                    continue
                m: Any = module  # a peft lora.Linear (get_delta_weight is not on LoraLayer)
                names = _mergeable(m)
                if not names:
                    continue
                w = m.base_layer.weight
                with torch.autocast(str(w.device.type), enabled=False):
                    total = w.detach().double()
                    for a in names:
                        total = total + _delta(m, a)
                out.append((m, total.to(w.dtype)))
        return out

    @contextmanager
    def active(self, model: Any, tag: tuple[Any, ...]) -> Iterator[int]:
        """Within the block ``model`` computes with its active LoRA merged (built again when
        ``tag`` differs from the last one); yields how many layers run merged."""
        import sys

        if "peft" not in sys.modules:  # no peft layer can exist
            yield 0
            return
        if tag != self._tag:
            self.clear()
            self._merged, self._tag = self._build(model), tag
        swapped: list[tuple[Any, Any, bool]] = []
        try:
            import torch

            for layer, merged in self._merged:
                base = layer.base_layer
                swapped.append((layer, base._parameters["weight"], layer._disable_adapters))
                base._parameters["weight"] = torch.nn.Parameter(merged, requires_grad=False)
                layer._disable_adapters = True  # its forward: base_layer(x) only
            yield len(swapped)
        finally:
            for layer, weight, off in reversed(swapped):
                layer.base_layer._parameters["weight"] = weight
                layer._disable_adapters = off
