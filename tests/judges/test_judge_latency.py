"""Judge latency split into service time (the judge working) and queue time (waiting behind
``--concurrency`` or for the one local model), issue 25."""

from __future__ import annotations

import asyncio
import threading
import time

from judge_fakes import FAST_RETRY, answer, labels_in, make_group

from rankgym.judges import local_provider
from rankgym.judges.group_judge import judge_groups
from rankgym.judges.record import judge_timing
from rankgym.judges.spec import default_spec

SPEC = default_spec("fakejudge/m", rubric="Prefer correct answers.")


def test_waiting_behind_concurrency_is_queue_time_not_service_time(fake) -> None:
    async def slow(model, messages, *a, **kw):
        await asyncio.sleep(0.2)
        return fake.completion(model, messages, *a, **kw)

    fake.acompletion = slow
    fake.script = [lambda m: answer({lab: 0.5 for lab in labels_in(m)})]
    groups = [make_group(2, gid=f"grp-{i}") for i in range(3)]
    js = asyncio.run(judge_groups(groups, SPEC, None, retry=FAST_RETRY, concurrency=1))
    timings = [judge_timing(j) for j in js]
    assert all(t is not None for t in timings)
    services = sorted(s for s, _ in timings)
    assert services[0] > 0.18  # each call's own time (the first also pays LiteLLM's warm-up)
    assert services[1] < 0.6  # a warm call: its 0.2 s, not the wait before it
    queues = sorted(q for _, q in timings)
    assert queues[0] < 0.1 and queues[-1] > 0.35  # the last one waited for the other two
    for j, (service, queue) in zip(js, timings, strict=True):
        assert service + queue <= j.latency_s + 0.05


def test_the_local_model_reports_its_time_without_the_wait_for_its_lock(monkeypatch) -> None:
    llm = local_provider.LocalJudgeLLM()

    def work(model, messages, max_tokens, pair_orders=2):
        time.sleep(0.2)
        return "ok", 1, 1

    monkeypatch.setattr(llm, "_respond", work)
    seen: list[float] = []

    def call() -> None:
        resp = llm.completion("smollm2", [{"role": "user", "content": "x"}])
        seen.append(resp._hidden_params[local_provider.SERVICE_S])

    threads = [threading.Thread(target=call) for _ in range(3)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.perf_counter() - t0 > 0.55  # one at a time
    assert all(0.18 < s < 0.5 for s in seen)  # each its own 0.2 s, not the wait (0.4 s+)
