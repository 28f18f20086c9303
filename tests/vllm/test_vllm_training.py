"""GRPO with rollouts through a real vLLM server and one LoRA adapter per step.

The judge is the trainer tests' deterministic fake (a real LiteLLM custom provider): it gives
every group distinct scores, so every step updates the adapter and the probe has a change to
find. The stale server is a small HTTP proxy in front of the real one that acknowledges new
adapters without loading them and answers every ``@step<k>`` request with step 0 -- the
failure where rollouts silently stay on the first adapter.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_fakes import JSONHandler, serve

from rankgym.store import Store
from rankgym.trainer.adapter_sync import AdapterSyncError
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.loop import Trainer

sys.path.insert(0, str(Path(__file__).parents[1] / "trainer"))
from trainer_helpers import install_fake_judge  # noqa: E402

pytestmark = pytest.mark.vllm


def _config(out: Path, url: str, steps: int = 2) -> TrainConfig:
    return TrainConfig.model_validate(
        {
            "name": "vllm-run",
            "seed": 5,
            "steps": steps,
            "out_dir": str(out),
            "env": {
                "id": "rankgym/ToolUse-v0",
                "kwargs": {"difficulty": "easy", "families": ["calc"]},
                "tasks_per_step": 1,
                "group_size": 4,
                "max_turns": 1,
            },
            "policy": {"model": "embedded", "max_new_tokens": 12},
            "lora": {"r": 16, "alpha": 32},
            "judge": {"model": "trainerfake/hash", "check_groups": 0},  # no preflight judge-check
            "optim": {"lr": 5e-3, "micro_batch_size": 4},
            "vllm": {"url": url},
        }
    )


def _served(url: str) -> set[str]:
    return {m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]}


def test_a_two_step_run_rolls_out_step_two_from_the_step_one_adapter(
    vllm_url, tmp_path, one_torch_thread
):
    install_fake_judge()
    trainer = Trainer(_config(tmp_path / "run", vllm_url), progress=False)
    summary = trainer.run()
    assert summary["steps_run"] == 2
    with Store(tmp_path / "run" / "store.db") as store:
        steps = {r["step"]: r["metrics"] for r in store.steps("vllm-run")}
        groups = {
            k: [store.get_group(g) for g in json.loads(p.read_text())["group_ids"]]
            for k, p in ((k, tmp_path / "run" / "steps" / f"step-{k:06d}.json") for k in (0, 1))
        }
    assert steps[0]["adapter"] == "vllm-run@step0" and steps[1]["adapter"] == "vllm-run@step1"
    # step 0 is the fresh adapter (a no-op); step 1 changed the weights and the server followed
    assert steps[0]["adapter_changed"] is False
    assert steps[1]["adapter_verified"] is True and steps[1]["adapter_changed"] is True
    assert steps[1]["probe_server_move"] > 0 and steps[1]["probe_local_move"] > 0
    for k in (0, 1):
        turns = [tu for g in groups[k] for t in g.trajectories for tu in t.turns]
        assert turns and {tu.policy for tu in turns} == {trainer.policy_name(k)}
        assert all(tu.completion_token_ids and tu.completion_logprobs for tu in turns)
    assert not any(n.startswith("vllm-run@") for n in _served(vllm_url))  # all unloaded


class StaleProxy:
    """Forwards to a vLLM server, but keeps serving the first ``@step`` adapter it loaded."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.first = upstream, None
        proxy = self

        class Handler(JSONHandler):
            def do_GET(self) -> None:
                r = httpx.get(proxy.upstream + self.path)
                self.send_json(r.status_code, r.content)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                name = body.get("lora_name") or body.get("model") or ""
                if "@step" in name and proxy.first is None:
                    proxy.first = name
                stale = "@step" in name and name != proxy.first
                if stale and self.path.endswith(("load_lora_adapter", "unload_lora_adapter")):
                    self.send_json(200, b"Success")  # acknowledged, never loaded
                    return
                if stale:
                    body["model"] = proxy.first
                r = httpx.post(proxy.upstream + self.path, json=body, timeout=300)
                data = r.content
                if stale and r.status_code == 200:  # and it claims to be the new one
                    data = json.dumps({**r.json(), "model": name}).encode()
                self.send_json(r.status_code, data)

        self.server, self.url = serve(Handler)


@pytest.fixture
def stale_proxy(vllm_url: str) -> Iterator[StaleProxy]:
    p = StaleProxy(vllm_url)
    yield p
    p.server.shutdown()
    if p.first:
        httpx.post(f"{vllm_url}/v1/unload_lora_adapter", json={"lora_name": p.first})


def test_a_server_that_keeps_the_old_adapter_stops_the_run_before_the_next_rollout(
    stale_proxy, tmp_path, one_torch_thread
):
    install_fake_judge()
    trainer = Trainer(_config(tmp_path / "run", stale_proxy.url), progress=False)
    with pytest.raises(
        AdapterSyncError, match="serves the previous adapter under 'vllm-run@step1'"
    ):
        trainer.run()
    assert (tmp_path / "run" / "steps" / "step-000000.json").is_file()
    assert not (tmp_path / "run" / "steps" / "step-000001.json").exists()  # no stale rollout
    with Store(tmp_path / "run" / "store.db") as store:
        assert [r["step"] for r in store.steps("vllm-run")] == [0]
