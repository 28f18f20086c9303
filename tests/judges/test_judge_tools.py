"""The env's tool schemas reach every production judge request: `rankgym judge` (and its dry
run) from the group's stored tools, and `rankgym judge-check` from its calibration rollouts."""

from __future__ import annotations

import json
import re

import pytest
from judge_fakes import answer, labels_in, make_group

from rankgym.cli import main
from rankgym.judges.spec import default_spec
from rankgym.store import Store
from rankgym.trainer.judge_check import CheckConfig, run_check

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_emails",
            "description": "Full-text search over the inbox.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                           "required": ["q"]},
        },
    }
]  # fmt: skip
_TOOLS_BLOCK = re.compile(r"<tools>\n(.*?)\n</tools>", re.DOTALL)


def _tools_section(messages: list[dict]) -> str | None:
    m = _TOOLS_BLOCK.search(messages[-1]["content"])
    return m.group(1) if m else None


def test_rankgym_judge_shows_the_judge_the_tools_stored_with_the_group(fake, store_path, capsys):
    g = make_group(3)
    g.tools = TOOLS
    with Store(store_path) as s:
        s.put_group(g)
    fake.script = [lambda m: answer({lab: 0.5 for lab in labels_in(m)})]
    assert (
        main(["judge", "--store", str(store_path), "--judge", "fakejudge/m", "--json", "-q"]) == 0
    )
    (request,) = fake.requests
    assert (
        _tools_section(request)
        == '- "search_emails"("q": "string"): "Full-text search over the inbox."'
    )
    capsys.readouterr()
    assert main(["judge", "--store", str(store_path), "--judge", "fakejudge/other",
                 "--dry-run", "--json"]) == 0  # fmt: skip
    dry = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (pres,) = dry["per_group"][0]["presentations"]
    assert _tools_section(pres["messages"]) is not None


EMAIL_CHECK = CheckConfig(env_id="rankgym/EmailSearch-v0", groups=2, group_size=2,
                          permutations=2, resamples=100)  # fmt: skip


def _check_email_env(fake, store: Store) -> None:
    """A judge-check of EmailSearch with a judge that scores every trajectory 0.5."""
    fake.script = [lambda m: answer({lab: 0.5 for lab in labels_in(m)})]
    run_check(EMAIL_CHECK, default_spec("fakejudge/m"), store)


def test_judge_check_shows_the_judge_the_envs_tools(fake, tmp_path):
    with Store(tmp_path / "check.db") as store:
        _check_email_env(fake, store)
    assert fake.requests
    for request in fake.requests:
        section = _tools_section(request)
        assert section is not None and '"search_emails"' in section and '"read_email"' in section


def test_judge_check_gives_calibration_groups_stored_without_tools_their_envs_tools(fake, tmp_path):
    with Store(tmp_path / "check.db") as store:
        _check_email_env(fake, store)
        store._write(lambda c: c.execute("UPDATE groups SET tools = '[]'"))  # as before v5
        fake.requests.clear()
        run_check(EMAIL_CHECK, default_spec("fakejudge/second"), store)  # same groups, stored
        assert all(g.tools for g in (store.get_group(i) for i in store.group_ids()))
    assert fake.requests and all(_tools_section(r) for r in fake.requests)


def test_no_tools_and_an_empty_tool_list_share_a_judge_cache_key():
    from rankgym.judges.group_judge import presentation_cache_key

    g = make_group(3)
    order = [t.id for t in g.trajectories]
    assert presentation_cache_key(g, order, []) == presentation_cache_key(g, order, None)
    assert presentation_cache_key(g, order, TOOLS) != presentation_cache_key(g, order, None)


@pytest.fixture
def local_handler():
    """The registered ``local/`` provider (its ``_dtype`` is what a test sets)."""
    import litellm

    from rankgym.judges import local_provider

    local_provider.register()
    return next(
        p["custom_handler"] for p in litellm.custom_provider_map if p.get("provider") == "local"
    )


def test_a_local_judges_cache_answers_only_for_the_dtype_it_was_filled_in(
    tmp_path, monkeypatch, local_handler
):
    """bf16 and fp32 verdicts of the embedded judge differ (``RANKGYM_JUDGE_DTYPE``): a cached
    bf16 verdict must not answer an fp32 judge, nor the other way round; a provider's judge
    keeps its keys (no dtype)."""
    from rankgym.judges.group_judge import GroupJudge, presentation_cache_key

    g = make_group(3)
    order = [t.id for t in g.trajectories]
    spec = default_spec("local/smollm2-yesno")
    with Store(tmp_path / "s.db") as store:
        monkeypatch.setattr(local_handler, "_dtype", "bfloat16")
        bf16 = GroupJudge(spec, store)
        store.cache_put(bf16.spec_hash, presentation_cache_key(g, order, None, "bfloat16"), {})
        monkeypatch.setattr(local_handler, "_dtype", "float32")
        fp32 = GroupJudge(spec, store)
        assert (bf16.dtype, fp32.dtype) == ("bfloat16", "float32")
        assert bf16.spec_hash == fp32.spec_hash  # one judge, two numerics
        assert bf16.plan([g]).groups[0].requests[0].cached
        assert not fp32.plan([g]).groups[0].requests[0].cached
    remote = GroupJudge(default_spec("fakejudge/m"))
    assert remote.dtype is None
    assert presentation_cache_key(g, order, None, remote.dtype) == presentation_cache_key(
        g, order, None
    )


def test_judge_trains_row_caches_are_keyed_by_a_local_judges_dtype_too(monkeypatch, local_handler):
    """``work/judged/`` (held-out comparison, tie check): verdicts of a local judge in bf16 are
    not read back for fp32; a provider's model keeps one key."""
    from rankgym.trainer.judge_heldout import judged_rows_key

    keys = {}
    for dtype in ("bfloat16", "float32"):
        monkeypatch.setattr(local_handler, "_dtype", dtype)
        keys[dtype] = [
            judged_rows_key(m, ["p1", "p2"]) for m in ("local/smollm2-yesno", "openai/x")
        ]
    assert keys["bfloat16"][0] != keys["float32"][0]
    assert keys["bfloat16"][1] == keys["float32"][1]
    assert judged_rows_key("openai/x", ["p1"], "ties|") != judged_rows_key("openai/x", ["p1"])
