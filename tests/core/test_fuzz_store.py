"""Property-based fuzzing of what the store and the config parser take from outside (issue 16).

Any text an agent, an env or a user can produce (NULs, control bytes, bidi overrides, lone
surrogates, astral characters, huge or deeply nested JSON) goes through ``Store.put_group`` and
back unchanged where the column is JSON, and as valid UTF-8 (U+FFFD for a lone surrogate) in
plain text columns; every other store row, every query and the TOML config parser either
succeed or raise one ``RankgymError``, never anything else.

Budget: a few hundred examples per property, well under 40 s in all on 2 busy cores.
"""

from __future__ import annotations

import json
import math
import tempfile
import uuid
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from rankgym.config import ConfigError, parse_config
from rankgym.errors import RankgymError, StoreError
from rankgym.store import Store
from rankgym.store.rows import clean_text
from rankgym.types import (
    Group,
    JudgeSpec,
    Message,
    ToolCall,
    ToolCallFunction,
    Trajectory,
    Turn,
)

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NASTY = ["\x00", "\ud800", "\udfff", "\udc80", "\x1b[2J", "\u202e", "\U0001f600", "</trajectory>"]
chars = st.one_of(
    st.characters(exclude_categories=()), st.sampled_from([c for c in NASTY if len(c) == 1])
)
text = st.lists(st.one_of(chars, st.sampled_from(NASTY)), max_size=30).map("".join)
valid_text = st.text(max_size=20)  # no surrogates: for ids, which must find their row again
numbers = st.one_of(st.integers(-(2**53), 2**53), st.floats(allow_nan=False), st.none())
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False), text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)
    ),
    max_leaves=25,
)  # fmt: skip


@st.composite
def messages(draw: st.DrawFn) -> Message:
    calls = draw(
        st.none()
        | st.lists(
            st.builds(
                ToolCall,
                id=text,
                function=st.builds(
                    ToolCallFunction,
                    name=text,
                    arguments=text | json_values.map(lambda v: json.dumps(v, ensure_ascii=False)),
                ),
            ),
            max_size=2,
        )
    )
    return Message(
        role=draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        content=draw(st.none() | text),
        tool_calls=calls,
        tool_call_id=draw(st.none() | text),
        name=draw(st.none() | text),
    )


@st.composite
def trajectories(draw: st.DrawFn) -> Trajectory:
    msgs = draw(st.lists(messages(), max_size=4))
    turns = [
        Turn(
            message_index=i,
            prompt_token_ids=draw(st.lists(st.integers(0, 2**31), max_size=5)),
            completion_token_ids=draw(st.lists(st.integers(0, 2**31), max_size=5)),
            completion_logprobs=draw(st.lists(st.floats(-1e9, 0.0), max_size=5)),
            policy=draw(st.none() | text),
        )
        for i in range(draw(st.integers(0, 2)))
    ]
    return Trajectory(
        env_id=draw(valid_text),
        task_id=draw(valid_text),
        seed=draw(st.none() | st.integers(-(2**62), 2**62)),
        messages=msgs,
        turns=turns,
        verifiable_reward=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)),
        metrics=draw(st.dictionaries(text, numbers, max_size=4)),
        hack_signals=draw(st.lists(text, max_size=3, unique=True)),
        truncated=draw(st.booleans()),
        error=draw(st.none() | text),
    )


groups = st.builds(
    Group,
    run_id=valid_text,
    step=st.integers(-(2**62), 2**62),
    env_id=valid_text,
    task_id=valid_text,
    trajectories=st.lists(trajectories(), min_size=0, max_size=3),
)


def _same_metrics(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (isinstance(a[k], float) and math.isinf(a[k]) and a[k] == b[k]) for k in a
    )


def _via_json(value: Any) -> Any:
    """``value`` as JSON reads it back: exact, except that a surrogate *pair* of code points
    becomes the one character it encodes (JSON cannot tell ``"\\ud800\\udc00"`` apart)."""
    return json.loads(json.dumps(value))


def _expected(t: Trajectory) -> dict[str, Any]:
    """What the store gives back: JSON columns exact, plain text columns as valid UTF-8."""
    return {
        "messages": [Message.model_validate(_via_json(m.to_dict())) for m in t.messages],
        "turns": [Turn.model_validate(_via_json(tu.to_dict())) for tu in t.turns],
        "error": clean_text(t.error),
        "hack_signals": list(dict.fromkeys(clean_text(h) for h in t.hack_signals)),
    }


@pytest.fixture(scope="module")
def store() -> Store:
    with tempfile.TemporaryDirectory() as d:
        s = Store(Path(d) / "fuzz.db")
        yield s
        s.close()


@FUZZ
@given(g=groups)
@example(g=Group(env_id="e", task_id="t", trajectories=[
    Trajectory(env_id="e", task_id="t", messages=[Message(role="user", content="x" * 3_000_000)])
]))  # fmt: skip
@example(g=Group(env_id="e", task_id="t", trajectories=[
    Trajectory(env_id="e", task_id="t", messages=[Message(role="assistant", tool_calls=[
        ToolCall(id="c", function=ToolCallFunction(name="f", arguments="[" * 5000 + "]" * 5000))
    ])])
]))  # fmt: skip
def test_put_group_round_trips_any_text(store: Store, g: Group) -> None:
    store.put_group(g)
    back = store.get_group(g.id)
    assert (back.run_id, back.step, back.env_id, back.task_id) == (
        g.run_id, g.step, g.env_id, g.task_id
    )  # fmt: skip
    assert [t.id for t in back.trajectories] == [t.id for t in g.trajectories]
    for got, want in zip(back.trajectories, g.trajectories, strict=True):
        assert {k: getattr(got, k) for k in _expected(want)} == _expected(want)
        assert _same_metrics(got.metrics, _via_json(want.metrics))
        assert (got.seed, got.truncated, got.verifiable_reward) == (
            want.seed, want.truncated, want.verifiable_reward
        )  # fmt: skip
    assert Group.from_json(back.to_json()) == back
    assert back.content_hash() == g.content_hash()
    store.put_group(g)  # same content again: idempotent, never a crash
    assert store.count_groups(run_id=g.run_id) >= 1


@FUZZ
@given(query=text, number=st.integers(-(2**63), 2**63 - 1))
def test_queries_take_any_text(store: Store, query: str, number: int) -> None:
    store.list_groups(search=query, limit=5, run_id=query, env_id=query)
    store.count_groups(search=query, step=number)
    store.search(query, limit=5)
    store.human_rankings(group_id=query, labeler=query)
    with pytest.raises(StoreError):
        store.get_group(query + "\x00not-a-group")


@FUZZ
@given(config=st.dictionaries(text, json_values, max_size=4), metrics=st.dictionaries(text, numbers),
       value=st.dictionaries(text, json_values, max_size=4), name=text, step=st.integers(0, 2**62))  # fmt: skip
def test_other_rows_round_trip_or_fail_cleanly(
    store: Store, config: dict, metrics: dict, value: dict, name: str, step: int
) -> None:
    run = store.create_run(name=name, config=config, run_id=f"{name}-{uuid.uuid4().hex}")
    row = next(r for r in store.runs() if r["id"] == clean_text(run))
    assert row["config"] == _via_json(config)
    store.log_step(run, step, metrics)
    got = next(s for s in store.steps(clean_text(run)) if s["step"] == step)["metrics"]
    assert _same_metrics(got, _via_json(metrics))
    store.cache_put(name, name + "h", value)
    assert store.cache_get(clean_text(name), clean_text(name + "h")) == _via_json(value)
    spec = JudgeSpec(model=name, rubric=name * 3, extra=value)
    h = store.put_judge_spec(spec)
    assert store.get_judge_spec(h) == JudgeSpec.from_json(spec.to_json())
    g = Group(env_id="e", task_id="t", trajectories=[
        Trajectory(env_id="e", task_id="t", messages=[Message(role="user", content=name)])
    ])  # fmt: skip
    store.put_group(g)
    tid = g.trajectories[0].id
    store.add_hack_signal(tid, name, detail=name)
    try:
        store.add_human_ranking(g.id, name, {tid: 1.0})
    except StoreError as e:
        assert not name.strip() and "labeler" in str(e)
    else:
        assert store.human_rankings(g.id)[-1]["labeler"] == clean_text(name.strip())


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lr: float = 1e-4
    kind: Literal["a", "b"] = "a"


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "x"
    steps: int = 1
    section: _Section = _Section()


toml_like = st.text(
    alphabet=st.one_of(chars, st.sampled_from(list('[]="\n.#{}, 0123456789abcdefghlnkstrp'))),
    max_size=200,
)


@FUZZ
@given(raw=st.one_of(st.binary(max_size=300), toml_like, toml_like.map(lambda s: s.encode("utf-8", "surrogatepass"))))  # fmt: skip
@example(raw=b'name = "caf\xe9"\n')
@example(raw=b"[section]\nkind = 'c'\n")
@example(raw="[" * 5000)
@example(raw='steps = "' + "\ud800" * 3 + '"')
def test_config_parsing_gives_a_config_or_one_config_error(raw: bytes | str) -> None:
    try:
        cfg = parse_config(raw, _Config, source="fuzz.toml")
    except ConfigError as e:
        msg = str(e)
        assert msg.startswith("fuzz.toml: ") and len(msg) < 2000
        assert isinstance(e, RankgymError)
    else:
        assert isinstance(cfg, _Config)
