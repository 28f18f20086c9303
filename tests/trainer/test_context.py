"""The training context: one model, folder, tokenizer, device and dtype per run, and what it builds."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from trainer_helpers import save_tiny_model, tiny_config, tiny_model

from rankgym.config import validate_config
from rankgym.envs.policies import TransformersPolicy
from rankgym.errors import UserError
from rankgym.model import embedded_model_dir, policy_model_dir
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.context import TrainingContext
from rankgym.trainer.loop import Trainer
from rankgym.trainer.setup import make_env_factory
from rankgym.trainer.sft import oracle_conversations, oracle_demonstrations, render_rows

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# sha256 (first 16 hex) of the rendered SFT rows (token ids, assistant mask) of oracle
# demonstrations, recorded at 0af4ebc, before the oracle episodes moved onto the rollout driver
PINNED_ROWS = [
    (
        "rankgym/ToolUse-v0",
        {"difficulty": "hard", "families": ["lookup"]},
        None,
        0,
        "9dfcd3c88e134a56",
    ),  # fmt: skip
    ("rankgym/ToolUse-v0", {"difficulty": "hard"}, 3, 2, "3c3b80d59b52d0e7"),
]


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def renderer() -> TransformersPolicy:
    model, tok = tiny_model()
    return TransformersPolicy(model, tok, max_new_tokens=64)


@pytest.mark.parametrize(("env_id", "kwargs", "max_turns", "seed", "pinned"), PINNED_ROWS)
def test_oracle_demonstrations_render_to_the_token_ids_recorded_before_the_rollout_played_them(
    renderer: TransformersPolicy,
    env_id: str,
    kwargs: dict[str, Any],
    max_turns: int | None,
    seed: int,
    pinned: str,
):
    make_env = make_env_factory(env_id, kwargs, max_turns)
    convs = oracle_conversations(make_env, 12, seed)
    assert _hash(render_rows(renderer, convs, 512)) == pinned


def test_an_oracle_that_runs_out_gives_no_demonstration(monkeypatch: pytest.MonkeyPatch):
    env = make_env_factory("rankgym/ToolUse-v0", {"difficulty": "hard"})()
    tasks = env.tasks("train")[:3]
    short = tasks[1].id
    full = env.oracle

    def oracle(task: Any) -> list[dict[str, Any]]:
        return full(task)[:1] if task.id == short else full(task)  # one turn too few

    monkeypatch.setattr(env, "oracle", oracle)
    convs = oracle_demonstrations(env, [t.id for t in tasks])
    assert [c.source for c in convs] == [f"oracle:{t.id}" for t in tasks if t.id != short]
    assert all(c.messages[-1]["role"] == "assistant" and c.tools for c in convs)


def test_the_embedded_model_resolves_to_its_converted_folder_and_a_path_to_itself():
    assert policy_model_dir("embedded") == (embedded_model_dir(), "embedded")
    assert policy_model_dir("/models/my-llm/") == (Path("/models/my-llm"), "my-llm")


def test_a_context_from_a_config_holds_the_lora_model_and_samples_as_the_policy_section_says(
    tmp_path: Path,
):
    model_dir = save_tiny_model(tmp_path / "tiny")
    raw = tiny_config(model_dir, tmp_path / "out", policy={"temperature": 0.5, "top_p": 0.9})
    cfg = validate_config(raw, TrainConfig)
    ctx = TrainingContext.from_config(cfg)
    assert (ctx.model_dir, ctx.model_name, ctx.device) == (model_dir, "tiny", "cpu")
    assert ctx.dtype in ("float32", "bfloat16") and ctx.bf16 is False  # optim.bf16 = "off"
    assert ctx.model.peft_config["default"].r == 4
    rollout = ctx.policy("tiny@step0")
    assert (rollout.name, rollout.max_new_tokens, rollout.temperature, rollout.top_p) == (
        "tiny@step0", 6, 0.5, 0.9,
    )  # fmt: skip
    assert rollout.model is ctx.model and rollout.autocast is False
    held_out = ctx.eval_policy("tiny@step0", temperature=0.7)  # nucleus sampling off
    assert (held_out.temperature, held_out.top_p, held_out.max_new_tokens) == (0.7, 1.0, 6)


def test_a_missing_policy_model_folder_is_a_user_error_naming_the_key(tmp_path: Path):
    raw = tiny_config(tmp_path / "nowhere", tmp_path / "out")
    with pytest.raises(UserError, match=r"^policy\.model: .*nowhere"):
        TrainingContext.from_config(validate_config(raw, TrainConfig))


def test_a_context_from_an_adapter_refuses_a_folder_without_an_adapter(tmp_path: Path):
    with pytest.raises(UserError, match="--adapter .* holds no adapter_config.json"):
        TrainingContext.from_adapter(tmp_path)


def test_a_trainer_declares_what_setup_fills_in_with_its_defaults(tmp_path: Path):
    cfg = validate_config(tiny_config(tmp_path / "m", tmp_path / "out"), TrainConfig)
    t = Trainer(cfg)
    assert (t.spec, t.start_step, t.sft_summary, t.judge_train, t.monitor, t.sync) == (
        None, 0, None, None, None, None,
    )  # fmt: skip


def test_the_vllm_adapter_sync_samples_as_the_context_says_and_starts_at_the_given_name(
    tmp_path: Path,
):
    from http_fakes import JSONHandler, serve

    from rankgym.trainer.adapter_sync import VLLMSection, start_for

    class Server(JSONHandler):  # /v1/models, and every probe token at log-prob -1
        def do_GET(self) -> None:
            self.send_json(200, json.dumps({"data": [{"id": "base", "max_model_len": 4096}]}).encode())  # fmt: skip

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
            rows = [None] + [{str(t): {"logprob": -1.0}} for t in body["prompt"][1:]]
            self.send_json(200, json.dumps({"choices": [{"prompt_logprobs": rows}]}).encode())

    server, url = serve(Server)
    model_dir = save_tiny_model(tmp_path / "tiny")
    raw = tiny_config(model_dir, tmp_path / "out", policy={"temperature": 0.5, "top_p": 0.9})
    ctx = TrainingContext.from_config(validate_config(raw, TrainConfig))
    sync = start_for(ctx, VLLMSection(url=url), run_id="r", out_dir=tmp_path / "out",
                     lora_rank=4, name="tiny@step0")  # fmt: skip
    try:
        p = sync.policy
        assert (p.name, p.model, p.max_new_tokens, p.temperature, p.top_p) == (
            "tiny@step0", "base", 6, 0.5, 0.9,
        )  # fmt: skip
        assert sync.model is ctx.model and sync.server is None  # a given URL: nothing started
    finally:
        sync.close()
        server.shutdown()


def test_the_demo_frees_a_set_up_trainers_model_through_its_context(tmp_path: Path):
    from rankgym.trainer.demo import _drop_training_state

    model_dir = save_tiny_model(tmp_path / "tiny")
    raw = tiny_config(model_dir, tmp_path / "out", steps=1, reward={"kind": "verifiable"})
    t = Trainer(validate_config(raw, TrainConfig), progress=False)
    t.setup()
    assert t.policy.model is t.model is t.ctx.model
    _drop_training_state(t)
    assert (t.ctx, t.policy, t.optimizer) == (None, None, None)
    t.store.close()
