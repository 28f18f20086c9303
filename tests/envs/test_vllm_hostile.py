"""A hostile or silent `vllm:` server: what the client stores is validated, /v1/models is checked,
and timeouts turn silence into a per-trajectory error within a stated time (issue 26)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from http_fakes import JSONHandler, serve
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.envs.policies.base import Row
from rankgym.envs.policies.vllm import VLLMPolicy, make_vllm_policy, parse_completion
from rankgym.envs.vllm_server import (
    CONNECT_TIMEOUT_S,
    CONTROL_TIMEOUT_S,
    READ_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    VLLMClient,
    VLLMError,
)
from rankgym.errors import RankgymError

MODELS = {"data": [{"id": "base", "root": "/nowhere", "max_model_len": 2048}]}


def _reply(ids: list[Any], lps: list[Any], model: str = "base") -> dict[str, Any]:
    return {"model": model, "choices": [{"token_ids": ids, "logprobs": {"token_logprobs": lps}}]}


@pytest.fixture
def fake() -> Iterator[Callable[..., str]]:
    """``fake(models=..., completion=...)`` -> URL of a server answering with those callables."""
    servers = []

    def start(models: Any = MODELS, completion: Any = None) -> str:
        class H(JSONHandler):
            def _answer(self, what: Any) -> None:
                if callable(what):
                    what(self)
                else:
                    self.send_json(200, what if isinstance(what, bytes) else json.dumps(what).encode())  # fmt: skip

            def do_GET(self) -> None:
                self._answer(models)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self._answer(completion)

        server, url = serve(H)
        servers.append(server)
        return url

    yield start
    for s in servers:
        s.shutdown()


@pytest.fixture(scope="module")
def tok() -> Any:
    from transformers import AutoTokenizer

    from rankgym.model import embedded_model_dir

    return AutoTokenizer.from_pretrained(embedded_model_dir())


def _turn(url: str, tok: Any, **client_kw: Any) -> Any:
    policy = VLLMPolicy(VLLMClient(url, **client_kw), tok, "base", max_new_tokens=96)
    try:
        (gen,) = policy.generate_rows([Row(0, [{"role": "user", "content": "hi"}], [])])
    finally:
        policy.close()
    return gen


@pytest.mark.parametrize(
    ("ids", "lps", "needle"),
    [
        ([1, 10**9], [-0.1, -0.2], "token_ids[1] = '1000000000' is not a token id"),
        ([1, -3], [-0.1, -0.2], "token_ids[1]"),
        ([1, 2.0], [-0.1, -0.2], "token_ids[1] = '2.0'"),
        ([1, True], [-0.1, -0.2], "token_ids[1]"),
        ([1, 2], [-0.1, None], "token_logprobs[1] = 'None'"),
        ([1, 2], [-0.1, 0.5], "token_logprobs[1] = '0.5'"),
        ([1, 2], [-0.1, "nan"], "token_logprobs[1]"),
        ([1] * 200_000, [-0.1] * 200_000, "200000 token ids for max_tokens 96"),
        ([1, 2], [-0.1], "2 token ids but 1 logprobs"),
    ],
)
def test_a_bad_completion_becomes_that_turns_error_not_training_data(
    fake: Any, tok: Any, ids: list[Any], lps: list[Any], needle: str
):
    gen = _turn(fake(completion=_reply(ids, lps)), tok)
    assert gen.error is not None and needle in gen.error
    assert gen.completion_token_ids == [] and gen.completion_logprobs == []


def test_a_good_completion_is_kept_and_rounding_above_zero_reads_as_zero(fake: Any, tok: Any):
    gen = _turn(fake(completion=_reply([28, 29], [-0.5, 1e-6])), tok)
    assert gen.error is None and gen.completion_token_ids == [28, 29]
    assert gen.completion_logprobs == [-0.5, 0.0]


@pytest.mark.parametrize(
    ("models", "needle"),
    [
        (b"<html>", "not JSON"),
        ({"data": {"id": "base"}}, 'expected {"data": [...]}'),
        ([{"id": "base"}], 'expected {"data": [...]}'),
        (
            {"data": [{"id": "base", "max_model_len": "abc"}]},
            "max_model_len must be a positive integer",
        ),  # fmt: skip
        ({"data": [{"root": "/x"}]}, "data[0] has no string 'id'"),
        ({"data": [{"id": "base", "root": 5}]}, "data[0].root must be a string"),
    ],
)
def test_bad_models_answers_are_one_vllm_error(fake: Any, models: Any, needle: str):
    client = VLLMClient(fake(models=models))
    with pytest.raises(VLLMError) as e:
        client.models()
    assert needle in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(VLLMError):  # the spec path: a clean error too, never a traceback
        make_vllm_policy(f"vllm:{client.base_url}")


def test_a_context_window_with_no_room_for_a_prompt_is_refused(fake: Any, tok: Any):
    url = fake(models={"data": [{"id": "base", "max_model_len": 1}]})
    with pytest.raises(VLLMError, match="max_model_len 1: no room for a prompt"):
        VLLMPolicy(VLLMClient(url), tok, "base", max_new_tokens=96)


def test_the_default_timeouts_are_the_stated_ones():
    assert (CONNECT_TIMEOUT_S, READ_TIMEOUT_S, REQUEST_TIMEOUT_S, CONTROL_TIMEOUT_S) == (10, 120, 300, 30)  # fmt: skip
    c = VLLMClient("http://127.0.0.1:9")
    assert c.http.timeout.connect == 10 and c.http.timeout.read == 120 and c.request_s == 300
    c.close()


def _silent(h: Any) -> None:
    time.sleep(4)


def _slowloris(h: Any) -> None:
    h.send_response(200)
    h.send_header("content-type", "application/json")
    h.send_header("content-length", "100000")
    h.end_headers()
    for _ in range(40):
        h.wfile.write(b" ")
        h.wfile.flush()
        time.sleep(0.1)


@pytest.mark.parametrize("behaviour", [_silent, _slowloris], ids=["silent", "slowloris"])
def test_a_stalled_completion_is_a_turn_error_within_the_timeout(
    fake: Any, tok: Any, behaviour: Any
):
    url = fake(completion=behaviour)
    t0 = time.perf_counter()
    gen = _turn(url, tok, read_s=1.0, request_s=1.5)
    assert time.perf_counter() - t0 < 3.5
    assert gen.error is not None and ("timeout" in gen.error or "took over" in gen.error)


def test_a_hanging_models_endpoint_is_an_error_within_the_control_timeout(fake: Any):
    client = VLLMClient(fake(models=_silent), control_s=1.0, read_s=1.0)
    t0 = time.perf_counter()
    with pytest.raises(VLLMError, match="not reachable"):
        client.models()
    assert time.perf_counter() - t0 < 3


def test_a_body_over_the_size_limit_is_refused_while_reading(fake: Any, tok: Any):
    gen = _turn(fake(completion=b" " * 300_000), tok, max_bytes=100_000)
    assert gen.error is not None and "over 100000 bytes" in gen.error


@pytest.mark.parametrize("url", ["http://[::1", "ftp://host", "http://user:sk-secret@host:1"])
def test_a_bad_server_url_is_a_clean_error_naming_the_url_problem(url: str):
    with pytest.raises(VLLMError) as e:
        VLLMClient(url)
    assert "sk-secret" not in str(e.value)
    with pytest.raises(RankgymError):  # one line from the CLI, never a traceback
        make_vllm_policy(f"vllm:{url}")


_value = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(), st.text(max_size=4)
)


@settings(max_examples=300, deadline=None)
@given(
    resp=st.one_of(
        st.dictionaries(st.sampled_from(["model", "choices"]), _value),
        st.builds(
            _reply,
            st.lists(_value, max_size=8) | st.lists(st.integers(-5, 70_000), max_size=8),
            st.lists(_value, max_size=8) | st.lists(st.floats(max_value=1.0), max_size=8),
            st.sampled_from(["base", "other"]),
        ),
    )
)
def test_fuzzed_completions_are_valid_or_a_vllm_error(resp: dict[str, Any]):
    try:
        ids, lps = parse_completion(resp, model="base", vocab_size=49_152, max_tokens=6)
    except VLLMError:
        return
    assert len(ids) == len(lps) <= 6
    assert all(type(t) is int and 0 <= t < 49_152 for t in ids)
    assert all(math.isfinite(x) and x <= 0 for x in lps)


def test_a_malformed_vllm_url_in_a_train_config_fails_before_run_json(tmp_path: Any, capsys: Any):
    from rankgym.cli import main

    cfg = tmp_path / "t.toml"
    cfg.write_text(f'out_dir = "{tmp_path / "run"}"\n[vllm]\nurl = "http://[::1"\n')
    assert main(["train", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "vllm.url" in err and "is not a URL" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "reply",
    [
        {"choices": [{}]},
        {"choices": [{"prompt_logprobs": [None, {"7": {"logprob": "x"}}]}]},
        {"choices": [{"prompt_logprobs": [None, {"7": {"logprob": float("nan")}}]}]},
        {"choices": [{"prompt_logprobs": [None, {"7": {"logprob": 3.0}}]}]},
    ],
)
def test_a_bad_adapter_probe_reply_is_an_adapter_sync_error(fake: Any, reply: dict[str, Any]):
    from types import SimpleNamespace

    from rankgym.trainer.adapter_sync import AdapterSync, AdapterSyncError

    url = fake(completion=json.dumps(reply).encode())  # NaN is written as NaN
    probe_owner = SimpleNamespace(client=VLLMClient(url), probe=[5, 7])
    with pytest.raises(AdapterSyncError, match="vLLM probe of 'base'"):
        AdapterSync._server_probe(probe_owner, "base")  # type: ignore[arg-type]
    probe_owner.client.close()


def test_a_five_million_id_answer_is_refused_at_the_body_cap_not_parsed(fake: Any, tok: Any):
    body = json.dumps(_reply([1] * 5_000_000, [-0.1] * 5_000_000)).encode()  # ~ 40 MB
    t0 = time.perf_counter()
    gen = _turn(fake(completion=body), tok)
    assert time.perf_counter() - t0 < 20
    assert gen.error is not None and "over 33554432 bytes" in gen.error
