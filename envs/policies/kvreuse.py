"""KV-cache reuse for batched sampling: prefill shared prompts once, extend caches across turns.

Two kinds of repeated work in a rollout: the episodes of a group start from the *same* prompt,
and each turn's prompt is the previous turn's prompt + completion + the tool output. Here:

- rows whose prompts are identical (a group's first turn) prefill that prompt once; each row
  starts from a copy of its cache;
- when a row finishes, its keys/values (prompt + completion, all but the last sampled token,
  which was never fed) are kept as an :class:`Entry`; on the next ``generate_rows`` call a
  prompt that starts with an entry's tokens (longest common prefix: a re-rendered history that
  differs late still reuses everything before the difference) is prefilled from there on.

Rows of one batch then hold caches of different lengths: the batch cache is left-padded to the
longest, the new tokens are left-padded after it, and the attention mask has zeros in both
gaps; positions are explicit, so RoPE sees each row's true positions. The numbers equal a full
prefill up to float rounding (greedy outputs match in the tests).

What this does not do: check that the weights did not change between calls beyond the
``tag`` it is given (the policy's name, adapter and a checksum of its trainable weights), keep
entries longer than one ``generate_rows`` call (an episode that is not continued in the next
call loses its cache), or work with caches other than a ``DynamicCache`` of full-attention
layers (``kvcache.py``'s, which grows in place).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIN_REUSE = 8
"""Reuse an entry only when it covers at least this many prompt tokens."""


@dataclass
class Entry:
    """Keys and values (per layer: ``(heads, len(ids), head_dim)``) of the tokens ``ids``."""

    ids: list[int]
    keys: list[Any]
    values: list[Any]


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def last_uses(
    plan: list[tuple[Entry | None, int]], remaining: dict[int, int] | None = None
) -> set[int]:
    """Ids of the entries of ``plan`` that no later batch needs: ``remaining`` counts, per
    entry id, the rows of this and later batches that use it (and is decremented here); an
    entry it does not count (e.g. a shared prefix made for this batch) is only this batch's."""
    uses: dict[int, int] = {}
    for e, c in plan:
        if e is not None and c:
            uses[id(e)] = uses.get(id(e), 0) + 1
    done = set()
    for key, n in uses.items():
        left = (remaining or {}).get(key, n) - n
        if remaining is not None and key in remaining:
            remaining[key] = left
        if left <= 0:
            done.add(key)
    return done


def best_entry(entries: list[Entry], prompt: list[int]) -> tuple[Entry | None, int]:
    """The entry sharing the longest prefix with ``prompt`` and how many tokens it can give
    (at most ``len(prompt) - 1``: the last prompt token is always fed, for its logits)."""
    best, best_c = None, 0
    for e in entries:
        c = min(common_prefix(e.ids, prompt), len(prompt) - 1)
        if c > best_c:
            best, best_c = e, c
    return (best, best_c) if best_c >= MIN_REUSE else (None, 0)


def layer_tensors(cache: Any) -> list[tuple[Any, Any]]:
    """``(keys, values)`` per layer of a transformers ``DynamicCache``."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def extract(cache: Any, row: int, valid: Any, ids: list[int]) -> Entry:
    """Row ``row`` of ``cache`` at the positions where ``valid`` (bool, cache length) is set."""
    keys, values = [], []
    for k, v in layer_tensors(cache):
        keys.append(k[row][:, valid].clone())
        values.append(v[row][:, valid].clone())
    return Entry(ids, keys, values)


def assemble(
    plan: list[tuple[Entry | None, int]],
    config: Any,
    device: Any,
    release: set[int] | None = None,
    headroom: int | None = 64,
) -> tuple[Any, Any, int]:
    """A left-padded ``DynamicCache`` holding, per row, the first ``c`` positions of its entry;
    returns ``(cache, attention mask (R, L) long, L)``. ``L`` is 0 (and the cache empty) when
    no row reuses anything. Entries whose ``id`` is in ``release`` are not needed after this:
    each layer's tensors are dropped from them as soon as that layer is copied, so the old
    caches and the new batch cache are not both held whole. Its layers grow in place with room
    for ``headroom`` more positions (``kvcache.GrowingLayer``: no copy per decode step); None:
    transformers' ``DynamicCache``, which copies every layer at every step."""
    import torch
    from transformers import DynamicCache

    from rankgym.envs.policies.kvcache import growing_cache

    cache = DynamicCache(config=config) if headroom is None else growing_cache(config, headroom)
    width = max(c for _, c in plan)
    mask = torch.zeros((len(plan), width), dtype=torch.long, device=device)
    if width == 0:
        return cache, mask, 0
    ref = next(e for e, c in plan if e is not None and c > 0)
    for layer in range(len(ref.keys)):
        h, _, d = ref.keys[layer].shape
        k = ref.keys[layer].new_zeros((len(plan), h, width, d))
        v = ref.values[layer].new_zeros((len(plan), h, width, d))
        for r, (e, c) in enumerate(plan):
            if e is not None and c:
                k[r, :, width - c :] = e.keys[layer][:, :c]
                v[r, :, width - c :] = e.values[layer][:, :c]
        cache.update(k, v, layer)
        for e, _ in plan:
            if e is not None and release and id(e) in release:
                e.keys[layer] = e.values[layer] = None
    for r, (_, c) in enumerate(plan):
        if c:
            mask[r, width - c :] = 1
    return cache, mask, width


def weights_tag(model: Any) -> tuple[Any, ...]:
    """A cheap fingerprint of what a model computes: which peft adapters are on, and a checksum
    of a few elements of each LoRA (or else trainable) tensor, which an optimizer step changes.
    Caches made under another fingerprint are not reused."""
    import sys

    import torch

    state: tuple[Any, ...] = ()
    if "peft" in sys.modules:  # a model with peft layers was built with peft imported
        from peft.tuners.tuners_utils import BaseTunerLayer

        for m in model.modules():
            if isinstance(m, BaseTunerLayer):
                state = (bool(m.disable_adapters), tuple(m.active_adapters))
                break
    with torch.no_grad():
        parts = [
            p.reshape(-1)[:4].double().sum()
            for n, p in model.named_parameters()
            if "lora_" in n or p.requires_grad
        ]
        total = float(torch.stack(parts).sum()) if parts else 0.0
    return (*state, total)
