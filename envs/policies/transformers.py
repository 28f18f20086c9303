"""Local transformers models as policies: batched KV-cached sampling with token ids and logprobs.

Part of ``rankgym.envs.policies`` (see the package docstring for the sampling, logprob and
tool-call conventions). torch and transformers are imported inside the methods that use them,
so that importing the policies (which the rollout driver does) costs nothing for the scripted,
LiteLLM and vLLM policies; everything else is imported at the top.
"""

from __future__ import annotations

import inspect
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Unpack

from rankgym.envs.policies import kvreuse
from rankgym.envs.policies.base import Generation, Messages, Row, Tools, row_seed
from rankgym.envs.policies.kvreuse import Entry, weights_tag
from rankgym.envs.policies.local import LocalTokensPolicy, Sampling, stop_token_ids
from rankgym.envs.policies.merged import MergedLora
from rankgym.envs.policies.render import assistant_turns
from rankgym.envs.policies.sampling import sample_rows
from rankgym.model import (
    adapters_disabled,
    bound_heap,
    cpu_bf16_native,
    decoder_and_head,
    release_freed_memory,
    using_adapter,
)
from rankgym.types import Turn

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


AUTOCAST_MIN_ROWS = 8


class TransformersPolicy(LocalTokensPolicy):
    """Batched sampling from a local causal LM (plain or peft-wrapped) with token ids and logprobs.

    ``model`` may be a ``PeftModel``: the trainer passes its LoRA model and sets ``name`` after
    each update. ``generate`` switches the model to eval mode (no dropout) under
    ``torch.inference_mode`` and restores the previous mode after. ``autocast``: None means bf16
    autocast for batches of 8+ rows when the weights are float32 on a CPU with bf16 support
    (faster prefill; at small batches it slows decoding); weights already in bf16 run as they
    are; True/False force it. ``adapter``: the name of a peft adapter loaded into ``model``
    (``rankgym.model.load_named_adapter``) that sampling switches to (and back after), so
    several policies share one base model; None samples with whatever is active, unless
    ``base_only``: then every adapter is switched off while it samples (the embedded policy over
    the process-wide base copy, into which a judge or a trainer may have loaded theirs). ``reuse_kv``:
    identical prompts in a batch are prefilled once, and a prompt that extends a conversation
    this policy sampled in its previous ``generate_rows`` call continues from that call's KV
    cache (``kvreuse.py``); False prefills every prompt in full. ``grow_kv``: the batch cache
    grows in place (``kvcache.py``); False keeps transformers' ``DynamicCache``, which copies
    every layer's cache at every decode step (``bench/rollout.py`` compares). ``merge_lora``:
    the active LoRA is folded into the base weights while sampling (``merged.py``: one matmul
    per layer, the base weights restored exactly after; it holds a merged copy of the adapted
    projections while sampling); None = on a CPU only, False runs peft's LoRA path. Prompts longer than ``max_prompt_tokens`` keep the system message's
    tokens and the most recent tokens (a note is recorded in ``Generation.notes``). The sampling
    keywords (``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``, ``seed``,
    ``max_prompt_tokens``, ``tool_mode``) are :class:`~rankgym.envs.policies.local.Sampling`.
    """

    def __init__(
        self,
        model: PreTrainedModel | PeftModel,
        tokenizer: PreTrainedTokenizerBase,
        name: str = "transformers",
        max_batch_size: int = 64,
        autocast: bool | None = None,
        adapter: str | None = None,
        reuse_kv: bool = True,
        base_only: bool = False,
        grow_kv: bool = True,
        merge_lora: bool | None = None,
        **sampling: Unpack[Sampling],
    ) -> None:
        import torch

        super().__init__(tokenizer, name, **sampling)
        bound_heap()  # freed prefill buffers go back to the OS (rankgym.model.bound_heap)
        self.model = model
        self.max_batch_size = max_batch_size
        self.pad_id = tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = tokenizer.eos_token_id
        self.eos_ids = stop_token_ids(tokenizer, getattr(model, "generation_config", None))
        param = next(model.parameters())
        self.device = param.device
        self.autocast = autocast
        self.adapter = adapter
        self.base_only = base_only and adapter is None
        self.reuse_kv = reuse_kv
        self.grow_kv = grow_kv  # False: transformers' DynamicCache, a copy per step (bench)
        self._kv: tuple[Any, list[Entry]] = ((), [])  # (fingerprint, entries of the last call)
        # auto: on a CPU, where the LoRA's small matmuls cost as much as the base one and a
        # merged copy of the projections is small; on a GPU the copy would double their memory
        self.merge_lora = self.device.type == "cpu" if merge_lora is None else merge_lora
        self._merged = MergedLora()  # the active LoRA folded into the weights, per fingerprint
        self._autocast_capable = (
            self.device.type == "cpu" and param.dtype == torch.float32 and cpu_bf16_native()
        )
        base = getattr(model, "get_base_model", lambda: model)()  # a peft model: its base
        params = inspect.signature(type(base).forward).parameters
        # transformers >= 5.2x calls the KV cache `cache`; earlier versions `past_key_values`
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"

    # ---- prompts ------------------------------------------------------------------------

    def demonstration(
        self, messages: Messages, tools: Tools, name: str = "demonstration"
    ) -> list[Turn]:
        """The Turns this policy would have produced to write the assistant messages of
        ``messages`` (``render.assistant_turns``; what SFT trains on)."""
        return assistant_turns(
            self.tokenizer,
            messages,
            tools,
            tool_mode=self.tool_mode,
            eos_ids=self.eos_ids,
            max_prompt_tokens=self.max_prompt_tokens,
            policy=name,
        )

    # ---- sampling -----------------------------------------------------------------------

    def generate_rows(self, rows: list[Row]) -> list[Generation]:
        """One assistant turn for each conversation, sampled in left-padded batches."""
        results: list[Generation | None] = [None] * len(rows)
        prompts: list[tuple[int, list[int], int]] = []  # (index, ids, row seed)
        notes: dict[int, list[str]] = {}
        for row in rows:
            i = row.index
            seed = row_seed(self.seed, row.ctx, self._rng)
            try:
                ids, notes[i] = self.encode(row.messages, row.tools)
            except Exception as e:  # a template that rejects this conversation
                reason = f"chat template failed: {type(e).__name__}: {e}"
                results[i] = Generation.failed(self.name, reason)
                continue
            prompts.append((i, ids, seed))
        prompts.sort(key=lambda p: len(p[1]))  # similar lengths together: less padding
        tag = self._fingerprint() if self.reuse_kv else ()
        old = self._kv[1] if self.reuse_kv and self._kv[0] == tag else []
        kept: list[Entry] = []
        self._kv = ((), [])
        matches = [kvreuse.best_entry(old, p[1]) for p in prompts] if self.reuse_kv else []
        remaining: dict[int, int] = {}  # entry id -> rows still to continue from it
        for entry, c in matches:
            if entry is not None and c:
                remaining[id(entry)] = remaining.get(id(entry), 0) + 1
        for start in range(0, len(prompts), self.max_batch_size):
            chunk = prompts[start : start + self.max_batch_size]
            found = matches[start : start + self.max_batch_size] or None
            sampled = self._sample([p[1] for p in chunk], [p[2] for p in chunk], old, kept,
                                   matches=found, remaining=remaining)  # fmt: skip
            for (i, ids, _), (out_ids, logprobs) in zip(chunk, sampled, strict=True):
                text = str(self.tokenizer.decode(out_ids, skip_special_tokens=True))
                results[i] = Generation.sampled(
                    self.name, text, ids, out_ids, logprobs, notes.get(i, [])
                )
        del old
        if self.reuse_kv:
            self._kv = (tag, kept)
        release_freed_memory()  # a large prefill's freed buffers stay resident otherwise
        return [r for r in results if r is not None]

    def _fingerprint(self) -> tuple[Any, ...]:
        return (self.name, self.adapter, *weights_tag(self.model))

    def drop_kv(self) -> None:
        """Forget the KV caches kept from the last call and hand their memory back to the OS
        (each layer's entry is below the mmap threshold, so it came from the heap)."""
        self._kv = ((), [])
        self._merged.clear()  # the merged weights too: stale after the next update
        release_freed_memory()

    def _sample(
        self,
        prompts: list[list[int]],
        seeds: list[int],
        entries: list[Entry] | None = None,
        kept: list[Entry] | None = None,
        matches: list[tuple[Entry | None, int]] | None = None,
        remaining: dict[int, int] | None = None,
    ) -> list[tuple[list[int], list[float]]]:
        """Sample one completion per prompt. ``entries``: KV caches a prompt may continue from;
        ``kept``: where each row's cache goes when it finishes (None: nothing is kept);
        ``matches``: each prompt's ``kvreuse.best_entry`` when already known; ``remaining``:
        rows of this and later batches per entry (``kvreuse.last_uses``: an entry no later
        batch needs is freed layer by layer as this batch's cache is built)."""
        import torch

        model, device = self.model, self.device
        n = len(prompts)
        gens = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_lp: list[list[float]] = [[] for _ in range(n)]
        alive = list(range(n))  # original row of each current batch row
        was_training = model.training
        model.eval()
        try:
            with (
                # base_only: adapter None switches them all off; off (reference) stays off
                using_adapter(model, self.adapter)
                if (self.adapter or self.base_only) and not adapters_disabled(model)
                else nullcontext(),
                torch.inference_mode(),
                torch.autocast(device.type, dtype=torch.bfloat16, enabled=self._use_autocast(n)),
                # inside the adapter switch: what is merged is what this policy samples with
                self._merged.active(model, self._fingerprint())
                if self.merge_lora
                else nullcontext(),
            ):
                plan = self._plan(prompts, entries, matches)
                release = kvreuse.last_uses(plan, remaining)
                cache, attention, positions, logits = self._prefill(prompts, plan, release)
                del plan  # the entries it freed are gone; the others stay in ``entries``

                def keep_rows(rows: list[int]) -> None:
                    if kept is None:
                        return
                    for j in rows:
                        r = alive[j]
                        ids = prompts[r] + out_ids[r][:-1]
                        kept.append(kvreuse.extract(cache, j, attention[j].bool(), ids))

                for t in range(self.max_new_tokens):
                    tokens, logprobs = self._pick(logits.float(), [gens[r] for r in alive])
                    keep: list[int] = []
                    for j, r in enumerate(alive):
                        tok = int(tokens[j])
                        out_ids[r].append(tok)
                        out_lp[r].append(float(logprobs[j]))
                        if tok not in self.eos_ids:
                            keep.append(j)
                    if not keep or t == self.max_new_tokens - 1:
                        keep_rows(list(range(len(alive))))
                        break
                    if len(keep) < len(alive):
                        done = set(range(len(alive))) - set(keep)
                        keep_rows(sorted(done))
                        idx = torch.tensor(keep, dtype=torch.long, device=device)
                        cache.batch_select_indices(idx)
                        attention, positions, tokens = attention[idx], positions[idx], tokens[idx]
                        alive = [alive[j] for j in keep]
                    attention = torch.cat([attention, attention.new_ones((len(alive), 1))], dim=1)
                    positions = positions[:, -1:] + 1
                    out = model(
                        input_ids=tokens[:, None],
                        attention_mask=attention,
                        position_ids=positions,
                        use_cache=True,
                        **{self._cache_kwarg: cache},
                    )
                    logits = out.logits[:, -1, :]
        finally:
            model.train(was_training)
        return list(zip(out_ids, out_lp, strict=True))

    def _plan(
        self,
        prompts: list[list[int]],
        entries: list[Entry] | None,
        matches: list[tuple[Entry | None, int]] | None = None,
    ) -> list[tuple[Entry | None, int]]:
        """Per row: the cache entry it continues from and how many of its tokens it reuses
        (``matches`` when given, else ``kvreuse.best_entry``). Rows without one share a prefill
        of their prompt (all but the last token) with the other rows of the same prompt."""
        plan = list(matches) if matches is not None else [kvreuse.best_entry(entries or [], p) for p in prompts]  # fmt: skip
        if not self.reuse_kv:
            return [(None, 0)] * len(prompts)
        fresh: dict[tuple[int, ...], list[int]] = {}
        for r, (e, _) in enumerate(plan):
            if e is None and len(prompts[r]) > 1:
                fresh.setdefault(tuple(prompts[r][:-1]), []).append(r)
        if not fresh:
            return plan
        prefixes = [list(k) for k in fresh]
        if len(prefixes) == sum(len(v) for v in fresh.values()):
            return plan  # nothing shared: one full prefill is cheaper than two steps
        cache, mask, _ = self._forward_prompts(prefixes, [(None, 0)] * len(prefixes))
        for u, rows in enumerate(fresh.values()):
            entry = kvreuse.extract(cache, u, mask[u].bool(), prefixes[u])
            for r in rows:
                plan[r] = (entry, len(prefixes[u]))
        return plan

    def _forward_prompts(
        self,
        prompts: list[list[int]],
        plan: list[tuple[Entry | None, int]],
        release: set[int] | None = None,
    ) -> tuple[Any, Any, Any]:
        """Feed each prompt's tokens after its reused prefix into a batch cache; returns
        ``(cache, attention mask, decoder output)``. ``release``: ``kvreuse.assemble``'s."""
        import torch

        device = self.device
        config = getattr(self.model, "config", None)
        room = self.max_new_tokens if self.grow_kv else None
        cache, past_mask, _ = kvreuse.assemble(plan, config, device, release, room)
        suffix = [p[c:] for p, (_, c) in zip(prompts, plan, strict=True)]
        s_w = max(len(x) for x in suffix)
        ids = torch.full((len(prompts), s_w), self.pad_id, dtype=torch.long)
        new_mask = torch.zeros((len(prompts), s_w), dtype=torch.long)
        pos = torch.zeros((len(prompts), s_w), dtype=torch.long)
        for r, (x, (_, c)) in enumerate(zip(suffix, plan, strict=True)):
            ids[r, s_w - len(x) :] = torch.tensor(x, dtype=torch.long)
            new_mask[r, s_w - len(x) :] = 1
            pos[r, s_w - len(x) :] = torch.arange(c, c + len(x))
        attention = torch.cat([past_mask, new_mask.to(device)], dim=1)
        decoder, _ = decoder_and_head(self.model)
        out = decoder(
            input_ids=ids.to(device),
            attention_mask=attention,
            position_ids=pos.to(device),
            use_cache=True,
            **{self._cache_kwarg: cache},
        )
        return cache, attention, out

    def _prefill(
        self,
        prompts: list[list[int]],
        plan: list[tuple[Entry | None, int]],
        release: set[int] | None = None,
    ) -> tuple[Any, Any, Any, Any]:
        """Run the prompts into a batch cache (from their reused prefixes on); returns ``(cache,
        attention mask, last positions (R, 1), last-position logits (R, V))``.

        lm_head gets a contiguous (R, H) input: on a strided (R, 1, H) slice a bf16 matmul
        copies the output weight once per row (3.6 GB at 64 rows, DESIGN.md)."""
        import torch

        cache, attention, out = self._forward_prompts(prompts, plan, release)
        _, lm_head = decoder_and_head(self.model)
        logits = lm_head(out.last_hidden_state[:, -1, :].contiguous())
        last = torch.tensor([[len(p) - 1] for p in prompts], dtype=torch.long, device=self.device)
        return cache, attention, last, logits

    def _use_autocast(self, rows: int) -> bool:
        if self.autocast is not None:
            return bool(self.autocast)
        # Measured on a 2-core AVX512-bf16 CPU, SmolLM2-135M, 200-token prompts: autocast makes
        # the prefill 2.6-3x faster from 8 rows up, but decoding 2x slower at 1 row (weights are
        # re-cast every step) and equal at 32 rows. So: autocast for batches of 8 or more.
        return self._autocast_capable and rows >= AUTOCAST_MIN_ROWS

    def _pick(self, logits: Any, gens: list[Any]) -> tuple[Any, Any]:
        """Choose one token per row; returns (tokens, log-prob of each under the sampler)."""
        import torch

        if self.temperature == 0:
            logprobs = torch.log_softmax(logits, dim=-1)
            tokens = logits.argmax(dim=-1)
            return tokens, logprobs.gather(1, tokens[:, None])[:, 0]
        scores = logits / self.temperature
        if self.top_k and self.top_k < scores.shape[-1]:
            kth = torch.topk(scores, self.top_k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.top_p < 1.0:  # as transformers' TopPLogitsWarper
            sorted_scores, order = torch.sort(scores, descending=False, dim=-1)
            cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
            remove_sorted = cum <= (1 - self.top_p)
            remove_sorted[:, -1] = False
            remove = remove_sorted.scatter(1, order, remove_sorted)
            scores = scores.masked_fill(remove, float("-inf"))
        logprobs = torch.log_softmax(scores, dim=-1)
        tokens = self._draw(logprobs.exp(), gens)
        return tokens, logprobs.gather(1, tokens[:, None])[:, 0]

    def _draw(self, probs: Any, gens: list[Any]) -> Any:
        """One token per row of ``probs``, each from its row's generator: inverse CDF, one
        uniform per row (``sampling.py``; bench/rollout.py times torch.multinomial here)."""
        return sample_rows(probs, gens)
