"""Policies: batched sampling plumbing on a tiny random model, text protocol, specs, baselines."""

from __future__ import annotations

import json

import pytest
import torch

from rankgym.envs.policies import (
    EpisodeContext,
    LiteLLMPolicy,
    OraclePolicy,
    Policy,
    RandomPolicy,
    TransformersPolicy,
    chat_ids,
    make_policy,
    render_text_protocol,
)
from rankgym.envs.toolcalls import assistant_call, protocol_prompt
from rankgym.errors import UserError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


def convo(i: int, extra: int = 0) -> list[dict]:
    return [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": f"What is {i} + {i * 7}?" + " Think." * extra},
    ]


def policy(tiny, tokenizer, **kw) -> TransformersPolicy:
    kw.setdefault("max_new_tokens", 8)
    return TransformersPolicy(tiny, tokenizer, name="tiny", autocast=False, **kw)


def test_logprobs_align_with_completion_ids(tiny, tokenizer):
    p = policy(tiny, tokenizer, temperature=1.0, max_new_tokens=6)
    batch, tools = [convo(1), convo(2, extra=5)], [[ADD_TOOL], []]
    gens = p.generate(batch, tools)
    assert isinstance(p, Policy)
    for g, messages, tool_list in zip(gens, batch, tools, strict=True):
        assert g.prompt_token_ids == p.encode(messages, tool_list)[0]
        assert len(g.completion_token_ids) == len(g.completion_logprobs) == g.completion_tokens
        assert 1 <= len(g.completion_token_ids) <= 6
        assert all(lp <= 0 and lp > -1e4 for lp in g.completion_logprobs)
        assert g.policy == "tiny"
        assert g.message["role"] == "assistant"


def test_batched_equals_one_at_a_time_under_greedy(tiny, tokenizer):
    p = policy(tiny, tokenizer, temperature=0.0)
    batch = [convo(1), convo(2, extra=9), convo(3, extra=3)]  # different lengths -> left padding
    together = p.generate(batch, [[], [], []])
    alone = [p.generate([c], [[]])[0] for c in batch]
    for a, b in zip(together, alone, strict=True):
        assert a.completion_token_ids == b.completion_token_ids
        assert a.prompt_token_ids == b.prompt_token_ids
        assert a.completion_logprobs == pytest.approx(b.completion_logprobs, abs=1e-4)


def test_left_padding_matches_transformers_generate(tiny, tokenizer):
    p = policy(tiny, tokenizer, temperature=0.0, max_new_tokens=6)
    batch = [convo(4), convo(5, extra=12)]
    gens = p.generate(batch, [[], []])
    for g in gens:
        ref = tiny.generate(
            torch.tensor([g.prompt_token_ids]),
            attention_mask=torch.ones(1, len(g.prompt_token_ids), dtype=torch.long),
            max_new_tokens=len(g.completion_token_ids),
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
        )
        assert ref[0, len(g.prompt_token_ids) :].tolist() == g.completion_token_ids


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logprobs_are_the_processed_distribution(tiny, tokenizer, temperature):
    """logprob = log_softmax(logits / T) of the sampled token, recomputed by a full forward."""
    p = policy(tiny, tokenizer, temperature=temperature, max_new_tokens=5)
    (g,) = p.generate([convo(6, extra=2)], [[]])
    ids = torch.tensor([g.prompt_token_ids + g.completion_token_ids])
    with torch.no_grad():
        logits = tiny(ids).logits[0].float()
    n = len(g.prompt_token_ids)
    steps = logits[n - 1 : n - 1 + len(g.completion_token_ids)] / temperature
    expected = torch.log_softmax(steps, -1).gather(1, torch.tensor(g.completion_token_ids)[:, None])
    assert g.completion_logprobs == pytest.approx(expected[:, 0].tolist(), abs=1e-4)


def test_top_p_logprobs_are_renormalised(tiny, tokenizer):
    p = policy(tiny, tokenizer, temperature=1.0, top_p=0.5, max_new_tokens=4)
    full = policy(tiny, tokenizer, temperature=1.0, max_new_tokens=4)
    ctx = [EpisodeContext(seed=3)]
    (g,) = p.generate([convo(2)], [[]], ctx)
    (f,) = full.generate([convo(2)], [[]], ctx)
    # the nucleus renormalises: the same first token is at least as likely under top-p
    if g.completion_token_ids[0] == f.completion_token_ids[0]:
        assert g.completion_logprobs[0] >= f.completion_logprobs[0] - 1e-6


def test_per_episode_seed_makes_sampling_independent_of_batch(tiny, tokenizer):
    p = policy(tiny, tokenizer, temperature=1.0, max_new_tokens=8)
    a, b = convo(1), convo(9, extra=4)
    ca, cb = EpisodeContext(seed=11, turn=0), EpisodeContext(seed=12, turn=0)
    both = p.generate([a, b], [[], []], [ca, cb])
    alone = p.generate([a], [[]], [ca])
    assert both[0].completion_token_ids == alone[0].completion_token_ids
    other_turn = p.generate([a], [[]], [EpisodeContext(seed=11, turn=1)])
    other_seed = p.generate([a], [[]], [EpisodeContext(seed=99, turn=0)])
    assert (other_turn[0].completion_token_ids, other_seed[0].completion_token_ids) != (
        alone[0].completion_token_ids,
        alone[0].completion_token_ids,
    )


def test_stops_at_end_of_turn_token(tiny, tokenizer):
    p = policy(tiny, tokenizer, temperature=0.0, max_new_tokens=8)
    (g,) = p.generate([convo(1)], [[]])
    p.eos_ids = {g.completion_token_ids[0]}  # make the first greedy token the stop token
    (h,) = p.generate([convo(1)], [[]])
    assert h.completion_token_ids == g.completion_token_ids[:1]


def test_long_prompt_truncated_from_the_left_keeping_system(tiny, tokenizer):
    p = policy(tiny, tokenizer, temperature=0.0, max_prompt_tokens=60)
    long = convo(1) + [
        {"role": "assistant", "content": "word " * 80},
        {"role": "user", "content": "And now?"},
    ]
    (g,) = p.generate([long], [[]])
    sys_ids = chat_ids(tokenizer, long[:1], None, generation_prompt=False)
    assert len(g.prompt_token_ids) == 60
    assert g.prompt_token_ids[: len(sys_ids)] == sys_ids
    full, _ = TransformersPolicy(tiny, tokenizer, max_prompt_tokens=10_000).encode(long, [])
    assert g.prompt_token_ids[len(sys_ids) :] == full[-(60 - len(sys_ids)) :]
    assert g.notes and "truncated" in g.notes[0]


def test_peft_model_in_train_mode_generates_and_keeps_its_mode(tiny, tokenizer):
    import copy

    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(
        copy.deepcopy(tiny),
        LoraConfig(r=4, lora_alpha=8, lora_dropout=0.5, target_modules=["q_proj", "v_proj"]),
    )
    lora.train()
    p = TransformersPolicy(lora, tokenizer, name="tiny@step0", max_new_tokens=5, temperature=0)
    first = p.generate([convo(1)], [[]])[0]
    second = p.generate([convo(1)], [[]])[0]
    assert lora.training  # restored
    assert first.completion_token_ids == second.completion_token_ids  # dropout was off
    p.name = "tiny@step3"
    assert p.generate([convo(1)], [[]])[0].policy == "tiny@step3"


def test_text_protocol_rendering():
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "1+2?"},
        assistant_call("add", {"a": 1, "b": 2}, "c0"),
        {"role": "tool", "tool_call_id": "c0", "name": "add", "content": "3"},
        {"role": "user", "content": "Answer now."},
    ]
    out = render_text_protocol(msgs, [ADD_TOOL])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert protocol_prompt([ADD_TOOL]) in out[0]["content"]
    assert json.loads(
        out[2]["content"].removeprefix("<tool_call>").removesuffix("</tool_call>")
    ) == {
        "name": "add",
        "arguments": {"a": 1, "b": 2},
    }
    assert '<tool_response name="add">\n3\n</tool_response>' in out[3]["content"]
    assert out[3]["content"].endswith("Answer now.")
    # an env that already put the protocol in its system prompt does not get it twice
    with_protocol = [{"role": "system", "content": protocol_prompt([ADD_TOOL])}, msgs[1]]
    again = render_text_protocol(with_protocol, [ADD_TOOL])
    assert again[0]["content"].count("<tool_call>") == 1


def test_generated_tool_call_text_is_parsed(tiny, tokenizer):
    from rankgym.envs.policies import _assistant_message

    msg = _assistant_message(
        'Sure. <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    )
    assert msg["content"] == "Sure."
    assert msg["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}
    broken = _assistant_message("<tool_call>{{{</tool_call>")
    assert broken == {"role": "assistant", "content": "<tool_call>{{{</tool_call>"}  # env nudges


def test_native_template_gets_tools_and_loses_the_text_instructions(tiny, tokenizer):
    import copy

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = (
        "{% if tools %}<tools>{{ tools | tojson }}</tools>\n{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "{% for tc in m.tool_calls or [] %}<tool_call>{{ tc.function | tojson }}</tool_call>{% endfor %}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    p = TransformersPolicy(tiny, tok, max_new_tokens=2, temperature=0)
    assert p.tool_mode == "native"
    msgs = [
        {"role": "system", "content": "Hi.\n\n" + protocol_prompt([ADD_TOOL])},
        {"role": "user", "content": "1+2?"},
        assistant_call("add", {"a": 1}, "c0"),
        {"role": "tool", "tool_call_id": "c0", "name": "add", "content": "3"},
    ]
    text = tok.decode(p.encode(msgs, [ADD_TOOL])[0])
    assert text.startswith("<tools>") and '"name": "add"' in text
    assert "You can call tools" not in text
    assert '<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>' in text
    assert p.generate([msgs], [[ADD_TOOL]])[0].error is None


def test_hf_spec_loads_a_directory_and_an_adapter(tiny, tokenizer, tmp_path):
    from peft import LoraConfig, get_peft_model

    model_dir, adapter_dir = tmp_path / "m", tmp_path / "a"
    tiny.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    get_peft_model(tiny, LoraConfig(r=2, target_modules=["q_proj"])).save_pretrained(adapter_dir)
    tiny.eval()
    plain = make_policy(f"hf:{model_dir}", max_new_tokens=3, temperature=0)
    adapted = make_policy(f"hf:{model_dir}@{adapter_dir}", max_new_tokens=3, temperature=0)
    assert adapted.name == f"hf:{model_dir}@{adapter_dir}"
    for p in (plain, adapted):
        (g,) = p.generate([convo(1)], [[]])
        assert len(g.completion_token_ids) == len(g.completion_logprobs) >= 1
    with pytest.raises(UserError, match="not a directory"):
        make_policy(f"hf:{tmp_path / 'missing'}")
    with pytest.raises(UserError, match="adapter_config.json"):
        make_policy(f"hf:{model_dir}@{tmp_path}")


def test_unknown_spec_is_a_user_error():
    with pytest.raises(UserError, match="unknown policy 'gpt'"):
        make_policy("gpt")
    with pytest.raises(UserError):
        make_policy("litellm:")


def test_random_policy_is_seeded_and_makes_tool_calls():
    p = RandomPolicy(seed=1)
    ctxs = [EpisodeContext(seed=s) for s in range(40)]
    a = p.generate([convo(1)] * 40, [[ADD_TOOL]] * 40, ctxs)
    b = RandomPolicy(seed=1).generate([convo(1)] * 40, [[ADD_TOOL]] * 40, ctxs)
    assert [g.message for g in a] == [g.message for g in b]
    calls = [g.message["tool_calls"][0] for g in a if g.message.get("tool_calls")]
    texts = [g.message["content"] for g in a if not g.message.get("tool_calls")]
    assert calls and texts
    assert all(g.error is None and g.completion_token_ids == [] for g in a)


def test_oracle_needs_context_and_replays_the_script():
    class Scripted:
        env_id = "scripted"

        def oracle(self, task):
            return [{"role": "assistant", "content": f"answer {task}"}]

    p = OraclePolicy()
    assert "needs the episode" in p.generate([convo(1)], [[]])[0].error

    class T:
        id = "t1"

        def __str__(self):
            return "t1"

    ctx = [EpisodeContext(task=T(), env=Scripted())]
    assert p.generate([convo(1)], [[]], ctx)[0].message == {
        "role": "assistant",
        "content": "answer t1",
    }
    done = convo(1) + [
        {"role": "assistant", "content": "answer t1"},
        {"role": "user", "content": "?"},
    ]
    assert "has 1 turns" in p.generate([done], [[]], ctx)[0].error


def test_litellm_policy_text_mode_parses_calls_and_records_failures():
    reply = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    p = LiteLLMPolicy(
        "openai/gpt-4o-mini", tool_mode="text", completion_kwargs={"mock_response": reply}
    )
    (g,) = p.generate([convo(1)], [[ADD_TOOL]])
    assert g.error is None
    assert g.message["tool_calls"][0]["function"]["name"] == "add"
    assert g.completion_token_ids == [] and g.completion_logprobs == []
    bad = LiteLLMPolicy("no-such-provider/model", tool_mode="text")
    (e,) = bad.generate([convo(1)], [[]])
    assert e.error and "no-such-provider" in e.error
