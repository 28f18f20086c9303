"""``make_policy(spec)``: the policy spec strings the CLI and the trainer accept.

Part of ``rankgym.envs.policies``; the specs are listed in the package docstring.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rankgym.envs.base import Env
from rankgym.envs.policies.base import Policy
from rankgym.envs.policies.litellm import LiteLLMPolicy
from rankgym.envs.policies.mixed import MixedPolicy
from rankgym.envs.policies.scripted import OraclePolicy, RandomPolicy, noisy_oracle
from rankgym.envs.policies.transformers import TransformersPolicy
from rankgym.envs.policies.vllm import make_vllm_policy
from rankgym.errors import UserError
from rankgym.model import auto_dtype, load_causal_lm, shared_embedded


def make_policy(
    spec: str,
    env: Env | None = None,
    *,
    max_new_tokens: int | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
) -> Policy:
    """Build a policy from a spec string (see the module docstring for the specs).

    ``max_new_tokens`` defaults to 96 for local models and 512 for LiteLLM models. Raises
    ``rankgym.cli.UserError`` for an unknown spec or a missing model directory.
    """
    if "," in spec:  # a mixed group: round-robin over the listed policies
        parts = [s.strip() for s in spec.split(",")]
        return MixedPolicy(
            [
                make_policy(
                    s,
                    env,
                    seed=seed,
                    max_new_tokens=max_new_tokens,
                    temperature=temperature,
                    top_p=top_p,
                )
                for s in parts
            ]
        )
    if spec.startswith("oracle~"):
        try:
            return noisy_oracle(spec, seed)
        except ValueError as e:
            raise UserError(f"--policy {e}") from None
    sampling: dict[str, Any] = {
        "max_new_tokens": max_new_tokens or 96,
        "temperature": temperature,
        "top_p": top_p,
        "seed": seed,
    }
    if spec in ("embedded", "transformers"):
        dtype = auto_dtype("cpu")
        model, tok = shared_embedded(dtype)
        # the shared base may hold a judge's or a trainer's adapter: sample the base alone
        return TransformersPolicy(model, tok, name="embedded", base_only=True, **sampling)
    if spec.startswith("hf:"):
        path, adapter = spec[3:], None
        if "@" in path and not Path(path).is_dir():
            path, adapter = path.rsplit("@", 1)
        if not path or not Path(path).is_dir():
            raise UserError(
                f"--policy {spec}: {path!r} is not a directory; hf:PATH needs a local "
                "transformers model directory (config.json + weights), optionally @ADAPTER_DIR"
            )
        if adapter is not None and not (Path(adapter) / "adapter_config.json").is_file():
            raise UserError(
                f"--policy {spec}: {adapter!r} holds no adapter_config.json; "
                "@ADAPTER_DIR must be a peft adapter directory (e.g. a trainer checkpoint)"
            )
        dtype = auto_dtype("cpu")
        model, tok = load_causal_lm(path, dtype=dtype)
        if adapter is not None:
            from peft import PeftModel  # ~10 s to import: only for an adapter

            model = PeftModel.from_pretrained(model, adapter)
            model.eval()
        return TransformersPolicy(model, tok, name=spec, **sampling)
    if spec.startswith("litellm:") and len(spec) > len("litellm:"):
        return LiteLLMPolicy(
            spec[len("litellm:") :],
            temperature=temperature,
            max_tokens=max_new_tokens or 512,
            top_p=None if top_p == 1.0 else top_p,
            seed=seed,
        )
    if spec.startswith("vllm:"):  # a vLLM server (running, or started and owned by the policy)
        return make_vllm_policy(spec, **sampling)
    if spec == "random":
        return RandomPolicy(seed=seed)
    if spec == "oracle":
        return OraclePolicy(env=env)
    raise UserError(
        f"unknown policy {spec!r}; use one of: embedded, hf:PATH[@ADAPTER_DIR], "
        "litellm:MODEL (e.g. litellm:openai/gpt-4o-mini), vllm:URL[@MODEL], vllm:serve[:DIR], "
        "random, oracle, oracle~P (noisy oracle, 0 <= P <= 1), or a comma list for mixed groups "
        "(e.g. oracle,random,embedded)"
    )
