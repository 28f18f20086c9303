"""The judge protocol: the group judge's plan is what it sends; a second method plugs in."""

from __future__ import annotations

import asyncio
import json

from fakes import LengthJudge
from judge_fakes import FAST_RETRY, answer, make_group

from rankgym.judges.group_judge import GroupJudge, judge_groups
from rankgym.judges.spec import default_spec
from rankgym.store import Store

SPEC = default_spec("fakejudge/m", rubric="Prefer correct answers.")


class ShortestJudge(LengthJudge):
    shortest_wins = True


class BrokenJudge(ShortestJudge):
    async def judge(self, group, permutations=1, orders=None):
        raise RuntimeError("the method has a bug")


def test_the_plan_lists_exactly_the_requests_the_group_judge_then_sends(fake, store_path):
    g = make_group(3)
    fake.script = [answer({"T1": 0.8, "T2": 0.5, "T3": 0.1})]
    with Store(store_path) as store:
        plan = GroupJudge(SPEC, store).plan([g], permutations=2)
        assert (plan.requests, plan.cached) == (2, 0) and fake.requests == []
        sent = [r.messages for gp in plan.groups for r in gp.requests]
        asyncio.run(judge_groups([g], SPEC, store, permutations=2, retry=FAST_RETRY))
        assert sorted(map(json.dumps, fake.requests)) == sorted(map(json.dumps, sent))
        again = GroupJudge(SPEC, store).plan([g], permutations=2)
    assert (again.requests, again.cached, again.input_tokens) == (0, 2, 0)
    assert plan.input_tokens == sum(r.input_tokens for r in plan.groups[0].requests) > 0


def test_a_second_judge_method_judges_and_stores_through_the_same_entry_point(store_path):
    g = make_group(3, final_answers=["x", "x" * 21, "x" * 11])
    with Store(store_path) as store:
        (j,) = asyncio.run(judge_groups([g], SPEC, store, method=ShortestJudge))
        stored = store.get_group(g.id, SPEC.spec_hash).judgement
        plan = ShortestJudge(SPEC, store).plan([g])
    assert j.status == "ok" and g.judgement is j
    assert j.score_map() == {"traj-0": 1.0, "traj-1": 0.0, "traj-2": 0.5}
    assert stored is not None and stored.score_map() == j.score_map()
    assert (plan.requests, plan.input_tokens, plan.groups[0].to_dict()["note"]) == (0, 0, "no call")


def test_a_method_that_raises_leaves_its_group_unjudged_and_stored(store_path):
    g = make_group(2)
    with Store(store_path) as store:
        (j,) = asyncio.run(judge_groups([g], SPEC, store, method=BrokenJudge))
        stored = store.get_group(g.id, SPEC.spec_hash).judgement
    assert j.status == "unjudged" and "the method has a bug" in (j.error or "")
    assert stored is not None and stored.status == "unjudged"
