"""Fixed-seed hashes of what training writes: ``rankgym train`` / ``sft`` / ``eval`` on a tiny model.

``bench/behaviour.py`` covers task lists, inboxes, scripted rollouts, the judge and SFT token
ids, but trains nothing. This script runs the training commands on a 2-layer random Llama (the
embedded tokenizer, ``tests/trainer/trainer_helpers.py``) and hashes what they leave, so a
restructuring of the trainer can show that it changed nothing:

1. ``rankgym train`` with ``[sft]`` (oracle demonstrations), verifiable reward, 2 GRPO steps
   and the held-out evaluation; then ``rankgym eval --adapter`` and ``rankgym sft --config``;
2. ``rankgym train`` judged by the tests' deterministic LiteLLM judge (``trainerfake/hash``):
   2 GRPO steps that update the LoRA.

Hashed: each ``--json`` output, each store table, each adapter's safetensors file. Left out as
volatile: timings and rates (keys ending in ``_s``, ``time_*``, ``*tokens_per_s``), paths (the
work folder becomes ``<w>``), ``created_at``-like columns, judgement ids (random) and the
judge's latency. ``--checkout DIR`` runs the commands on another tree's packages (a symlink
mirror first on ``PYTHONPATH``, as ``bench/behaviour.py``); the helpers always come from this
tree's ``tests/``. About 2 minutes on 2 cores, one torch thread.

    python bench/train_behaviour.py --out /tmp/new.json
    python bench/train_behaviour.py --checkout /tmp/base --out /tmp/old.json
    diff /tmp/old.json /tmp/new.json

What it does not do: load SmolLM2, run the demo, or time anything.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = [str(ROOT / "tests" / "trainer"), str(ROOT / "tests")]
_VOLATILE_KEY = re.compile(r"(_s|_s_mean|_at)$|^(time_|seconds$|checkpoint$|store$|out_dir$)")
_VOLATILE_COLUMN = re.compile(r"(created|_at$|latency)")

# runs inside the child process: the fake judge, then the CLI
_CHILD = """
import sys
sys.path[:0] = {tests!r}
from trainer_helpers import install_fake_judge
install_fake_judge()
from rankgym.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _scrub(obj: Any, work: str) -> Any:
    if isinstance(obj, dict):
        return {k: "<v>" if _VOLATILE_KEY.search(k) else _scrub(v, work) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrub(v, work) for v in obj]
    return obj.replace(work, "<w>") if isinstance(obj, str) else obj


def _cell(value: Any, work: str) -> Any:
    """A column's value with volatile fields blanked (JSON text is parsed and scrubbed)."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return _scrub(json.loads(value), work)
        except ValueError:
            pass
    return value.replace(work, "<w>") if isinstance(value, str) else value


def _tables(db: Path, work: str) -> dict[str, list[str]]:
    con = sqlite3.connect(db)
    out = {}
    names = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%'")  # fmt: skip
    for (table,) in names.fetchall():
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        keep = [c for c in cols if not _VOLATILE_COLUMN.search(c)]
        if table in ("judgements", "scores"):  # judgement ids are random
            keep = [c for c in keep if c not in ("id", "judgement_id")]
        rows = sorted(
            json.dumps([_cell(v, work) for v in row], sort_keys=True, default=str)
            for row in con.execute(f"SELECT {', '.join(keep)} FROM {table}")
        )
        out[table] = rows
    con.close()
    return out


def _run(work: Path, *argv: str) -> Any:
    """A CLI command in a child process (this interpreter, this PYTHONPATH); its --json."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    code = _CHILD.format(tests=TESTS)
    res = subprocess.run([sys.executable, "-c", code, *argv, "--json", "-q"], cwd=work,
                         env=env, capture_output=True, text=True, check=False)  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def measure(work: Path, dump: Path | None = None) -> dict[str, Any]:
    """Run the commands (module docstring) in ``work``; the hashes (and with ``dump``, what was
    hashed, one file per item, for a diff)."""
    sys.path[:0] = TESTS
    from trainer_helpers import save_tiny_model, tiny_config, to_toml

    import rankgym

    model = save_tiny_model(work / "tiny")
    w = str(work)
    out: dict[str, Any] = {"meta": {"rankgym": rankgym.__file__}}
    runs = {
        "verifiable+sft": {"reward": {"kind": "verifiable"}, "eval": {"tasks": 2, "samples": 1},
                           "sft": {"source": "oracle", "steps": 2, "batch_size": 2, "tasks": 3}},
        "judge": {"reward": {"kind": "judge"}, "eval": {"tasks": 2, "samples": 1}},
    }  # fmt: skip
    for name, over in runs.items():
        cfg = tiny_config(model, work / name / "out", steps=2, **over)
        cfg["store"] = str(work / name / "store.db")
        (work / name).mkdir()
        (work / name / "train.toml").write_text(to_toml(cfg))
        res = {"train --json": _scrub(_run(work, "train", "--config", f"{name}/train.toml"), w)}
        if name == "verifiable+sft":
            adapter = f"{name}/out/adapter"
            res["eval --json"] = _scrub(_run(work, "eval", "--adapter", adapter, "--tasks", "2"), w)  # fmt: skip
            sft = _run(work, "sft", "--config", f"{name}/train.toml", "--out", f"{name}/sft")
            res["sft --json"] = _scrub(sft, w)
        texts = {k: json.dumps(v, sort_keys=True, indent=0) for k, v in res.items()}
        for table, rows in _tables(work / name / "store.db", w).items():
            texts[f"table {table} ({len(rows)} rows)"] = "\n".join(rows)
        sec = {k: _sha(t) for k, t in texts.items()}
        if dump is not None:
            for k, t in texts.items():
                (dump / f"{name}.{k.split(' (')[0].replace(' ', '_')}.txt").write_text(t + "\n")
        for f in sorted((work / name).rglob("adapter_model.safetensors")):
            rel = f.relative_to(work / name).as_posix()
            if "/checkpoints/" not in rel:
                sec[f"weights {rel}"] = hashlib.sha256(f.read_bytes()).hexdigest()[:16]
        out[name] = sec
    return out


def _on_checkout(root: Path, out: Path | None, dump: Path | None) -> int:
    tools = ROOT / "tools" / "lint_imports.py"
    spec = importlib.util.spec_from_file_location("lint_imports", tools)
    assert spec is not None and spec.loader is not None
    lint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lint)
    with tempfile.TemporaryDirectory(prefix="rg-train-behaviour-") as tmp:
        lint.mirror(root.resolve(), Path(tmp))
        env = {**os.environ, "PYTHONPATH": tmp}
        argv = [sys.executable, __file__, *(["--out", str(out)] if out else [])]
        argv += ["--dump", str(dump)] if dump else []
        return subprocess.run(argv, env=env, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, help="write the JSON here too")
    p.add_argument("--checkout", type=Path, help="run on this source tree's packages instead")
    p.add_argument("--dump", type=Path, help="write what is hashed into this folder (to diff)")
    args = p.parse_args(argv)
    if args.checkout is not None:
        return _on_checkout(args.checkout, args.out, args.dump)
    with tempfile.TemporaryDirectory(prefix="rg-train-behaviour-work-") as work:
        if args.dump is not None:
            args.dump.mkdir(parents=True, exist_ok=True)
        text = json.dumps(measure(Path(work), args.dump), indent=1, sort_keys=True)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
