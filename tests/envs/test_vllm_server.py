"""The vLLM server manager without vLLM: its command line, its environment, its start errors.

The real server is exercised in tests/vllm (``make test-vllm``).
"""

from __future__ import annotations

import sys

import pytest

from rankgym.envs.vllm_server import ManagedServer, VLLMClient, VLLMError
from rankgym.errors import RankgymError


def test_a_cpu_server_gets_lora_processed_logprobs_and_no_chunked_prefill(tmp_path, monkeypatch):
    monkeypatch.setattr("rankgym.envs.vllm_server._has_cuda", lambda: False)
    s = ManagedServer(tmp_path, "base", python=sys.executable, extra_args=["--seed", "3"])
    cmd = s.command()
    assert cmd[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    for flag in ("--enable-lora", "--no-enable-chunked-prefill", "--seed"):
        assert flag in cmd
    assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"
    assert cmd[cmd.index("--dtype") + 1] == "bfloat16"
    env = s.environment()
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert env["VLLM_CPU_KVCACHE_SPACE"] and env["VLLM_CPU_OMP_THREADS_BIND"].startswith("0-")


def test_a_gpu_server_keeps_vllms_own_defaults(tmp_path, monkeypatch):
    monkeypatch.setattr("rankgym.envs.vllm_server._has_cuda", lambda: True)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    s = ManagedServer(tmp_path, "base", python=sys.executable)
    assert "--no-enable-chunked-prefill" not in s.command()
    assert s.command()[s.command().index("--dtype") + 1] == "auto"
    assert "VLLM_CPU_KVCACHE_SPACE" not in s.environment()


def test_a_missing_vllm_interpreter_says_how_to_build_one(tmp_path):
    s = ManagedServer(tmp_path, python=str(tmp_path / "no-python"))
    with pytest.raises(VLLMError, match="make vllm-venv"):
        s.start(timeout_s=5)


def test_a_server_that_dies_while_starting_is_reported_with_its_log(tmp_path):
    # this interpreter has no vllm: the process exits at once with ModuleNotFoundError
    s = ManagedServer(tmp_path, python=sys.executable, log_path=tmp_path / "server.log")
    with pytest.raises(VLLMError, match="exited with code 1 while starting") as e:
        s.start(timeout_s=60)
    assert "vllm" in str(e.value) and isinstance(e.value, RankgymError)
    assert s.proc is None or s.proc.poll() is not None


def test_an_unreachable_server_is_one_error_naming_it():
    client = VLLMClient("http://127.0.0.1:9/v1")
    assert client.base_url == "http://127.0.0.1:9" and not client.healthy()
    with pytest.raises(VLLMError, match="127.0.0.1:9 is not reachable"):
        client.models()
