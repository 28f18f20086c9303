"""CLI subcommands of rankgym.trainer: ``rankgym train``, ``rankgym eval`` and ``rankgym demo``.

Heavy imports (torch, peft, litellm) happen inside ``run`` so ``rankgym --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from rankgym.cli import Command
from rankgym.config import validate_config
from rankgym.envs.rollout_command import (
    MAX_EPISODES,
    MAX_GROUP_SIZE,
    MAX_NEW_TOKENS,
    bounded,
    parse_env_kwargs,
)
from rankgym.errors import UserError
from rankgym.threads import set_torch_threads
from rankgym.trainer.config import TrainConfig, load_train_config
from rankgym.trainer.context import TrainingContext
from rankgym.trainer.evaluate import AdapterOffPolicy, evaluate_policies
from rankgym.trainer.records import EvalResult

log = logging.getLogger(__name__)


def _echo(args: argparse.Namespace) -> Any:
    if args.json or args.quiet:
        return lambda msg: log.info("%s", msg)
    return lambda msg: print(msg, flush=True)


# ---- rankgym train ----------------------------------------------------------------------------


def _train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, metavar="FILE", help="training TOML (see samples/configs/)")  # fmt: skip
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")  # fmt: skip
    p.add_argument("--store", metavar="PATH", help="SQLite store (default: config's store, else OUT/store.db)")  # fmt: skip
    p.add_argument("--out", metavar="DIR", help="output dir for checkpoints and the adapter (default: config's out_dir)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="train even if the judge-check finds the judge cannot tell good from bad, and on steps whose verifier rewards are all equal (warned and flagged each step)")  # fmt: skip
    p.add_argument("--init-adapter", metavar="DIR", help="start GRPO from this peft adapter (e.g. the --out of `rankgym sft`) instead of a fresh LoRA; overrides [policy] adapter")  # fmt: skip


def _train_run(args: argparse.Namespace) -> dict[str, Any]:
    from rankgym.trainer.loop import Trainer

    cfg = load_train_config(args.config)
    set_torch_threads()
    trainer = Trainer(
        cfg,
        out_dir=args.out,
        store_path=args.store,
        resume=args.resume,
        progress=not args.quiet,
        echo=_echo(args),
        adapt_threads=True,
        force=args.force,
        init_adapter=args.init_adapter or cfg.policy.adapter,
    )
    summary = trainer.run()
    if not args.json:
        if summary.get("init_adapter"):
            print(f"started from: {summary['init_adapter']}")
        if (summary.get("sft") or {}).get("stopped_on_time_cap"):
            print(_time_cap_line("sft", summary["sft"]))
        print(f"adapter: {summary['adapter']}")
        print(f"store:   {summary['store']}  (rankgym dashboard --store {summary['store']})")
        for ev in summary["evals"]:
            _print_eval(ev)
    return summary


TRAIN = Command("train", _train_arguments, _train_run)


def _time_cap_line(phase: str, stats: dict[str, Any]) -> str:
    """The summary line of a phase that stopped on its ``max_minutes`` cap."""
    return (
        f"{phase}: stopped on its time cap (max_minutes = {stats.get('max_minutes'):g}) after "
        f"{stats.get('steps')} of {stats.get('steps_planned')} steps"
    )


# ---- rankgym sft ------------------------------------------------------------------------------


def _sft_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, metavar="DIR", help="where the adapter goes (peft files + meta.json)")  # fmt: skip
    p.add_argument("--config", metavar="FILE", help="a train TOML: its [env], [policy], [lora] and [sft] sections (flags below override [sft])")  # fmt: skip
    p.add_argument("--env", metavar="ID", help="env id (default: the config's, else rankgym/ToolUse-v0)")  # fmt: skip
    p.add_argument("--env-kwargs", action="append", metavar="KWARGS", help="env constructor arguments: JSON or KEY=VALUE pairs")  # fmt: skip
    p.add_argument("--source", choices=["oracle", "store", "jsonl"], help="demonstrations: env oracle on train tasks (default), a store, or a JSONL of chat examples")  # fmt: skip
    p.add_argument("--path", metavar="FILE", help="the store or JSONL file for --source store|jsonl")  # fmt: skip
    p.add_argument("--select", choices=["verifier", "judge"], help="store: verifiable reward >= --min-reward (default) or the judge's top trajectory per group")  # fmt: skip
    p.add_argument("--min-reward", type=float, metavar="R", help="store + verifier: lowest verifiable reward kept (default 1.0)")  # fmt: skip
    p.add_argument("--run", metavar="ID", help="store: only this run's groups")
    p.add_argument("--tasks", type=bounded(MAX_EPISODES), metavar="N", help="oracle: train tasks to demonstrate (default: all)")  # fmt: skip
    p.add_argument("--steps", type=bounded(MAX_EPISODES), metavar="N", help="optimizer steps (default 60)")  # fmt: skip
    p.add_argument("--batch-size", type=bounded(MAX_GROUP_SIZE), metavar="B", help="conversations per step (default 8)")  # fmt: skip
    p.add_argument("--lr", type=float, help="learning rate (default 4e-4)")
    p.add_argument("--max-minutes", type=float, metavar="M", help="stop after M minutes")
    p.add_argument("--seed", type=int, help="seed (default: the config's, else 0)")


def _sft_run(args: argparse.Namespace) -> dict[str, Any]:
    from rankgym.trainer.sft import check_demonstrations, sft_stage

    raw = load_train_config(args.config).model_dump(mode="json") if args.config else {}
    if args.env:
        raw.setdefault("env", {})["id"] = args.env
    if args.env_kwargs:
        raw.setdefault("env", {})["kwargs"] = parse_env_kwargs(args.env_kwargs)
    if args.seed is not None:
        raw["seed"] = args.seed
    sft = dict(raw.get("sft") or {})
    for key in ("source", "path", "select", "min_reward", "run", "tasks", "steps", "batch_size", "lr", "max_minutes"):  # fmt: skip
        if getattr(args, key) is not None:
            sft[key] = getattr(args, key)
    raw["sft"] = sft
    cfg = validate_config(raw, TrainConfig, args.config or "sft")
    out = Path(args.out)
    if out.exists() and (
        not out.is_dir() or (not (out / "adapter_config.json").is_file() and any(out.iterdir()))
    ):
        raise UserError(f"--out {args.out!r} exists and holds no adapter; choose another --out")
    check_demonstrations(cfg)  # a bad JSONL line fails before the model loads
    set_torch_threads()
    ctx = TrainingContext.from_config(cfg)
    summary = sft_stage(cfg, ctx, out, progress=not args.quiet, echo=_echo(args))
    summary["adapter"] = str(out.resolve())
    if not args.json:
        if summary.get("stopped_on_time_cap"):
            print(_time_cap_line("sft", summary))
        print(f"adapter: {summary['adapter']}")
        print(f"  evaluate: rankgym eval --adapter {out}")
    return summary


SFT = Command("sft", _sft_arguments, _sft_run)


# ---- rankgym eval -----------------------------------------------------------------------------


def _eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adapter", required=True, metavar="DIR", help="peft adapter dir (a checkpoint or OUT/adapter)")  # fmt: skip
    p.add_argument("--env", metavar="ID", help="env id (default: the one the adapter was trained on)")  # fmt: skip
    p.add_argument("--env-kwargs", action="append", metavar="KWARGS", help="env constructor arguments: JSON object or KEY=VALUE pairs, e.g. 'difficulty=hard families=lookup,units' (default: the training ones)")  # fmt: skip
    p.add_argument("--split", default="test", help="task split (default: test)")
    p.add_argument("--tasks", type=bounded(MAX_EPISODES), metavar="N", help="number of tasks (default: the whole split)")  # fmt: skip
    p.add_argument("--samples", type=bounded(MAX_GROUP_SIZE), default=2, metavar="K", help="seeded samples per task, paired across models (default: 2)")  # fmt: skip
    p.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (default: 0.7; 0 = greedy)")  # fmt: skip
    p.add_argument("--max-new-tokens", type=bounded(MAX_NEW_TOKENS), metavar="N", help="per turn (default: the training setting, else 64)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="episode and sampling seed (default: 0)")
    p.add_argument("--base", metavar="DIR", help="base model dir (default: the adapter's base_model_name_or_path, else embedded)")  # fmt: skip
    p.add_argument("--device", default="cpu", help="torch device for the model: cpu (default), cuda, cuda:1, ...")  # fmt: skip


def _adapter_meta(adapter: Path) -> dict[str, Any]:
    meta = adapter / "meta.json"
    return json.loads(meta.read_text()) if meta.is_file() else {}


def flat_eval(res: EvalResult) -> dict[str, Any]:
    """The headline numbers of an evaluation: success of base and trained with 95% CIs."""
    b, t = res["policies"]["base"], res["policies"]["trained"]
    d = t["vs_base"]
    return {
        "base_success": b["success"],
        "base_ci": b["ci95"],
        "trained_success": t["success"],
        "trained_ci": t["ci95"],
        "difference": d["difference"],
        "difference_ci": d["ci95"],
        "n": t["n"],
        "tasks": res["tasks"],
        "samples_per_task": res["samples_per_task"],
    }


def _print_eval(res: EvalResult) -> None:
    f = flat_eval(res)
    where = f"{res.get('env', '')} {res['split']}".strip()
    print(
        f"held-out success on {where} ({f['tasks']} tasks x {f['samples_per_task']} samples, "
        f"n={f['n']} each, paired):"
    )
    print(f"  base     {f['base_success']:6.1%}  95% CI [{f['base_ci'][0]:.1%}, {f['base_ci'][1]:.1%}]")  # fmt: skip
    print(f"  trained  {f['trained_success']:6.1%}  95% CI [{f['trained_ci'][0]:.1%}, {f['trained_ci'][1]:.1%}]")  # fmt: skip
    print(
        f"  difference {f['difference']:+.1%}  95% CI [{f['difference_ci'][0]:+.1%}, "
        f"{f['difference_ci'][1]:+.1%}] (paired bootstrap over tasks)"
    )


def _eval_target(args: argparse.Namespace) -> tuple[Path, dict[str, Any], str, dict[str, Any]]:
    """The adapter dir, its meta.json, and the env id and kwargs to evaluate it on."""
    given_kwargs = parse_env_kwargs(args.env_kwargs) if args.env_kwargs else None
    adapter = Path(args.adapter)
    if not adapter.is_dir():
        raise UserError(f"--adapter {args.adapter!r} is not a directory")
    meta = _adapter_meta(adapter)
    env_id = args.env or (meta.get("env") or {}).get("id")
    if not env_id:
        raise UserError("--env is required (the adapter does not say which env it was trained on)")
    if given_kwargs is not None:
        env_kwargs = given_kwargs
    elif args.env is None or args.env == (meta.get("env") or {}).get("id"):
        env_kwargs = (meta.get("env") or {}).get("kwargs") or {}
    else:
        env_kwargs = {}
    return adapter, meta, env_id, env_kwargs


def _eval_run(args: argparse.Namespace) -> dict[str, Any]:
    """Base (adapter disabled) vs adapter success on held-out tasks; see ``evaluate.py``."""
    from rankgym.trainer.setup import make_env_factory

    adapter, meta, env_id, env_kwargs = _eval_target(args)
    if args.temperature < 0:
        raise UserError(f"--temperature must be >= 0, got {args.temperature}")
    set_torch_threads()
    ctx = TrainingContext.from_adapter(adapter, args.base, args.device)
    env = make_env_factory(env_id, env_kwargs)
    trained = ctx.policy(
        f"adapter:{adapter.name}",
        max_new_tokens=args.max_new_tokens or int(meta.get("max_new_tokens") or 64),
        temperature=args.temperature,
        seed=args.seed,
    )
    policies = {"base": AdapterOffPolicy(trained, "base"), "trained": trained}
    try:
        res = evaluate_policies(
            env,
            policies,
            split=args.split,
            n_tasks=args.tasks,
            samples=args.samples,
            seed=args.seed,
            progress=not args.quiet,
        )
    except ValueError as e:
        raise UserError(str(e)) from None
    res.update(
        {
            "env": env_id,
            "env_kwargs": env_kwargs,
            "adapter": str(adapter),
            "temperature": args.temperature,
        }
    )
    if not args.json:
        _print_eval(res)
    return {
        **flat_eval(res),
        "env": env_id,
        "env_kwargs": env_kwargs,
        "split": args.split,
        "detail": res,
    }


EVAL = Command("eval", _eval_arguments, _eval_run)


from rankgym.trainer.demo import DEMO, demo_config  # noqa: E402  (re-exported)

__all__ = ["TRAIN", "EVAL", "SFT", "DEMO", "flat_eval", "demo_config"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit("run through `rankgym train|eval|demo`")
