"""The judge through a LiteLLM Router: Retry-After honoured, a retry budget in time, fallbacks.

The deployments are real HTTP servers speaking the OpenAI chat API on 127.0.0.1 (test doubles
for a provider); everything from ``judge_groups`` to LiteLLM's Router and its OpenAI client is
the production path.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from http_fakes import JSONHandler, serve
from hypothesis import given
from hypothesis import strategies as st
from judge_fakes import make_group

from rankgym.errors import RankgymError
from rankgym.judges import router
from rankgym.judges.group_judge import default_spec, judge_groups_sync
from rankgym.judges.prompt import parse_ids_line
from rankgym.store import Store


class FakeProvider:
    """An OpenAI-compatible chat endpoint: 429 + Retry-After while ``limited_for_s`` lasts
    (counted from the first request), then a valid judge answer for the labels it was shown."""

    def __init__(self, limited_for_s: float, retry_after: str | None = "1") -> None:
        self.limited_for_s, self.retry_after = limited_for_s, retry_after
        self.hits: list[tuple[float, int]] = []
        provider = self

        class Handler(JSONHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                now = time.monotonic()
                first = provider.hits[0][0] if provider.hits else now
                if now - first < provider.limited_for_s:
                    provider.hits.append((now, 429))
                    self._send(429, {"error": {"message": "rate limited", "type": "requests"}})
                    return
                provider.hits.append((now, 200))
                text = "\n".join(str(m.get("content")) for m in body["messages"])
                scores = [
                    {"trajectory_id": lab, "score": 1.0 - k / 10, "rationale": "ok"}
                    for k, lab in enumerate(parse_ids_line(text) or [])
                ]
                self._send(200, {
                    "id": "c1", "object": "chat.completion", "created": 1, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                        "role": "assistant", "content": json.dumps({"scores": scores})}}],
                    "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
                })  # fmt: skip

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                retry = code == 429 and provider.retry_after is not None
                headers = {"Retry-After": provider.retry_after} if retry else None
                self.send_json(code, json.dumps(payload).encode(), headers)

        self.server, url = serve(Handler)
        self.url = url + "/v1"

    def statuses(self) -> list[int]:
        return [code for _, code in self.hits]


@pytest.fixture
def providers() -> Iterator[list[FakeProvider]]:
    made: list[FakeProvider] = []
    yield made
    for p in made:
        p.server.shutdown()
    router.uninstall()


def _deployment(name: str, p: FakeProvider) -> dict[str, Any]:
    return {"model_name": name, "model": "openai/fake-judge", "api_base": p.url, "params": {"api_key": "test"}}  # fmt: skip


def _judge(store_path: Any, **kw: Any) -> Any:
    spec = default_spec("judge", max_tokens=200, context_window=16000)
    with Store(store_path) as store:
        [j] = judge_groups_sync([make_group(3)], spec, store, **kw)
        stored = store.get_group("grp-test", spec.spec_hash)
    return j, stored


def test_a_group_rate_limited_for_a_while_is_judged_once_the_budget_allows(providers, store_path):
    p = FakeProvider(limited_for_s=2.5, retry_after="1")
    providers.append(p)
    router.install({"deployments": [_deployment("judge", p)], "retry_budget_min": 0.5})
    j, stored = _judge(store_path)
    assert j.status == "ok" and len(j.scores) == 3
    assert stored.judgement is not None and stored.judgement.status == "ok"
    codes = p.statuses()
    assert codes[-1] == 200 and codes.count(429) >= 2
    gaps = [b[0] - a[0] for a, b in zip(p.hits, p.hits[1:], strict=False)]
    assert min(gaps) >= 0.95, f"Retry-After: 1 not honoured, gaps {gaps}"


def test_a_group_whose_rate_limit_outlasts_the_budget_is_stored_unjudged_not_dropped(
    providers, store_path
):
    p = FakeProvider(limited_for_s=3600, retry_after="1")
    providers.append(p)
    router.install({"deployments": [_deployment("judge", p)], "retry_budget_min": 0.05})
    t0 = time.monotonic()
    j, stored = _judge(store_path)
    assert j.status == "unjudged" and "retry budget" in (j.error or "")
    assert stored.judgement is not None and stored.judgement.status == "unjudged"
    assert time.monotonic() - t0 < 10  # the budget (3 s) is not multiplied by judge retries
    assert 2 <= len(p.hits) <= 5


def test_a_deployment_that_keeps_refusing_falls_back_to_the_next_group(providers, store_path):
    main, backup = FakeProvider(3600, retry_after="30"), FakeProvider(0)
    providers += [main, backup]
    router.install(
        {
            "deployments": [_deployment("judge", main), _deployment("judge-backup", backup)],
            "fallbacks": {"judge": ["judge-backup"]},
            "retry_budget_min": 0.2,
        }
    )
    j, _ = _judge(store_path)
    assert j.status == "ok"
    assert backup.statuses() == [200] and main.statuses()[:1] == [429]


def test_calls_for_models_the_router_does_not_serve_go_straight_to_litellm(providers):
    p = FakeProvider(0)
    providers.append(p)
    router.install({"deployments": [_deployment("judge", p)]})
    assert router.active("judge") and not router.active("openai/gpt-4o-mini")


def test_a_fallback_to_an_unknown_group_is_rejected():
    with pytest.raises(ValueError, match="fallbacks name"):
        router.RouterConfig.model_validate(
            {"deployments": [{"model_name": "a", "model": "openai/x"}], "fallbacks": {"a": ["b"]}}
        )


def test_a_missing_api_key_variable_is_named(monkeypatch):
    monkeypatch.delenv("RG_TEST_KEY", raising=False)
    cfg = {"deployments": [{"model_name": "a", "model": "openai/x", "api_key_env": "RG_TEST_KEY"}]}
    with pytest.raises(RankgymError, match="RG_TEST_KEY is not set"):
        router.install(cfg)


def _error_with(headers: dict[str, str]) -> Exception:
    e = Exception("rate limited")
    e.response = httpx.Response(429, headers=headers)  # type: ignore[attr-defined]
    return e


def test_retry_after_is_read_in_seconds_milliseconds_and_http_dates():
    assert router.retry_after_s(_error_with({"retry-after": "7"})) == 7.0
    assert router.retry_after_s(_error_with({"retry-after-ms": "1500"})) == 1.5
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (router.retry_after_s(_error_with({"retry-after": when})) or 0) <= 31
    assert router.retry_after_s(_error_with({})) is None


@given(st.text(max_size=40), st.text(max_size=40))
def test_retry_after_never_raises_or_goes_negative_on_any_header(value, ms):
    # header values must be ASCII on the wire; anything else is dropped by httpx itself
    headers = {k: v for k, v in (("retry-after", value), ("retry-after-ms", ms)) if v.isascii()}
    try:
        e = _error_with({k: v.strip() for k, v in headers.items()})
    except (ValueError, TypeError):  # httpx refuses some control characters
        return
    wait = router.retry_after_s(e)
    assert wait is None or wait >= 0


def test_a_litellm_policy_naming_a_router_group_waits_out_the_rate_limit(providers):
    from rankgym.envs.policies import LiteLLMPolicy

    p = FakeProvider(limited_for_s=1.0, retry_after="1")
    providers.append(p)
    router.install({"deployments": [_deployment("policy", p)], "retry_budget_min": 0.5})
    [gen] = LiteLLMPolicy("policy", tool_mode="text").generate(
        [[{"role": "user", "content": "hello"}]], [[]]
    )
    assert gen.error is None and '"scores"' in (gen.text or "")
    assert p.statuses()[0] == 429 and p.statuses()[-1] == 200


def test_the_router_table_of_a_training_config_file_is_installed(providers, tmp_path):
    p = FakeProvider(0)
    providers.append(p)
    cfg = tmp_path / "train.toml"
    cfg.write_text(
        f"steps = 2\n\n[router]\nretry_budget_min = 1\n\n[[router.deployments]]\n"
        f'model_name = "judge"\nmodel = "openai/x"\napi_base = "{p.url}"\n'
    )
    router.install_file(str(cfg))
    assert router.active("judge")
    with pytest.raises(RankgymError, match="does not exist"):
        router.install_file(str(tmp_path / "missing.toml"))
