"""Behaviour fingerprint: sha256 hashes of fixed-seed outputs a refactoring must not change.

    python bench/behaviour.py [--out FILE] [--work DIR] [--no-model]
    python bench/behaviour.py --compare bench/behaviour-0af4ebc.json   # exit 1 on a difference
    python bench/behaviour.py --dump DIR    # also every hashed value as JSON, to diff two runs
    python bench/behaviour.py --checkout /tmp/base --out bench/behaviour-0af4ebc.json

Prints (and with ``--out`` writes) one JSON object of sections, each value ``{"n": count,
"sha256": hash}`` so a difference points at the part that moved:

- ``tasks``: the task list of every registered env, every split it declares (train, test,
  judge, agentdojo), plus ToolUse with the demo's kwargs (hard; lookup, units, dates);
- ``inboxes``: EmailSearch's inboxes as the env reads them (emails, questions, meta without the
  generator's source fingerprint) and the generator's output for the default corpus;
- ``rollouts``: ``rankgym rollout --json`` for every env x policy (``oracle``, ``oracle~0.5``,
  ``random``, ``oracle,random``; 2 tasks x 3, seed 0, fixed ``--run``) and every table row of
  the fresh store it wrote, per table, plus ``rankgym export`` JSONL of it; and one sampled
  rollout of the embedded model (ToolUse, 1 task x 2, 24 new tokens);
- ``judge``: ``rankgym judge --judge local/smollm2-yesno --json`` on the ToolUse
  ``oracle,random`` store and the judge tables it wrote; ``--dry-run --json`` of an API model
  and of the yes/no reader; ``JudgeSpec.spec_hash`` of API, yes/no, pairwise and trained
  (a fixed fake adapter folder) specs;
- ``sft``: the token ids and loss masks of the demo's oracle demonstrations (and of 4 oracle
  demonstrations of each env) as ``trainer.sft.render_rows`` renders them.

Volatile values are removed before hashing, and only these:

- every ``created_at`` column, ``judgements.latency_s``, ``trajectories.metrics.wall_time_s``,
  and ``latency_s``/``service_s``/``queue_s`` inside ``judgements.presentations`` and
  ``judge_cache.value``;
- judgement ids (random ``judg-`` + 12 hex digits), blanked wherever they appear;
- where a sandbox traceback shown to the agent names rankgym's own frame, its folder and line
  (``<rankgym>/envs/sandbox/supervisor.py", line _``), and so ``groups.content_hash`` of
  CodeTests stores (it covers that text);
- in ``--json`` summaries ``wall_s``, ``tokens_per_s``, ``episodes_per_min``, the
  ``*_s_mean`` latencies, and ``store`` (a path);
- the inbox meta's ``generator_version`` (it hashes the generator's source).

Everything else is hashed as stored (the raw text of JSON columns, so a change of formatting
shows too).

Another checkout (e.g. the commit before a refactoring): ``--checkout DIR`` runs this script
on a mirror of DIR's installed layout (``tools/lint_imports.py``'s ``python_on``) first on
``PYTHONPATH``; ``meta.rankgym`` in the output names the package it imported. One torch
thread; about a minute on 2 cores, most of it the judge and the sampled rollout
(``--no-model`` skips everything that loads SmolLM2).

What it does not do: train (no GRPO or SFT step; the demo's numbers are in RESULTS.md), call any
API judge, or cover plugin envs (built-ins only). It uses the CLI where one exists, so a
refactoring that keeps the commands keeps this script working; the SFT section calls
``conversations_for``/``render_rows`` and the inbox section ``EmailSearchEnv.inboxes``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RANKGYM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# the judge's weights as at the reference commit: since issue 23 the local judge follows the
# policy's dtype (bf16 on this CPU), a deliberate change of its scores, not a refactoring's
os.environ.setdefault("RANKGYM_JUDGE_DTYPE", "float32")

ENVS = ("rankgym/ToolUse-v0", "rankgym/EmailSearch-v0", "rankgym/CodeTests-v0")
POLICIES = ("oracle", "oracle~0.5", "random", "oracle,random")
DEMO_KWARGS: dict[str, Any] = {"difficulty": "hard", "families": ["lookup", "units", "dates"]}
RUN_ID = "behaviour"
VOLATILE_SUMMARY = {
    "wall_s",
    "tokens_per_s",
    "episodes_per_min",
    "latency_s_mean",
    "service_s_mean",
    "queue_s_mean",
    "store",
}
_JUDGEMENT_ID = re.compile(r"judg-[0-9a-f]{12}")  # random; one judgement per group here
_SANDBOX_PATH = re.compile(r'/[^\s"\\]*?envs/sandbox/')  # where rankgym is installed
_SANDBOX_LINE = re.compile(r'(<rankgym>/envs/sandbox/\w+\.py\\*", line )\d+')
_VOLATILE_JSON = re.compile(
    r'("(?:wall_time_s|latency_s|service_s|queue_s)":\s*)(-?[0-9][0-9.eE+-]*|null)'
)
FAKE_ADAPTER_DIR = Path("/tmp/rankgym-behaviour-fake-judge")
FAKE_ADAPTER = {  # bytes of a fake trained judge folder: only its content enters the spec hash
    "adapter_config.json": b'{"r": 8, "peft_type": "LORA"}',
    "adapter_model.safetensors": b"not really weights, fixed bytes for the hash",
    "judge_train.json": b'{"base_model": "embedded"}',
}


def scrub(text: str) -> str:
    """``text`` with the volatile values of stored JSON (timings, judgement ids) blanked."""
    text = _SANDBOX_LINE.sub(r"\1_", _SANDBOX_PATH.sub("<rankgym>/envs/sandbox/", text))
    return _JUDGEMENT_ID.sub("judg-_", _VOLATILE_JSON.sub(r"\1_", text))


def digest(obj: Any) -> str:
    """sha256 of ``obj`` as canonical JSON (sorted keys, no spaces, non-ASCII kept)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def entry(items: Any) -> Any:
    """``{"n": len(items), "sha256": digest(items)}``; a string (a spec hash) as it is."""
    if isinstance(items, str):
        return items
    return {"n": len(items), "sha256": digest(items)}


def dump(folder: Path, section: str, data: dict[str, Any]) -> None:
    """Write each hashed value of ``section`` as JSON under ``folder`` (to diff two runs)."""
    for key, value in data.items():
        name = re.sub(r"[^A-Za-z0-9.~,+-]+", "_", f"{section}:{key}")
        text = json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False, default=str)
        (folder / f"{name}.json").write_text(text + "\n", encoding="utf-8", errors="surrogatepass")


def cli(argv: list[str]) -> dict[str, Any]:
    """Run ``rankgym ARGV --json`` in this process; its summary with volatile keys removed."""
    from rankgym.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([*argv, "--json", "--quiet"])
    if rc != 0:
        raise SystemExit(f"rankgym {' '.join(argv)} exited {rc}")
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    return {k: v for k, v in summary.items() if k not in VOLATILE_SUMMARY}


def store_rows(
    path: Path, tables: tuple[str, ...] | None = None, *, drop: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Every row of the store's tables (FTS shadow tables left out), volatile values removed,
    and the ``table.column`` names in ``drop`` left out."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
            if not r[0].startswith(("sqlite_", "trajectories_fts"))
        ]
        out = {}
        for name in names:
            if tables is not None and name not in tables:
                continue
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
            skip = {"created_at", *(d.split(".", 1)[1] for d in drop if d.startswith(name + "."))}
            if name == "judgements":
                skip.add("latency_s")
            keep = [c for c in cols if c not in skip]
            rows = []
            for row in con.execute(f'SELECT {", ".join(keep)} FROM "{name}"'):
                rows.append([scrub(v) if isinstance(v, str) else v for v in row])
            rows.sort(key=lambda r: json.dumps(r, default=str))
            out[name] = rows
        return out
    finally:
        con.close()


def section_tasks() -> dict[str, Any]:
    from rankgym.envs.registry import make

    out: dict[str, Any] = {}
    for env_id in ENVS:
        env = make(env_id).unwrapped
        for split in env.splits:
            tasks = [t.model_dump(mode="json") for t in env.tasks(split)]
            out[f"{env_id}:{split}"] = tasks
    env = make("rankgym/ToolUse-v0", **DEMO_KWARGS).unwrapped
    for split in env.splits:
        out[f"rankgym/ToolUse-v0+demo:{split}"] = [
            t.model_dump(mode="json") for t in env.tasks(split)
        ]
    return out


def section_inboxes() -> dict[str, Any]:
    from rankgym.envs.email.generator import generate_corpus
    from rankgym.envs.registry import make

    env = make("rankgym/EmailSearch-v0").unwrapped
    out: dict[str, Any] = {}
    for inbox_id, db in sorted(env.inboxes.items()):
        meta = {k: v for k, v in db.meta.items() if k != "generator_version"}
        out[f"db:{inbox_id}:meta"] = meta
        out[f"db:{inbox_id}:emails"] = [dataclasses.asdict(e) for e in db.emails()]
        out[f"db:{inbox_id}:questions"] = [dataclasses.asdict(q) for q in db.questions()]
    corpus = generate_corpus()
    out["generated:default-corpus"] = [dataclasses.asdict(i) for i in corpus]
    return out


def section_rollouts(work: Path, with_model: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    runs = [(e, p, ["--tasks", "2", "--group-size", "3"]) for e in ENVS for p in POLICIES]
    if with_model:
        runs.append(
            (
                "rankgym/ToolUse-v0",
                "embedded",
                ["--tasks", "1", "--group-size", "2", "--max-new-tokens", "24"],
            )
        )
    for env_id, policy, size in runs:
        name = f"{env_id}:{policy}"
        store = work / (re.sub(r"[^A-Za-z0-9]+", "_", name) + ".sqlite")
        store.unlink(missing_ok=True)
        summary = cli(["rollout", "--env", env_id, "--policy", policy, "--store", str(store),
                       "--run", RUN_ID, "--seed", "0", *size])  # fmt: skip
        out[f"{name}:json"] = summary
        # CodeTests: a sandbox traceback names the install folder, and the group's content
        # hash covers it (the traceback itself is compared with the folder blanked)
        drop = ("groups.content_hash",) if "CodeTests" in env_id else ()
        for table, e in store_rows(store, drop=drop).items():
            out[f"{name}:rows:{table}"] = e
        exported = work / (store.stem + ".jsonl")
        out[f"{name}:export"] = _export_lines(store, exported)
    return out


def _export_lines(store: Path, dest: Path) -> list[str]:
    cli(["export", "--store", str(store), "--out", str(dest)])
    return [scrub(line) for line in dest.read_text("utf-8").splitlines()]


def section_judge(work: Path, with_model: bool) -> dict[str, Any]:
    from rankgym.types import JudgeSpec

    src = work / "rankgym_ToolUse_v0_oracle_random.sqlite"
    out: dict[str, Any] = {}
    for model in ("openai/gpt-4o-mini", "local/smollm2-yesno"):
        dry = work / "dry.sqlite"
        shutil.copy(src, dry)
        out[f"dry-run:{model}"] = (cli(["judge", "--store", str(dry), "--judge", model, "--dry-run"]))  # fmt: skip
    fake = FAKE_ADAPTER_DIR  # the path is part of the model string, so a fixed one
    shutil.rmtree(fake, ignore_errors=True)
    fake.mkdir(parents=True)
    for fname, data in FAKE_ADAPTER.items():
        (fake / fname).write_bytes(data)
    specs = {
        "api": "openai/gpt-4o-mini",
        "yesno": "local/smollm2-yesno",
        "pairwise": "local/smollm2@pairwise",
        "trained": f"local/smollm2@{fake}",
        "missing": "local/smollm2@/nonexistent/rankgym-behaviour",
    }
    for key, model in specs.items():
        out[f"spec_hash:{key}"] = JudgeSpec(model=model, rubric="Rank them.").spec_hash
    if with_model:
        judged = work / "judged.sqlite"
        shutil.copy(src, judged)
        summary = cli(["judge", "--store", str(judged), "--judge", "local/smollm2-yesno"])
        out["judge:local/smollm2-yesno:json"] = summary
        tables = ("judge_specs", "judgements", "scores", "judge_cache")
        for table, e in store_rows(judged, tables).items():
            out[f"judge:local/smollm2-yesno:rows:{table}"] = e
        out["judge:local/smollm2-yesno:export"] = _export_lines(judged, work / "judged.jsonl")
    return out


def section_sft() -> dict[str, Any]:
    from rankgym.config import validate_config
    from rankgym.envs.policies.transformers import TransformersPolicy
    from rankgym.model import auto_dtype, shared_embedded
    from rankgym.trainer.config import TrainConfig
    from rankgym.trainer.sft import MAX_COMPLETION_TOKENS, conversations_for, render_rows

    model, tok = shared_embedded(auto_dtype("cpu"))
    out: dict[str, Any] = {}
    configs = {"demo": ("rankgym/ToolUse-v0", DEMO_KWARGS, None, 64, 4)}
    for env_id in ENVS:
        configs[env_id] = (env_id, {}, 4, 96, None)
    for key, (env_id, kwargs, n_tasks, max_new, max_turns) in configs.items():
        raw = {
            "name": "behaviour",
            "seed": 0,
            "steps": 1,
            "out_dir": "unused",
            "env": {
                "id": env_id,
                "kwargs": kwargs,
                **({"max_turns": max_turns} if max_turns else {}),
            },
            "policy": {"model": "embedded", "max_new_tokens": max_new},
            "sft": {"source": "oracle", "tasks": n_tasks},
        }
        cfg = validate_config(raw, TrainConfig, "behaviour")
        convs = conversations_for(cfg)
        policy = TransformersPolicy(model, tok, max_new_tokens=max_new)
        rows = render_rows(policy, convs, max(MAX_COMPLETION_TOKENS, max_new))
        out[f"{key}:conversations"] = [[c.messages, c.tools, c.source] for c in convs]
        out[f"{key}:token_rows"] = rows
    return out


def on_checkout(root: Path, argv: list[str]) -> int:
    """Run this script (``argv`` without ``--checkout``) on ``root``'s packages: a symlink
    mirror of its installed layout first on ``PYTHONPATH``. Refuses a tree that is not one."""
    if not (root / "pyproject.toml").is_file() or not (root / "rankgym").is_dir():
        raise SystemExit(f"--checkout {root}: not a rankgym source tree (no pyproject.toml)")
    rest, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--checkout":
            skip = True
        elif not a.startswith("--checkout="):
            rest.append(a)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import lint_imports

    return lint_imports.python_on(root.resolve(), [__file__, *rest])


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Lines naming every key whose value differs (or is only on one side; a ``--no-model`` run
    is compared on what it has)."""
    partial = not new.get("meta", {}).get("model", True)
    lines = []
    for sec in sorted(set(old) | set(new)):
        if sec == "meta" or (partial and sec not in new):
            continue
        a, b = old.get(sec, {}), new.get(sec, {})
        for key in sorted(set(a) | set(b)):
            if partial and key not in b:
                continue
            if a.get(key) != b.get(key):
                lines.append(f"{sec}: {key}: {a.get(key)} -> {b.get(key)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="also write the JSON here")
    p.add_argument("--work", type=Path, help="folder for the stores (default: a temporary one)")
    p.add_argument("--no-model", action="store_true", help="skip what loads SmolLM2")
    p.add_argument("--dump", type=Path, help="write every hashed value as JSON into this folder")
    p.add_argument("--checkout", type=Path, help="run on this source tree instead (a mirror)")
    p.add_argument("--compare", type=Path, help="a saved JSON: list differences, exit 1 if any")
    args = p.parse_args(argv)
    if args.checkout is not None:
        return on_checkout(args.checkout, sys.argv[1:] if argv is None else argv)
    import rankgym

    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rg-behaviour-")))
        else:
            work = args.work
            work.mkdir(parents=True, exist_ok=True)
        raw: dict[str, dict[str, Any]] = {
            "tasks": section_tasks(),
            "inboxes": section_inboxes(),
            "rollouts": section_rollouts(work, not args.no_model),
            "judge": section_judge(work, not args.no_model),
        }
        if not args.no_model:
            raw["sft"] = section_sft()
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for section, data in raw.items():
            dump(args.dump, section, data)
    result: dict[str, Any] = {
        section: {key: entry(value) for key, value in data.items()} for section, data in raw.items()
    }
    result["meta"] = {
        "rankgym": str(Path(rankgym.__file__).resolve().parent),
        "seconds": round(time.perf_counter() - t0, 1),
        "model": not args.no_model,
    }
    text = json.dumps(result, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.compare is None:
        print(text)
        return 0
    diffs = compare(json.loads(args.compare.read_text("utf-8")), result)
    for line in diffs:
        print(line)
    print(f"{len(diffs)} differences against {args.compare}", file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
