"""Per-step adapters on a vLLM server: publish ``<run>@step<k>``, prove it is served, drop the old.

With ``[vllm]`` in the training config the rollouts go through a vLLM server (see
``rankgym.envs.policies.vllm``) while the update runs on the local peft model. Before the
rollout of step ``k`` :meth:`AdapterSync.publish` does, in order:

1. save the local adapter to ``<out>/vllm-adapters/step-<k>`` (a standard peft directory);
2. load it into the server as ``<run>@step<k>`` (``/v1/load_lora_adapter``);
3. **verify** it with a probe: the log-probabilities of a fixed 80-token conversation, once on
   the server under the new name (``prompt_logprobs``) and once on the local copy. The local
   copy says whether the weights changed since the last published adapter (its probe moved).
   If they did, the server's probe must have moved too: a server still answering with the old
   adapter reproduces the old probe *exactly* (same weights, same kernels) and the run stops
   with :class:`AdapterSyncError`. When the local move is well above the server/local gap
   (bf16 kernels vs ours), the server's probe must also be nearer the new local probe than the
   old one. A step without an optimizer update predicts no move, and none is required;
4. switch the policy's requests to the new name and unload the previous adapter (and delete
   its directory).

Why not compare sampled text: one GRPO step at a usual LoRA learning rate moves log-probs by
~1e-4, while the server (bf16) and the local copy differ by ~5e-2 on every token (measured on
SmolLM2-135M), so "the output the local copy predicts" is only visible as *a* change on the
server, not as a match. The exact-repeat test is sharp because a vLLM server computes the same
prompt the same way twice when nothing else is in its batch.

What it does not do: it cannot tell a stale adapter from a fresh one after a step that did not
change the weights (nothing to tell apart); on a server busy with other clients, batch
composition can perturb the probe and mask a stale adapter (give the trainer its own server);
the adapter directory must be readable by the server (same machine or a shared disk).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rankgym.errors import RankgymError

if TYPE_CHECKING:
    from rankgym.trainer.context import TrainingContext

log = logging.getLogger(__name__)

__all__ = ["AdapterSync", "AdapterSyncError", "VLLMSection", "probe_ids", "start_for"]

EXACT = 1e-6
"""Mean |delta log-prob| below which two probes count as the same answer."""
MARGIN = 3.0
"""A local move this many times the server/local gap must also be matched in direction."""


class VLLMSection(BaseModel):
    """``[vllm]`` in a training config: roll out through a vLLM server with per-step LoRA."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    url: str | None = None
    """A running server (``http://host:port``) serving ``policy.model`` as ``served_name``;
    unset = start a managed server for the run and stop it at the end. Checked at load: a
    malformed URL or one with credentials is a config error, before run.json is written."""

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        from rankgym.envs.vllm_server import VLLMError, check_server_url

        if v is None:
            return v
        try:
            return check_server_url(v, "url")
        except VLLMError as e:
            raise ValueError(str(e)) from None

    served_name: str = "base"
    python: str | None = None
    """Interpreter with vLLM for the managed server (default: see ``vllm_server.vllm_python``)."""
    start_timeout_s: float = Field(600.0, gt=0, le=86_400)
    concurrency: int = Field(64, ge=1, le=4096)
    """Requests in flight at once (the server batches them)."""
    verify: bool = True
    """Probe every published adapter (see the module docstring); off only for debugging."""
    extra_args: list[str] = Field(default_factory=list)
    """Appended to the managed server's command line."""


class AdapterSyncError(RankgymError, RuntimeError):
    """The server does not serve the adapter the trainer just published."""


def probe_ids(tokenizer: Any) -> list[int]:
    """Token ids of the fixed probe conversation (chat template of the policy's tokenizer)."""
    msgs = [
        {"role": "system", "content": "You are a careful assistant. Use tools when needed."},
        {"role": "user", "content": "What is 17 + 25? Then convert 3 miles to kilometers."},
        {
            "role": "assistant",
            "content": "17 + 25 = 42. Three miles is about 4.83 kilometers, so the answers "
            "are 42 and 4.83 km.",
        },
    ]
    text = tokenizer.apply_chat_template(msgs, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _mean_abs(a: list[float], b: list[float]) -> float:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / max(1, len(a))


def _weights_hash(model: Any) -> str:
    h = hashlib.sha256()
    for name, p in sorted(model.named_parameters()):
        if p.requires_grad:
            h.update(name.encode())
            h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


class AdapterSync:
    """Keeps a vLLM server serving the local peft model's current adapter (module docstring).

    ``policy`` is the :class:`~rankgym.envs.policies.vllm.VLLMPolicy` the rollouts use; call
    :meth:`publish` before each step's rollout and :meth:`close` at the end.
    """

    def __init__(
        self,
        section: VLLMSection,
        *,
        run_id: str,
        model: Any,
        tokenizer: Any,
        model_dir: str | Path,
        out_dir: str | Path,
        lora_rank: int,
        policy_kwargs: dict[str, Any],
    ) -> None:
        from rankgym.envs.policies.vllm import VLLMPolicy
        from rankgym.envs.vllm_server import ManagedServer, VLLMClient

        self.section, self.run_id, self.model, self.tokenizer = section, run_id, model, tokenizer
        self.dir = Path(out_dir) / "vllm-adapters"
        self.server = None
        url = section.url
        if url is None:
            self.server = ManagedServer(
                model_dir,
                served_name=section.served_name,
                python=section.python,
                max_lora_rank=max(16, lora_rank),
                extra_args=section.extra_args,
                log_path=Path(out_dir) / "vllm-server.log",
            )
            url = self.server.start(section.start_timeout_s)
        self.client = VLLMClient(url)
        self.policy = VLLMPolicy(
            self.client,
            tokenizer,
            section.served_name,
            concurrency=section.concurrency,
            server=self.server,
            **policy_kwargs,
        )
        self.probe = probe_ids(tokenizer)
        self.current: str | None = None
        self.last: dict[str, Any] = {}
        """Metrics of the latest :meth:`publish` (the loop adds them to the step's)."""
        self.current_dir: Path | None = None
        # the reference the next adapter is compared with: the base model to begin with
        self._prev_server = self._server_probe(section.served_name)
        self._prev_local = self._local_probe(adapter=False)
        self._prev_hash: str | None = None

    # ---- probes -------------------------------------------------------------------------

    def _server_probe(self, name: str) -> list[float]:
        resp = self.client.completion(
            {"model": name, "prompt": self.probe, "max_tokens": 1, "temperature": 0.0,
             "prompt_logprobs": 0}
        )  # fmt: skip
        try:
            rows = resp["choices"][0]["prompt_logprobs"]
            out = [float(rows[i][str(self.probe[i])]["logprob"]) for i in range(1, len(self.probe))]  # fmt: skip
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise AdapterSyncError(f"vLLM probe of {name!r}: the reply has no prompt_logprobs for the probe tokens ({type(e).__name__}: {str(e)[:80]}); is it a vLLM server?") from None  # fmt: skip
        if not all(math.isfinite(x) and x <= 1e-3 for x in out):
            raise AdapterSyncError(f"vLLM probe of {name!r}: prompt log-probs are not finite numbers <= 0")  # fmt: skip
        return out

    def _local_probe(self, adapter: bool = True) -> list[float]:
        import torch

        was = self.model.training
        self.model.eval()
        off = self.model.disable_adapter() if not adapter else contextlib.nullcontext()
        try:
            with torch.inference_mode(), off:
                dev = next(self.model.parameters()).device
                logits = self.model(input_ids=torch.tensor([self.probe], device=dev)).logits[0]
                lp = logits.float().log_softmax(-1)
        finally:
            self.model.train(was)
        return [float(lp[i - 1, self.probe[i]]) for i in range(1, len(self.probe))]

    def verify(self, name: str) -> dict[str, Any]:
        """Probe ``name`` on the server against the local copy; raises if it is stale."""
        server, local = self._server_probe(name), self._local_probe()
        weights = _weights_hash(self.model)
        local_move = _mean_abs(local, self._prev_local)
        server_move = _mean_abs(server, self._prev_server)
        gap = _mean_abs(self._prev_server, self._prev_local)
        changed = local_move > EXACT and weights != self._prev_hash
        stats = {
            "probe_local_move": round(local_move, 6),
            "probe_server_move": round(server_move, 6),
            "probe_gap": round(gap, 6),
            "adapter_changed": changed,
        }
        if changed and server_move <= EXACT:
            raise AdapterSyncError(
                f"vLLM serves the previous adapter under {name!r}: the local copy's probe moved "
                f"by {local_move:.2e} but the server's did not move at all; rollouts would come "
                "from stale weights, so the run stops. Restart the server (or check that it "
                "loads adapters from the path the trainer writes)"
            )
        if changed and local_move > MARGIN * gap:
            to_new, to_old = _mean_abs(server, local), _mean_abs(server, self._prev_local)
            stats.update(probe_to_new=round(to_new, 6), probe_to_old=round(to_old, 6))
            if to_new >= to_old:
                raise AdapterSyncError(
                    f"vLLM's answers under {name!r} are nearer the previous adapter "
                    f"({to_old:.3f}) than the new one ({to_new:.3f}); the run stops"
                )
        self._prev_server, self._prev_local, self._prev_hash = server, local, weights
        return stats

    # ---- publishing ---------------------------------------------------------------------

    def name(self, step: int) -> str:
        return f"{self.run_id}@step{step}"

    def publish(self, step: int) -> dict[str, Any]:
        """Serve the local adapter as ``<run>@step<step>`` (save, load, verify, unload old).

        Returns metrics for the step log; a second call for the same step does nothing.
        """
        name = self.name(step)
        if name == self.current:
            return {"adapter": name}
        t0 = time.perf_counter()
        path = self.dir / f"step-{step:06d}"
        if path.exists():
            shutil.rmtree(path)
        from rankgym.trainer.checkpoint import training_adapters

        # the policy's adapter only: not a judge adapter loaded into the same base
        self.model.save_pretrained(str(path), selected_adapters=training_adapters(self.model))
        self.client.load_lora(name, path.resolve())
        stats: dict[str, Any] = {"adapter": name, "adapter_verified": False}
        if self.section.verify:
            try:
                stats.update(self.verify(name), adapter_verified=True)
            except AdapterSyncError:
                self.client.unload_lora(name)
                raise
        old, old_dir = self.current, self.current_dir
        self.policy.model = name
        self.current, self.current_dir = name, path
        if old is not None:
            self.client.unload_lora(old)
        if old_dir is not None and old_dir != path:
            shutil.rmtree(old_dir, ignore_errors=True)
        stats["adapter_sync_s"] = round(time.perf_counter() - t0, 3)
        log.info("serving %s (%s)", name, stats)
        self.last = stats
        return stats

    def close(self) -> None:
        """Unload the current adapter, close the client, stop a managed server."""
        if self.current is not None and self.server is None:
            with contextlib.suppress(RankgymError):
                self.client.unload_lora(self.current)
        self.policy.close()


def start_for(
    ctx: TrainingContext,
    section: VLLMSection,
    *,
    run_id: str,
    out_dir: Path,
    lora_rank: int,
    name: str,
) -> AdapterSync:
    """An :class:`AdapterSync` for a run's training context: the server serves ``ctx.model_dir``
    and samples as ``ctx.sampling`` says; the policy is called ``name`` until the first publish."""
    return AdapterSync(
        section,
        run_id=run_id,
        model=ctx.model,
        tokenizer=ctx.tokenizer,
        model_dir=ctx.model_dir,
        out_dir=out_dir,
        lora_rank=lora_rank,
        policy_kwargs={"name": name, **ctx.sampling},
    )
