"""``rankgym rollout``: roll out groups of trajectories with a policy and write them to a store.

Each finished group is written in its own transaction; rerunning with the same ``--run`` (and
the same seed, split and task count) skips the groups already stored, so an interrupted
rollout resumes where it stopped. See docs/rollout.md.

What it does not do: no judging (``rankgym judge``) and no training (``rankgym train``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

from rankgym.cli import Command
from rankgym.envs.policies import make_policy
from rankgym.envs.registry import UnknownEnvError, make
from rankgym.envs.rollout import EnvFactory, first_then, rollout_to_store
from rankgym.envs.rollout_report import error_lines
from rankgym.errors import UserError
from rankgym.store import Store
from rankgym.threads import set_torch_threads

__all__ = ["MAX_GROUP_SIZE", "MAX_NEW_TOKENS", "ROLLOUT", "bounded", "parse_env_kwargs"]

# Bounds on sizes a user types: far above any sensible run, low enough that a typo (an extra
# few zeros) is refused at once instead of growing memory until the box swaps.
MAX_GROUP_SIZE = 1024
MAX_NEW_TOKENS = 32768
MAX_EPISODES = 1_000_000


def bounded(high: int, low: int = 1) -> Any:
    """An argparse type: an integer in ``[low, high]``, with the bound named in the error."""

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"expected {low}..{high}, got {n}")
        return n

    return parse


_positive = bounded(MAX_EPISODES)


def _kwarg_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    if "," in text:
        return [_kwarg_value(part.strip()) for part in text.split(",") if part.strip()]
    return text


def parse_env_kwargs(items: list[str] | str | None, flag: str = "--env-kwargs") -> dict[str, Any]:
    """Env constructor kwargs from ``--env-kwargs`` values: each a JSON object
    (``'{"difficulty": "hard"}'``) or ``KEY=VALUE`` pairs separated by spaces
    (``difficulty=hard families=lookup,units``). A VALUE is JSON if it parses (numbers, true,
    lists), else a comma-separated list of strings, else a string. Later keys win. Raises
    ``UserError`` naming the bad item."""
    if items is None:
        return {}
    out: dict[str, Any] = {}
    for item in [items] if isinstance(items, str) else items:
        text = item.strip()
        if text.startswith("{"):
            try:
                obj = json.loads(text)
            except ValueError as e:
                raise UserError(f"{flag} {item!r} is not valid JSON: {e}") from None
            if not isinstance(obj, dict):
                raise UserError(f"{flag} {item!r} must be a JSON object")
            out.update(obj)
            continue
        for pair in text.split():
            key, sep, value = pair.partition("=")
            if not sep or not key.isidentifier():
                raise UserError(
                    f"{flag} {pair!r}: expected KEY=VALUE (e.g. difficulty=hard) or a JSON object"
                )
            out[key] = _kwarg_value(value)
    return out


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--env", required=True, help="env id, e.g. rankgym/ToolUse-v0 (see `rankgym envs`)"
    )
    p.add_argument("--tasks", type=_positive, default=8, help="number of tasks (groups), default 8")
    p.add_argument(
        "--group-size",
        type=bounded(MAX_GROUP_SIZE),
        default=4,
        help=f"episodes per task, default 4 (at most {MAX_GROUP_SIZE})",
    )
    p.add_argument("--store", required=True, help="SQLite store file (created if missing)")
    p.add_argument(
        "--policy",
        default="embedded",
        help="embedded (default) | hf:PATH[@ADAPTER_DIR] | litellm:MODEL | vllm:URL[@MODEL] | "
        "vllm:serve[:DIR] | random | oracle",
    )
    p.add_argument(
        "--split",
        default="train",
        help="task split: train, test, or one the env adds (e.g. agentdojo)",
    )
    p.add_argument(
        "--env-kwargs",
        action="append",
        metavar="KWARGS",
        help="env constructor arguments: JSON object or KEY=VALUE pairs, e.g. "
        "'difficulty=hard families=lookup,units' (repeatable)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for tasks, env and sampling")
    p.add_argument("--run", default=None, help="run id; reuse one to resume it (default: new)")
    p.add_argument("--step", type=int, default=0, help="step number recorded on the groups")
    p.add_argument(
        "--max-new-tokens",
        type=bounded(MAX_NEW_TOKENS),
        default=None,
        help="tokens per assistant turn (default 96 local, 512 litellm)",
    )
    p.add_argument(
        "--temperature", type=float, default=1.0, help="sampling temperature (0 = greedy)"
    )
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling, default 1.0 (off)")
    p.add_argument(
        "--max-concurrent",
        type=_positive,
        default=None,
        help="episodes in flight at once (default: all; 1 = one at a time)",
    )


def _run(args: argparse.Namespace) -> dict[str, Any]:
    if args.temperature < 0:
        raise UserError(f"--temperature must be >= 0, got {args.temperature}")
    if not 0 < args.top_p <= 1:
        raise UserError(f"--top-p must be in (0, 1], got {args.top_p}")
    env_kwargs = parse_env_kwargs(args.env_kwargs)
    try:
        env = make(args.env, **env_kwargs)
    except UnknownEnvError as e:
        raise UserError(str(e)) from None
    except (TypeError, ValueError) as e:
        raise UserError(
            f"--env-kwargs {json.dumps(env_kwargs)}: {args.env} refused them: {e}"
        ) from None
    splits = tuple(env.splits)
    if args.split not in splits:
        raise UserError(f"--split {args.split!r}: {args.env} has splits {', '.join(splits)}")
    n_available = len(env.tasks(args.split))
    if args.tasks > n_available:
        raise UserError(
            f"--tasks {args.tasks}: {args.env} has only {n_available} tasks in the "
            f"{args.split!r} split; pass --tasks {n_available} or fewer"
        )
    if args.policy == "embedded" or args.policy.startswith("hf:"):
        set_torch_threads()
    policy = make_policy(
        args.policy,
        env=env,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
    )
    run_id = args.run or f"rollout-{time.strftime('%Y%m%d-%H%M%S')}-{random.randrange(16**4):04x}"
    config = {
        "env": args.env,
        "env_kwargs": env_kwargs,
        "policy": args.policy,
        "tasks": args.tasks,
        "group_size": args.group_size,
        "split": args.split,
        "seed": args.seed,
        "step": args.step,
        "max_new_tokens": args.max_new_tokens,
        "temperature": args.temperature,
        "top_p": args.top_p,
    }
    # the env made above is the first episode's, then fresh ones
    factory = first_then(env, lambda: make(args.env, **env_kwargs))
    store = Store(args.store)
    try:
        result = rollout_to_store(
            store,
            EnvFactory(factory, args.env),
            policy,
            run_id=run_id,
            config=config,
            n_tasks=args.tasks,
            group_size=args.group_size,
            split=args.split,
            seed=args.seed,
            step=args.step,
            progress=not args.quiet,
            max_concurrent=args.max_concurrent,
        )
    finally:
        store.close()
    summary = result.summary()
    summary.update(env=args.env, policy=args.policy, store=str(args.store))
    if not args.json:
        _print_summary(summary)
    return summary


def _print_summary(s: dict[str, Any]) -> None:
    mvr = s["mean_verifiable_reward"]
    rate = s["success_rate"]
    lines = [
        f"rollout {s['env']} with {s['policy']}: {s['groups']} groups, "
        f"{s['trajectories']} trajectories, {s['errors']} errors, {s['truncated']} truncated "
        f"in {s['wall_s']:.1f} s",
        "mean verifiable reward "
        + ("n/a" if mvr is None else f"{mvr:.3f}")
        + ", success rate "
        + ("n/a" if rate is None else f"{100 * rate:.1f}%")
        + f" (reward >= {s['success_threshold']}), "
        + f"{s['completion_tokens']} completion tokens"
        + ("" if not s["tokens_per_s"] else f" ({s['tokens_per_s']:.1f} tok/s)"),
    ]
    if s["skipped_groups"]:
        lines.append(f"skipped {s['skipped_groups']} groups already in the store (resumed)")
    lines += error_lines(s)
    lines.append(f"run {s['run_id']} in {s['store']} (rerun with --run {s['run_id']} to resume)")
    print("\n".join(lines), file=sys.stdout)


ROLLOUT = Command(
    name="rollout",
    add_arguments=_add_arguments,
    run=_run,
)
