"""A transformers ``DynamicCache`` whose layers grow in place instead of by concatenation.

transformers' ``DynamicLayer.update`` appends a decode step's key and value with ``torch.cat``:
every step allocates and copies each layer's whole cache. At the rollout's batch shapes the
copy, not the model, is the decode step: 18 rows x 800 cached tokens of SmolLM2-135M are 5.5 MB
per layer tensor, above ``rankgym.heap``'s 4 MB mmap threshold, so each of the 60 copies per
step is a fresh mapping with its page faults (bench/rollout.py). :class:`GrowingLayer` keeps
each layer in a buffer with room for ``headroom`` more positions, writes new positions into it,
and exposes the filled part as ``keys``/``values`` (views), so a decode step copies one
position per row.

The numbers are those of ``DynamicLayer`` (the same values at the same positions; attention
reads the same view). What it does not do: sliding-window or quantized layers (those of a
config that has them stay transformers' own), or shrink a buffer (a finished row is dropped
with ``batch_select_indices``, which copies the kept rows once).
"""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

__all__ = ["GrowingLayer", "growing_cache"]


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer over a buffer with spare positions (module doc)."""

    def __init__(self, headroom: int = 64) -> None:
        super().__init__()
        self.headroom = max(int(headroom), 1)
        self._kbuf: Any = None
        self._vbuf: Any = None
        self._view: Any = None  # the ``keys`` this layer last handed out

    def _adopt(self, extra: int) -> None:
        """(Re)build the buffers from ``keys``/``values`` with room for ``extra`` + headroom."""
        keys, values = self.keys, self.values
        assert keys is not None and values is not None
        b, h, n, d = keys.shape
        cap = n + extra + self.headroom
        self._kbuf = keys.new_empty((b, h, cap, d))
        self._vbuf = values.new_empty((b, h, cap, values.shape[-1]))
        self._kbuf[:, :, :n] = keys
        self._vbuf[:, :, :n] = values
        self._expose(n)

    def _expose(self, n: int) -> None:
        self.keys = self._kbuf[:, :, :n]
        self.values = self._vbuf[:, :, :n]
        self._view = self.keys

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:  # fmt: skip
        """Write ``key_states``/``value_states`` after the cached positions; return all of them."""
        new = key_states.shape[-2]
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self.keys, self.values = key_states, value_states
            self._adopt(0)
            return self.keys, self.values
        stale = self.keys is not self._view  # reassigned from outside (crop, reorder)
        if stale or self._kbuf.shape[0] != key_states.shape[0]:
            self._adopt(new)  # take it over
        n = self.get_seq_length()
        if n + new > self._kbuf.shape[-2]:
            self._adopt(new)
        self._kbuf[:, :, n : n + new] = key_states
        self._vbuf[:, :, n : n + new] = value_states
        self._expose(n + new)
        return self.keys, self.values

    def batch_select_indices(self, indices: Any) -> None:
        """Keep the rows ``indices`` (their buffers, spare positions included)."""
        if self.get_seq_length() > 0 and self.keys is self._view:
            n = self.keys.shape[-2]
            self._kbuf, self._vbuf = self._kbuf[indices], self._vbuf[indices]
            self._expose(n)
        else:
            super().batch_select_indices(indices)

    def reset(self) -> None:
        self._kbuf = self._vbuf = self._view = None
        super().reset()


def growing_cache(config: Any, headroom: int = 64) -> Any:
    """A ``DynamicCache`` for ``config`` whose full-attention layers are :class:`GrowingLayer`
    with ``headroom`` spare positions (e.g. the tokens a call will sample)."""
    cache = DynamicCache(config=config)
    cache.layers = [
        GrowingLayer(headroom) if type(layer) is DynamicLayer else layer for layer in cache.layers
    ]
    if cache.layer_class_to_replicate is DynamicLayer:  # no config: layers made on first use
        cache.layer_class_to_replicate = cast(Any, partial(GrowingLayer, headroom))
    return cache
