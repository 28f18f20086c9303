"""`rankgym judge` and `rankgym agreement`.

``judge`` judges every group of a store that has no successful judgement under the chosen
spec (model + rubric + parameters), concurrently, writing each judgement as soon as it is
done (an interrupted run keeps its work; rerunning continues, and cached presentations cost
nothing). ``--dry-run`` makes no call: it prints the exact requests and their token counts.
``agreement`` prints judge-vs-human/verifier/self and human-vs-human agreement tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankgym.cli import Command
from rankgym.errors import UserError
from rankgym.judge_backend import parse_model
from rankgym.store import Store
from rankgym.terminal import printable
from rankgym.threads import set_torch_threads

from .agreement import agreement_report, disagreements, format_report
from .group_judge import GroupJudge, RetryPolicy, summarize
from .method import GroupPlan
from .router import install_file
from .spec import check_credentials, quiet_litellm, spec_from_options

if TYPE_CHECKING:
    from rankgym.store import Store
    from rankgym.types import JudgeSpec

DEFAULT_JUDGE = "local/smollm2"


def _judge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="path of the SQLite store")
    p.add_argument(
        "--judge",
        default=DEFAULT_JUDGE,
        metavar="MODEL",
        help="LiteLLM model string, e.g. openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5, "
        "hosted_vllm/Qwen/Qwen3-8B, ollama/qwen3:8b (default: %(default)s, the weak embedded "
        "judge)",
    )
    p.add_argument("--rubric", metavar="FILE", help="comparison rubric (default: packaged)")
    p.add_argument("--permutations", type=int, default=1, metavar="K", help="shuffled presentations per group, averaged (default: 1)")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="make no call; print the exact requests and token counts")  # fmt: skip
    p.add_argument("--run", dest="run_id", metavar="R", help="only groups of this run")
    p.add_argument("--step", type=int, help="only groups of this step")
    p.add_argument("--limit", type=int, help="judge at most this many groups")
    p.add_argument("--concurrency", type=int, default=4, metavar="C", help="LiteLLM calls in flight (default: 4)")  # fmt: skip
    p.add_argument("--api-base", help="server URL for hosted_vllm/, ollama/ or other self-hosted judges (stored in the spec)")  # fmt: skip
    p.add_argument("--context-window", type=int, help="judge's context in tokens; larger groups are judged in overlapping parts")  # fmt: skip
    p.add_argument("--max-tokens", type=int, help="answer budget of the judge (default: 2048, local: 512)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="judge seed, where the provider takes one (default: 0)")  # fmt: skip
    p.add_argument("--attempts", type=int, default=4, help="tries per request before a group is stored as unjudged (default: 4)")  # fmt: skip
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default: 300)")  # fmt: skip
    p.add_argument("--router", metavar="TOML", help="send the judge through a LiteLLM Router: the file's [router] table (deployments, fallbacks, rpm/tpm, retry budget; docs/scale.md)")  # fmt: skip


def _spec_from_args(args: argparse.Namespace) -> JudgeSpec:
    return spec_from_options(
        args.judge,
        rubric_file=args.rubric,
        seed=args.seed,
        max_tokens=args.max_tokens,
        context_window=args.context_window,
        api_base=args.api_base,
    )


def _open_store(path: str, readonly: bool = False) -> Store:
    """The store at ``path``; a missing file is a UserError, an unusable one a StoreError."""
    if not Path(path).is_file():
        raise UserError(
            f"store {path!r} does not exist; create one with `rankgym rollout --store {path} ...`"
        )
    return Store(path, readonly=readonly)


def _judge(args: argparse.Namespace) -> dict[str, Any]:
    if args.permutations < 1:
        raise UserError("--permutations must be at least 1")
    if args.concurrency < 1:
        raise UserError("--concurrency must be at least 1")
    if args.attempts < 1:
        raise UserError("--attempts must be at least 1")
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1 (got {args.limit}); leave it out to judge all")
    if not args.timeout > 0:
        raise UserError(f"--timeout must be a positive number of seconds (got {args.timeout})")
    spec = _spec_from_args(args)
    if args.router:  # judge.model may then name a router group (docs/scale.md)
        install_file(args.router)
    store = _open_store(args.store)
    try:
        ids = store.unjudged_group_ids(spec.spec_hash, run_id=args.run_id, step=args.step)
        if args.limit is not None:
            ids = ids[: args.limit]
        if args.dry_run:
            return _dry_run(args, spec, store, ids)
        if ids:
            try:
                check_credentials(spec)
            except ValueError as e:
                raise UserError(str(e)) from None
        return _judge_all(args, spec, store, ids)
    finally:
        store.close()


def _dry_run(
    args: argparse.Namespace, spec: JudgeSpec, store: Store, ids: list[str]
) -> dict[str, Any]:
    """Print the group judge's plan (every request it would send, its token count) and send
    nothing (``GroupJudge.plan``).

    Never loads or converts the local model (token counts for ``local/`` are estimates until
    its first real load); every string printed has its control characters escaped.
    """
    groups = [store.get_group(gid) for gid in ids]
    tools = {g.id: g.tools for g in groups if g.tools}  # what the judge shows: the group's own
    plan = GroupJudge(spec, store, tools=tools).plan(groups, args.permutations)
    if not args.json:
        for gp in plan.groups:
            _print_group_plan(gp)
    summary = {
        "dry_run": True,
        "groups": len(ids),
        "requests": plan.requests,
        "cached": plan.cached,
        "input_tokens": plan.input_tokens,
        "token_counts": "exact" if plan.exact_token_counts else "estimate",
        "estimated_output_tokens": plan.estimated_output_tokens,
        "estimated_cost_usd": plan.estimated_cost_usd,
        "judged": 0,
        "unjudged": len(ids),
        "calls": 0,
        "output_tokens": 0,
        "spec_hash": spec.spec_hash,
        "model": spec.model,
        "per_group": [gp.to_dict() for gp in plan.groups],
    }
    if not args.json:
        cost = plan.estimated_cost_usd
        money = f", about ${cost:.4f}" if cost is not None else ""
        approx = (
            ""
            if plan.exact_token_counts
            else " (estimated: the judge's own tokenizer is not at hand)"
        )
        print(
            f"dry run: {len(ids)} groups, {plan.requests} requests, {plan.input_tokens} input "
            f"tokens{approx} (+~{plan.estimated_output_tokens} output{money}), {plan.cached} "
            f"presentations cached; judge {printable(spec.model, one_line=True)}, spec "
            f"{spec.spec_hash}; nothing was sent"
        )
    return summary


def _print_group_plan(gp: GroupPlan) -> None:
    """The requests of one group's plan, as ``--dry-run`` prints them."""
    gid = printable(gp.group_id, one_line=True)
    if gp.note is not None:
        print(f"=== group {gid}: no trajectories, nothing to judge (stored as unjudged) ===")
        return
    same = f", {len(gp.identical)} identical shown once" if gp.identical else ""
    for k, r in enumerate(gp.requests):
        state = "cached, no call" if r.cached else "fits" if r.fits else "too large: would be split"
        print(f"=== group {gid} ({gp.trajectories} trajectories{same}) presentation "
              f"{k + 1}/{len(gp.requests)}: {r.input_tokens} input tokens ({state}) ===")  # fmt: skip
        for m in r.messages:
            print(f"--- {m['role']} ---\n{printable(m['content'])}")


def _judge_all(
    args: argparse.Namespace, spec: JudgeSpec, store: Store, ids: list[str]
) -> dict[str, Any]:
    from tqdm import tqdm

    quiet_litellm()
    store.put_judge_spec(spec)
    if parse_model(spec.model).in_process and ids:
        set_torch_threads()
    retry = RetryPolicy(max_attempts=args.attempts, timeout_s=args.timeout)
    bar = tqdm(  # smoothing=0: the ETA from the mean rate (groups finish in bursts, see below)
        total=len(ids),
        desc="judging groups",
        unit="group",
        disable=args.quiet,
        file=sys.stderr,
        smoothing=0,
    )

    async def main() -> list[Any]:
        judge = GroupJudge(spec, store, concurrency=args.concurrency, retry=retry)
        loading = asyncio.Semaphore(args.concurrency * 2)  # groups held in memory at once
        done: list[Any] = []

        async def one(gid: str) -> Any:
            async with loading:
                g = store.get_group(gid)
                judge.tools[g.id] = g.tools  # the env's tool schemas, stored with the group
                j = await judge.judge_and_record(g, args.permutations)
                judge.tools.pop(g.id, None)
            done.append(j)
            bar.update(1)
            bar.set_postfix(unjudged=sum(1 for r in done if r.status != "ok"))
            return j

        return await asyncio.gather(*(one(gid) for gid in ids))

    try:
        judgements = asyncio.run(main())
    finally:
        bar.close()
    summary = summarize(judgements, spec.spec_hash)
    summary["model"] = spec.model
    errors = [{"group_id": j.group_id, "error": j.error} for j in judgements if j.status != "ok"]
    summary["errors"] = errors[:20]
    if not args.json:
        cost = f", ${summary['cost_usd']:.4f}" if summary["cost_usd"] else ""
        print(
            f"judged {summary['judged']} groups ({summary['cached']} from cache), "
            f"{summary['unjudged']} unjudged; {summary['calls']} calls, "
            f"{summary['input_tokens']} input / {summary['output_tokens']} output tokens{cost}; "
            f"judge {spec.model}, spec {spec.spec_hash}"
        )
        if summary.get("service_s_mean") is not None:
            print(
                f"  per group: {summary['service_s_mean']:.1f}s judge service + "
                f"{summary['queue_s_mean']:.1f}s queued (mean; queue = waiting behind "
                "--concurrency or for the one local model)"
            )
        for e in errors[:10]:
            print(f"  unjudged {e['group_id']}: {e['error']}")
        if errors:
            print("  (unjudged groups are stored with their error; rerun to retry them)")
    return summary


JUDGE = Command("judge", _judge_args, _judge)


def _agreement_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="path of the SQLite store")
    p.add_argument("--spec", help="judge spec hash or prefix (default: the most used)")
    p.add_argument("--env", dest="env_id", help="only groups of this env id")
    p.add_argument("--disagreements", type=int, default=10, metavar="N", help="list the N groups where judge and people disagree most (default: 10)")  # fmt: skip
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default: 2000)")  # fmt: skip


def _agreement(args: argparse.Namespace) -> dict[str, Any]:
    store = _open_store(args.store, readonly=True)
    try:
        try:
            agreement = agreement_report(
                store, spec_hash=args.spec, env_id=args.env_id, n_resamples=args.resamples
            )
            rows = [
                r.to_dict()
                for r in disagreements(
                    store, spec_hash=args.spec, env_id=args.env_id, limit=args.disagreements
                )
            ]
        except ValueError as e:
            raise UserError(str(e)) from None
    finally:
        store.close()
    report = agreement.to_dict()
    if not report["n_judged"] and not report["n_labeled"]:
        raise UserError(
            f"store {args.store!r} has no judged groups"
            + (f" under spec {args.spec!r}" if args.spec else "")
            + f"; run `rankgym judge --store {args.store}` first"
        )
    if not report["n_judged"]:
        report["hint"] = f"no judged groups: run `rankgym judge --store {args.store}` first"
    if not args.json:
        print(format_report(agreement))
        if report.get("hint"):
            print(report["hint"])
        if rows:
            print("\ngroups where the judge and people disagree most:")
            print(f"  {'group':<24} {'tau_b':>6} {'pairs':>6}  judge top -> people top")
            for r in rows:
                tau = "  -   " if r["kendall_tau_b"] is None else f"{r['kendall_tau_b']:+.2f}"
                print(
                    f"  {r['group_id']:<24} {tau:>6} {r['pairwise_accuracy']:>6.2f}  "
                    f"{','.join(r['judge_top'])} -> {','.join(r['human_top'])}"
                )
    return {**report, "disagreements": json.loads(json.dumps(rows))}


AGREEMENT = Command("agreement", _agreement_args, _agreement)
