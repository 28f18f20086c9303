"""Judge input tokens per group: rankgym's comparison prompt vs the RULER message format.

RULER (OpenPipe ART, ``art/rewards/ruler.py``) sends the common message prefix once as JSON
inside ``<context>``, then each trajectory's remaining messages as ``json.dumps`` of the
OpenAI message dicts inside ``<trajectory id="N">``. rankgym additionally lists shared tool
outputs once and references them, ignores tool-call ids when finding the common prefix, and
writes messages as compact one-line records instead of JSON objects (see
``rankgym/judges/prompt.py``). Both requests carry the same rubric; token counts are
``litellm.token_counter`` for ``--model`` (exact for OpenAI models).

Tools on both sides (the default; ``--no-tools`` leaves them out of both): our request carries
the env's tool schemas as one line per tool in ``<tools>`` (what ``rankgym train`` and
``rankgym judge`` now send, from ``Group.tools``); RULER's carries them as ``json.dumps`` in
``<available_tools>`` (openpipe-art >= 0.5.18, ``ruler(..., tools=...)``). When ``art`` is
importable (e.g. ``.venv-art/bin/python bench/judge_tokens.py``) the RULER request is the one
``art.rewards.ruler.ruler`` itself builds (its LiteLLM call is intercepted, nothing is sent);
otherwise our reproduction of it below, and the output says which (``ruler_source``).

Groups: ``--groups`` tasks of ``--env``, each with ``--group-size`` trajectories from the
env's oracle with increasing noise (``oracle~P``: per-turn probability of a random tool call
instead of the oracle's next step: 0, then evenly up to 1 = the random policy; the calibration
groups of ``rankgym judge-check``), so groups are varied the way sampled policies are: some
read the same emails, some wander, some give up early. ``--identical``: every trajectory is
the noiseless oracle's. Our request shows identical trajectories once, as the judge does.

    .venv/bin/python bench/judge_tokens.py --env rankgym/EmailSearch-v0 --groups 50

What it does not measure: judge quality, output tokens, or provider-side prompt caching.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from textwrap import dedent
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rankgym.envs.policies import make_policy  # noqa: E402
from rankgym.envs.rollout import rollout_groups  # noqa: E402
from rankgym.judges.prompt import build_prompt, count_tokens, default_rubric, twins  # noqa: E402
from rankgym.trainer.judge_check import CheckConfig, calibration_groups  # noqa: E402
from rankgym.types import Group  # noqa: E402


def _art_message(m: Any) -> dict[str, Any]:
    """A message as ART's ``Trajectory.messages()`` gives it: ``"content": ""`` where None."""
    d = m.to_openai()
    if d.get("content") is None:
        d["content"] = ""
    return d


class _Captured(Exception):
    """Raised by the stand-in for LiteLLM once it holds RULER's request."""


def art_ruler_messages(
    group: Group, rubric: str, tools: list[dict[str, Any]] | None
) -> list[dict[str, str]] | None:
    """The request ``art.rewards.ruler.ruler`` builds (None when ``art`` is not installed)."""
    try:
        import art.rewards  # noqa: F401 - loads the module art.rewards.ruler
    except ImportError:
        return None
    import asyncio

    ruler_mod = sys.modules["art.rewards.ruler"]  # the name art.rewards.ruler is its function

    captured: dict[str, Any] = {}

    async def capture(model: str, messages: list[dict[str, str]], **kw: Any) -> Any:
        captured["messages"] = messages
        raise _Captured

    message_lists = [[_art_message(m) for m in t.messages] for t in group.trajectories]
    real = ruler_mod.acompletion
    ruler_mod.acompletion = capture
    try:
        asyncio.run(ruler_mod.ruler(message_lists, rubric=rubric, tools=tools))
    except _Captured:
        pass
    finally:
        ruler_mod.acompletion = real
    return captured["messages"]


def ruler_messages(
    group: Group, rubric: str, tools: list[dict[str, Any]] | None = None
) -> list[dict[str, str]]:
    """The request RULER builds for these trajectories (its code path, reproduced; with
    ``tools``, its ``<available_tools>`` section as in openpipe-art 0.5.18)."""
    message_lists = [[_art_message(m) for m in t.messages] for t in group.trajectories]
    common = 0
    for idx, msg in enumerate(message_lists[0]):
        if all(len(ml) > idx and ml[idx] == msg for ml in message_lists):
            common += 1
        else:
            break
    all_identical = all(len(ml) == common for ml in message_lists)
    user_text = ""
    if common > 0 and not all_identical:
        user_text += "<context>\n" + json.dumps(message_lists[0][:common]) + "\n</context>\n\n"
    if tools:
        user_text += "<available_tools>\n" + json.dumps(tools) + "\n</available_tools>\n\n"
    if all_identical:
        serialized = ['<trajectory id="1">\n' + json.dumps(message_lists[0]) + "\n</trajectory>"]
    else:
        serialized = [
            f'<trajectory id="{i}">\n' + json.dumps(ml[common:]) + "\n</trajectory>"
            for i, ml in enumerate(message_lists, start=1)
        ]
    user_text += "Trajectories:\n\n" + "\n\n".join(serialized)
    judge_prompt = dedent(
        f"""
        All of the trajectories below have been given the same goal. Your job is to consider each of them and give them a score between 0 and 1. Take into consideration your best judgement of the agent's goal.

        Grading standards:
        {rubric}
        """
    )
    return [{"role": "system", "content": judge_prompt}, {"role": "user", "content": user_text}]


def add_group_arguments(ap: argparse.ArgumentParser, groups: int) -> None:
    """``--env``, ``--groups`` (default ``groups``), ``--group-size``, ``--seed``: what
    :func:`make_groups` takes."""
    ap.add_argument("--env", default="rankgym/EmailSearch-v0")
    ap.add_argument("--groups", type=int, default=groups)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)


def make_groups(
    env: str, n_groups: int, group_size: int, seed: int, identical: bool = False
) -> list[Group]:
    """``n_groups`` calibration groups of ``group_size`` (``rankgym judge-check``'s: slot k is
    the oracle with noise k/(G-1)); ``identical``: every slot is the noiseless oracle."""
    if identical:
        policy = make_policy(",".join(["oracle~0"] * group_size), seed=seed)
        return rollout_groups(
            env, policy, n_tasks=n_groups, group_size=group_size, seed=seed,
            run_id="bench-identical", progress=False,
        )  # fmt: skip
    cfg = CheckConfig(env_id=env, groups=n_groups, group_size=group_size, seed=seed)
    return calibration_groups(cfg)


def judge_quality(groups: list[Group], model: str) -> dict[str, Any]:
    """Judge ``groups`` (original order + one shuffle) and compare with the verifier."""
    from rankgym.judges import default_spec, judge_groups_sync
    from rankgym.judges.agreement import aggregate

    t0 = time.perf_counter()
    js = judge_groups_sync(groups, default_spec(model), None, permutations=2, concurrency=1)
    units: dict[str, list[Any]] = {
        "average": [],
        "presentation_1": [],
        "presentation_2": [],
        "self": [],
    }
    for g, j in zip(groups, js, strict=True):
        if j.status != "ok":
            continue
        ids = [t.id for t in g.trajectories]
        vr = [t.verifiable_reward or 0.0 for t in g.trajectories]
        sm = j.score_map()
        units["average"].append((g.id, [sm[i] for i in ids], vr))
        p1, p2 = (p["scores"] for p in j.presentations)
        units["presentation_1"].append((g.id, [p1[i] for i in ids], vr))
        units["presentation_2"].append((g.id, [p2[i] for i in ids], vr))
        units["self"].append((g.id, [p1[i] for i in ids], [p2[i] for i in ids]))
    out: dict[str, Any] = {"model": model, "judged": sum(j.status == "ok" for j in js),
                           "seconds": time.perf_counter() - t0}  # fmt: skip
    for name, u in units.items():
        m = aggregate(u, n_resamples=1000).to_dict()["metrics"]
        out[name] = {k: {"macro": v["macro"], "ci": v["macro_ci"]} for k, v in m.items()
                     if k in ("kendall_tau_b", "pairwise_accuracy", "top1")}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_group_arguments(ap, groups=50)
    ap.add_argument(
        "--model", default="openai/gpt-4o-mini", help="tokenizer (LiteLLM model string)"
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--identical", action="store_true", help="groups of identical trajectories "
                    "(the noiseless oracle's); also reports tokens vs a group of one")  # fmt: skip
    ap.add_argument("--judge", help="also judge the first --judge-groups groups with this model "
                    "(2 presentations) and report its agreement with the verifier")  # fmt: skip
    ap.add_argument("--judge-groups", type=int, default=10)
    ap.add_argument("--no-tools", action="store_true", help="leave the env's tool schemas out "
                    "of both requests (the old measurement)")  # fmt: skip
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    groups = make_groups(args.env, args.groups, args.group_size, args.seed, args.identical)
    rubric = default_rubric()
    rows = []
    sources = set()
    for g in groups:
        tools = None if args.no_tools else (g.tools or None)
        copies = twins(g.trajectories)  # the judge shows identical trajectories once
        ours = build_prompt(g, rubric, [t.id for t in g.trajectories if t.id not in copies], tools)
        ruler = art_ruler_messages(g, rubric, tools)
        sources.add("openpipe-art" if ruler is not None else "reproduction")
        rows.append(
            {
                "group_id": g.id,
                "ours": count_tokens(args.model, ours.messages),
                "ruler": count_tokens(args.model, ruler or ruler_messages(g, rubric, tools)),
                "tools": len(tools or []),
                "single": count_tokens(
                    args.model, build_prompt(g, rubric, [g.trajectories[0].id]).messages
                ),
                "shared_outputs": ours.shared_outputs,
                "prefix_messages": ours.prefix_messages,
                "messages": sum(len(t.messages) for t in g.trajectories),
                "verifiable": [t.verifiable_reward for t in g.trajectories],
            }
        )
    ours_total = sum(r["ours"] for r in rows)
    ruler_total = sum(r["ruler"] for r in rows)
    ratios = sorted(r["ours"] / r["ruler"] for r in rows)
    summary = {
        "env": args.env,
        "groups": len(rows),
        "group_size": args.group_size,
        "model_tokenizer": args.model,
        "tools_on_both_sides": not args.no_tools,
        "tools_per_group": sum(r["tools"] for r in rows) / len(rows),
        "ruler_source": "+".join(sorted(sources)),
        "ours_tokens_per_group": ours_total / len(rows),
        "ruler_tokens_per_group": ruler_total / len(rows),
        "ratio_total": ours_total / ruler_total,
        "ratio_median": statistics.median(ratios),
        "ratio_p10": ratios[len(ratios) // 10],
        "ratio_p90": ratios[(9 * len(ratios)) // 10],
        "ratio_vs_group_of_one": ours_total / sum(r["single"] for r in rows),
        "identical": args.identical,
        "shared_outputs_per_group": sum(r["shared_outputs"] for r in rows) / len(rows),
        "messages_per_group": sum(r["messages"] for r in rows) / len(rows),
        "mean_verifiable_by_noise": [
            statistics.mean(r["verifiable"][k] or 0.0 for r in rows) for k in range(args.group_size)
        ],
        "target": 0.6 if "Email" in args.env else 0.65,
        "seconds": time.perf_counter() - t0,
    }
    if args.judge:
        summary["judge"] = judge_quality(groups[: args.judge_groups], args.judge)
    if args.json:
        print(json.dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k:>28}: {v:.3f}" if isinstance(v, float) else f"{k:>28}: {v}")
        ok = summary["ratio_total"] <= summary["target"]
        print("PASS" if ok else "ABOVE TARGET", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
