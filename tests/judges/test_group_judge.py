"""The group judge through LiteLLM with a scripted provider (no network, no model)."""

from __future__ import annotations

import asyncio
import json
import re

import litellm
import pytest
from judge_fakes import FAST_RETRY, answer, labels_in, make_group, rate_limit, timeout

from rankgym.judges.group_judge import judge_groups, presentation_orders
from rankgym.judges.record import judge_summary as summarize
from rankgym.judges.spec import default_spec
from rankgym.store import Store

SPEC = default_spec("fakejudge/m", rubric="Prefer correct answers.")


def run(groups, spec=SPEC, store=None, **kw):
    kw.setdefault("retry", FAST_RETRY)
    return asyncio.run(judge_groups(groups, spec, store, **kw))


def by_content(messages) -> str:
    """Score each trajectory by its final answer, regardless of position and context."""
    user = messages[1]["content"]
    scores = {}
    for label, block in re.findall(r'<trajectory id="(T\d+)">\n(.*?)</trajectory>', user, re.S):
        final = [ln for ln in block.splitlines() if ln.startswith("assistant: ")][-1]
        scores[label] = 0.9 if "41,200" in final else 0.2 if "Lisbon" in final else 0.5
    return answer(scores)


def test_valid_output_matched_by_id(fake):
    g = make_group(3)
    fake.script = [answer({"T3": 0.1, "T1": 0.8, "T2": 0.5}, hack={"T2"})]
    (j,) = run([g])
    assert j.status == "ok" and j.calls == 1 and not j.cached
    assert j.score_map() == {"traj-0": 0.8, "traj-1": 0.5, "traj-2": 0.1}
    assert [s.hack_suspected for s in j.scores] == [False, True, False]
    assert j.scores[0].rationale == "r-T1"
    assert (j.input_tokens, j.output_tokens) == (100, 10)
    assert g.judgement is j and len(j.presentations) == 1
    assert j.presentations[0]["order"] == ["traj-0", "traj-1", "traj-2"]


def test_litellm_mock_response_and_cost():
    g = make_group(2)
    spec = default_spec(
        "openai/gpt-4o-mini", extra={"mock_response": answer({"T1": 1.0, "T2": 0.0})}
    )
    (j,) = run([g], spec=spec)
    assert j.status == "ok" and j.score_map() == {"traj-0": 1.0, "traj-1": 0.0}
    assert j.input_tokens > 0 and j.cost_usd is not None and j.cost_usd > 0


def test_malformed_json_is_retried_with_the_error_shown(fake):
    fake.script = ["Sure! Here are the scores: {scores: [T1=0.5", answer({"T1": 0.3, "T2": 0.6})]
    (j,) = run([make_group(2)])
    assert j.status == "ok" and j.calls == 2
    assert j.score_map() == {"traj-0": 0.3, "traj-1": 0.6}
    retry_msgs = fake.requests[1]
    assert (
        retry_msgs[-2]["role"] == "assistant" and "could not be used" in retry_msgs[-1]["content"]
    )
    assert "JudgeOutputError" in j.presentations[0]["errors"][0]


@pytest.mark.parametrize(
    "bad, problem",
    [
        ({"T1": 0.5}, "missing ids ['T2', 'T3']"),
        ("dup", "duplicate ids ['T1']"),
        ({"T1": 0.5, "T2": 0.5, "T3": 0.5, "T9": 0.1}, "unknown ids ['T9']"),
    ],
)
def test_wrong_ids_are_retried(fake, bad, problem):
    if bad == "dup":
        bad_text = json.dumps(
            {"scores": [{"trajectory_id": t, "score": 0.5} for t in ("T1", "T1", "T2", "T3")]}
        )
    else:
        bad_text = answer(bad)
    fake.script = [bad_text, answer({"T1": 0.9, "T2": 0.1, "T3": 0.4})]
    (j,) = run([make_group(3)])
    assert j.status == "ok" and j.calls == 2
    assert problem in j.presentations[0]["errors"][0]
    assert j.score_map()["traj-0"] == 0.9


def test_negative_scores_are_clamped_to_zero(fake):
    fake.script = [answer({"T1": 1.0, "T2": -0.3, "T3": 0.5})]
    (j,) = run([make_group(3)])
    assert j.score_map() == {"traj-0": 1.0, "traj-1": 0.0, "traj-2": 0.5}


@pytest.mark.parametrize("scale", [10, 100])
def test_a_reply_on_a_0_to_10_or_0_to_100_scale_is_divided_down(fake, scale):
    fake.script = [answer({"T1": 0.8 * scale, "T2": 0.3 * scale, "T3": 0.05 * scale})]
    (j,) = run([make_group(3)])
    assert j.status == "ok"
    assert j.score_map() == pytest.approx({"traj-0": 0.8, "traj-1": 0.3, "traj-2": 0.05})
    assert j.presentations[0]["scale"] == scale


def test_scores_above_100_are_rejected_and_retried(fake):
    fake.script = [answer({"T1": 700, "T2": 1}), answer({"T1": 0.7, "T2": 0.1})]
    (j,) = run([make_group(2)])
    assert (
        j.status == "ok" and j.calls == 2 and "between 0 and 1" in j.presentations[0]["errors"][0]
    )


def test_timeout_and_rate_limit_succeed_on_retry(fake):
    fake.script = [timeout(), rate_limit(), answer({"T1": 0.6, "T2": 0.4})]
    (j,) = run([make_group(2)])
    assert j.status == "ok" and j.calls == 3
    errs = j.presentations[0]["errors"]
    assert "Timeout" in errs[0] and "RateLimit" in errs[1]


def test_group_stays_unjudged_after_retries_and_is_stored(fake, store_path):
    fake.script = ["not json at all"]
    store = Store(store_path)
    g = make_group(3)
    (j,) = run([g], store=store)
    assert j.status == "unjudged" and j.scores == []
    assert j.calls == FAST_RETRY.max_attempts and "no valid answer after 3 attempts" in j.error
    stored = store.judgements(group_id=g.id)
    assert [s.status for s in stored] == ["unjudged"] and "JudgeOutputError" in stored[0].error
    assert store.unjudged_group_ids(SPEC.spec_hash) == [g.id]  # still waiting to be judged
    s = summarize([j], SPEC.spec_hash)
    assert (s["judged"], s["unjudged"], s["calls"]) == (0, 1, 3)


def test_non_retryable_error_fails_fast(fake):
    fake.script = [
        litellm.AuthenticationError(message="bad key", llm_provider="fakejudge", model="m")
    ]
    (j,) = run([make_group(2)])
    assert j.status == "unjudged" and j.calls == 1 and "AuthenticationError" in j.error


def test_cache_hit_makes_no_call(fake, store_path):
    store = Store(store_path)
    g = make_group(3)
    fake.script = [answer({"T1": 0.7, "T2": 0.2, "T3": 0.1})]
    (j1,) = run([g], store=store)
    n = len(fake.requests)
    (j2,) = run([make_group(3)], store=store)  # same content, fresh objects
    assert len(fake.requests) == n
    assert j2.cached and j2.calls == 0 and j2.input_tokens == 0
    assert j2.score_map() == j1.score_map()
    # a different rubric is a different spec: not served from this cache
    other = default_spec("fakejudge/m", rubric="Something else.")
    run([make_group(3)], spec=other, store=store)
    assert len(fake.requests) == n + 1


def test_permutations_average_back_to_the_right_trajectories(fake, store_path):
    g = make_group(3, final_answers=["It is 41,200 EUR.", "No idea.", "Lisbon"])

    def position_biased(messages):
        out = json.loads(by_content(messages))
        for item in out["scores"]:
            if item["trajectory_id"] == "T1":
                item["score"] += 0.06  # the judge likes whatever comes first
        return json.dumps(out)

    fake.script = [position_biased]
    store = Store(store_path)
    (j,) = run([g], store=store, permutations=3)
    assert j.status == "ok" and j.calls == 3 and len(j.presentations) == 3
    orders = [p["order"] for p in j.presentations]
    assert orders[0] == ["traj-0", "traj-1", "traj-2"] and len({tuple(o) for o in orders}) == 3
    for p in j.presentations:  # each presentation's scores are keyed by trajectory id
        first = p["order"][0]
        base = {"traj-0": 0.9, "traj-1": 0.5, "traj-2": 0.5}
        assert p["scores"][first] == pytest.approx(base[first] + 0.06)
    for tid in ("traj-0", "traj-1", "traj-2"):
        mean = sum(p["scores"][tid] for p in j.presentations) / 3
        assert j.score_map()[tid] == pytest.approx(mean)
    assert max(j.score_map(), key=j.score_map().get) == "traj-0"
    # every presentation is stored
    assert len(store.judgements(group_id=g.id)[0].presentations) == 3
    # orders are deterministic
    again = presentation_orders([t.id for t in g.trajectories], 3, SPEC.seed, g.content_hash())
    assert again == orders


def test_oversized_group_judged_in_overlapping_subsets(fake):
    g = make_group(6, final_answers=["41,200 EUR", "maybe", "Lisbon", "no", "41,200 EUR", "?"])
    fake.script = [by_content]
    from rankgym.judges.prompt import build_prompt, count_tokens

    four = build_prompt(g, SPEC.rubric, order=[t.id for t in g.trajectories[:4]])
    window = count_tokens("fakejudge/m", four.messages) + 5 + SPEC.max_tokens
    spec = default_spec("fakejudge/m", rubric=SPEC.rubric, context_window=window)
    (j,) = run([g], spec=spec)
    assert j.status == "ok" and j.calls == 2
    pres = j.presentations[0]
    assert [len(s["order"]) for s in pres["subsets"]] == [4, 4]  # overlapping windows
    s = j.score_map()
    assert s["traj-0"] == pytest.approx(s["traj-4"]) and s["traj-0"] > s["traj-1"]
    assert s["traj-2"] < s["traj-1"]
    # a group that cannot fit even in pairs is unjudged, with a clear error
    tiny = default_spec("fakejudge/m", rubric=SPEC.rubric, context_window=SPEC.max_tokens + 50)
    (j,) = run([g], spec=tiny)
    assert j.status == "unjudged" and "do not fit" in j.error


def test_hack_signals_recorded(fake, store_path):
    store = Store(store_path)
    g = make_group(3)  # traj-0 passes the verifier, the others fail
    fake.script = [answer({"T1": 0.4, "T2": 0.3, "T3": 0.9}, hack={"T2"})]
    (j,) = run([g], store=store)
    names = {(s["trajectory_id"], s["name"]) for s in store.hack_signals()}
    assert ("traj-1", "judge_hack_suspected") in names
    assert ("traj-2", "judge_top_verifier_failed") in names
    assert "judge_top_verifier_failed" in g.trajectories[2].hack_signals
    assert not any(t == "traj-0" for t, _ in names)


def test_concurrency_is_bounded(fake):
    inflight = {"now": 0, "max": 0}

    async def slow(model, messages, *a, **kw):
        inflight["now"] += 1
        inflight["max"] = max(inflight["max"], inflight["now"])
        await asyncio.sleep(0.02)
        inflight["now"] -= 1
        return fake.completion(model, messages, *a, **kw)

    fake.acompletion = slow
    fake.script = [lambda m: answer({lab: 0.5 for lab in labels_in(m)})]
    groups = [make_group(2, gid=f"grp-{i}") for i in range(6)]
    js = run(groups, concurrency=2)
    assert all(j.status == "ok" for j in js) and inflight["max"] == 2
    assert [j.group_id for j in js] == [g.id for g in groups]


def test_more_permutations_than_orders_calls_once_per_order(fake):
    fake.script = [lambda m: answer({lab: 0.5 for lab in labels_in(m)})]
    (j,) = run([make_group(2)], permutations=4)  # only 2 orders of 2 trajectories exist
    assert j.status == "ok" and len(j.presentations) == 4 and j.calls == 2
    assert len(fake.requests) == 2 and j.input_tokens == 200


def test_identical_trajectories_are_shown_once_and_the_score_copied_to_twins(fake):
    g = make_group(4, final_answers=["same", "same", "other", "same"])
    for i in (1, 3):  # make trajectories 1 and 3 exact copies of 0 (tool-call ids differ)
        for k in (2, 3, 4, 5):
            m = g.trajectories[0].messages[k].model_copy(deep=True)
            if m.tool_calls:
                m.tool_calls[0].id = f"c{i}-{k}"
            if m.role == "tool":
                m.tool_call_id = f"c{i}-{k - 1}"
            g.trajectories[i].messages[k] = m
    fake.script = [lambda m: answer({lab: 0.9 if lab == "T1" else 0.2 for lab in labels_in(m)})]
    (j,) = run([g])
    assert labels_in(fake.requests[0]) == ["T1", "T2"]
    assert j.score_map() == {"traj-0": 0.9, "traj-1": 0.9, "traj-2": 0.2, "traj-3": 0.9}
    assert j.presentations[0]["copies"] == {"traj-1": "traj-0", "traj-3": "traj-0"}


def test_a_reply_that_crashes_the_parser_is_retried_and_never_cached(fake, store_path, monkeypatch):
    import rankgym.judges.parse as parse

    def boom(text, labels):
        raise RecursionError("parser bug")

    monkeypatch.setattr(parse, "_parse", boom)
    fake.script = [answer({"T1": 0.9, "T2": 0.1})]
    with Store(store_path) as store:
        (j,) = run([make_group(2)], store=store)
        assert j.status == "unjudged" and j.calls == FAST_RETRY.max_attempts
        assert "could not be parsed" in j.error
        assert store.query("SELECT COUNT(*) AS n FROM judge_cache")[0]["n"] == 0
