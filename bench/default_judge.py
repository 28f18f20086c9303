"""Rebuild the shipped default judge (``judges/default_judge/``, served as ``local/smollm2``).

Every step is a rankgym command (printed before it runs) and is skipped when its output is
already in ``--work``, so an interrupted build resumes:

1. labelled groups on the train split of ToolUse, EmailSearch and CodeTests: the oracle, the
   noisy oracle (``oracle~0.33``, ``oracle~0.67``) and the random policy in mixed groups of 4,
   and the untrained embedded model (``embedded``, the base policy) in groups of 2;
2. the demo's SFT warm start (``rankgym sft`` on the hard ToolUse tasks);
3. a short GRPO run from it (``rankgym train``: the demo's GRPO settings, verifier reward):
   its stored groups are the GRPO policy's own trajectories, failures included (a chain that
   never answers);
4. ``rankgym judge-train`` on all of it, which first rolls the SFT adapter out on ToolUse's
   ``judge`` split (train tasks GRPO never draws): LoRA r=8, bf16 weights;
5. ``rankgym judge-check --split test`` of the new adapter on the three envs, and on a
   ``rankgym new-env`` scaffold that is in none of the training data; then the judge on the
   held-out pairs of the policy's own groups (SFT and GRPO): pairwise and "longer wins";
6. with ``--ship DIR``: copies the adapter to DIR and writes ``DIR/manifest.json`` (the
   commands, the sha256 of every shipped file and of the training data, held-out numbers).

    make default-judge          # = .venv/bin/python bench/default_judge.py --ship judges/default_judge

What it does not do: tune anything on the test split (the checks run once, after training,
and their numbers are recorded whatever they are), or use a GPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ENVS = ("rankgym/ToolUse-v0", "rankgym/EmailSearch-v0", "rankgym/CodeTests-v0")
SCRIPTED = "oracle,oracle~0.33,oracle~0.67,random"
SFT_KWARGS = "difficulty=hard families=lookup,units,dates"
JUDGE_TRAIN_FLAGS = [
    "--rollout-env", "rankgym/ToolUse-v0", "--rollout-tasks", "16", "--rollout-group-size", "4", "--rollout-max-turns", "3",
    "--base", "local/smollm2", "--max-train-pairs", "200", "--max-heldout-pairs", "50",
    "--samples", "4", "--reason-tokens", "0", "--epochs", "2", "--batch-size", "8",
    "--lr", "1e-3", "--lora-r", "8", "--lora-layers", "10", "--max-line-chars", "120",
    "--max-context-tokens", "1024", "--max-train-seconds", "1500", "--compare-with", "",
    "--save-dtype", "bfloat16", "--seed", "0",
]  # fmt: skip
NEW_ENV = "wordcount"
SHIPPED_FILES = ("adapter_config.json", "adapter_model.safetensors", "judge_train.json")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rankgym(args: list[str], log: list[list[str]], capture: bool = False, run: bool = True) -> str:
    """Run ``rankgym ARGS`` (printed first, recorded in ``log``); returns stdout if captured.

    ``run=False`` only records it (its output is already in the work directory)."""
    cmd = ["rankgym", *args]
    log.append(cmd)
    if not run:
        return ""
    print("+ " + " ".join(cmd), flush=True)
    out = subprocess.run([sys.executable, "-m", "rankgym", *args], check=True, text=True,
                         stdout=subprocess.PIPE if capture else None)  # fmt: skip
    return out.stdout if capture else ""


def short(env: str) -> str:
    return env.split("/")[1].split("-")[0]


def build_data(work: Path, log: list[list[str]]) -> list[Path]:
    stores = []
    for env in ENVS:
        store = work / f"{short(env)}.db"
        done = work / f"{short(env)}.done"
        todo = not done.is_file()
        if todo and store.exists():
            store.unlink()
        rankgym(["rollout", "--env", env, "--policy", SCRIPTED, "--tasks", "120",
                 "--group-size", "4", "--store", str(store), "--run", "scripted",
                 "--seed", "1", "--quiet", "--json"], log, capture=True, run=todo)  # fmt: skip
        rankgym(["rollout", "--env", env, "--policy", "embedded", "--tasks", "60",
                 "--group-size", "2", "--store", str(store), "--run", "base",
                 "--seed", "2", "--quiet", "--json"], log, capture=True, run=todo)  # fmt: skip
        if todo:
            done.write_text("ok")
        stores.append(store)
    return stores


def build_sft(work: Path, log: list[list[str]]) -> Path:
    out = work / "sft"
    todo = not (out / "adapter_model.safetensors").is_file()
    rankgym(["sft", "--env", "rankgym/ToolUse-v0", "--env-kwargs", SFT_KWARGS,
             "--steps", "16", "--batch-size", "8", "--lr", "4e-4", "--seed", "0",
             "--out", str(out), "--quiet", "--json"], log, capture=True, run=todo)  # fmt: skip
    return out


GRPO_STEPS = 4


def grpo_config(work: Path, sft: Path) -> str:
    """The demo's GRPO settings (hard ToolUse, groups of 6) from the SFT adapter, verifier
    reward only: a short run whose stored groups are the GRPO policy's own trajectories."""
    return f"""name = "judge-data-grpo"
seed = 0
steps = {GRPO_STEPS}
out_dir = "{work / "grpo"}"

[env]
id = "rankgym/ToolUse-v0"
kwargs = {{ difficulty = "hard", families = ["lookup", "units", "dates"] }}
tasks_per_step = 3
group_size = 6
max_turns = 4
stratify = "family"

[policy]
model = "embedded"
adapter = "{sft}"
max_new_tokens = 64
temperature = 0.7

[reward]
kind = "verifiable"
scale_rewards = "batch"

[loss]
type = "dapo"

[optim]
lr = 1e-4
micro_batch_size = 2
"""


def build_grpo(work: Path, sft: Path, log: list[list[str]]) -> Path:
    """A short GRPO run from the SFT adapter; its store holds the GRPO policy's groups."""
    cfg = work / "grpo.toml"
    store = work / "grpo" / "store.db"
    done = work / "grpo.done"
    if not done.is_file():
        cfg.write_text(grpo_config(work, sft))
    log.append([f"(grpo.toml: the demo's GRPO section, {GRPO_STEPS} steps, reward.kind = "
                '"verifiable", policy.adapter = the SFT adapter)'])  # fmt: skip
    rankgym(["train", "--config", str(cfg), "--force", "--quiet", "--json"], log, capture=True,
            run=not done.is_file())  # fmt: skip
    done.write_text("ok")
    return store


def train(work: Path, stores: list[Path], sft: Path, log: list[list[str]]) -> dict[str, Any]:
    out = work / "judge"
    report = out / "report.json"
    grpo = work.joinpath(*POLICY_STORES["grpo"])
    args = ["judge-train", *[a for s in stores for a in ("--store", str(s))],
            "--prefer-store", str(grpo), "--rollout-adapter", str(sft), "--out", str(out),
            *JUDGE_TRAIN_FLAGS, "--json"]  # fmt: skip
    rankgym(args, log, capture=True, run=not report.is_file())
    return json.loads(report.read_text())


NEW_ENV_CHECK = """
import sys
sys.path.insert(0, {pkg!r})
from {name}.env import register_envs
register_envs()
from rankgym.cli import main
sys.exit(main({argv!r}))
"""


MORE_WORDS = ["lemon", "mango", "nectarine", "orange", "papaya", "quince", "raspberry",
              "strawberry", "tangerine", "watermelon", "apricot", "blueberry", "coconut",
              "durian", "guava", "lime"]  # fmt: skip


def grow_scaffold(env_py: Path) -> None:
    """What a user does first with the scaffold (its README: edit ``tasks()``): more tasks. Its
    8 words (6 train, 2 test) become 24, the last 8 of them the test split."""
    text = env_py.read_text()
    old_words = (
        'WORDS = ["apple", "banana", "cherry", "dragonfruit", "elderberry", "fig", "grape", "kiwi"]'
    )
    old_split = 'words = WORDS[:6] if split == "train" else WORDS[6:]'
    if old_words not in text or old_split not in text:
        raise SystemExit(f"{env_py}: the scaffold changed; update grow_scaffold()")
    words = ["apple", "banana", "cherry", "dragonfruit", "elderberry", "fig", *MORE_WORDS, "grape", "kiwi"]  # fmt: skip
    text = text.replace(old_words, f"WORDS = {words!r}")
    text = text.replace(old_split, 'words = WORDS[:-8] if split == "train" else WORDS[-8:]')
    env_py.write_text(text)


def check(work: Path, judge: str, log: list[list[str]]) -> dict[str, Any]:
    """``judge-check --split test`` on each env and the scaffold, the five in parallel (one
    store each); a finished check's JSON is reused."""
    pkg = work / "newenv" / NEW_ENV
    if not pkg.is_dir():
        rankgym(["new-env", NEW_ENV, "--dir", str(work / "newenv")], log)
        grow_scaffold(pkg / NEW_ENV / "env.py")
    log.append([f"(the scaffold's word list grown to {len(MORE_WORDS) + 8} words, 8 in test)"])
    names = {env: short(env) for env in ENVS}
    names[f"{NEW_ENV}/{NEW_ENV.capitalize()}-v0"] = NEW_ENV
    running = {}
    for env, name in names.items():
        path = work / f"check-{name}.json"
        argv = ["judge-check", "--env", env, "--judge", judge, "--split", "test", "--groups", "8",
                "--store", str(work / f"check-{name}.db"), "--json"]  # fmt: skip
        if name == NEW_ENV:  # not installed: registered in the checking process
            log.append(["rankgym", *argv, f"(the {NEW_ENV} scaffold registered in-process)"])
            cmd = [
                sys.executable,
                "-c",
                NEW_ENV_CHECK.format(pkg=str(pkg), name=NEW_ENV, argv=argv),
            ]
        else:
            log.append(["rankgym", *argv])
            cmd = [sys.executable, "-m", "rankgym", *argv]
        if not path.is_file():
            print("+ rankgym " + " ".join(argv), flush=True)
            running[path] = subprocess.Popen(cmd, stdout=path.with_suffix(".tmp").open("w"))
    for path, proc in running.items():
        if proc.wait() != 0:
            raise SystemExit(f"{path.stem} failed (exit {proc.returncode})")
        path.with_suffix(".tmp").replace(path)
    results = {env: last_json(work / f"check-{name}.json") for env, name in names.items()}
    results[f"{NEW_ENV} (rankgym new-env scaffold)"] = results.pop(
        f"{NEW_ENV}/{NEW_ENV.capitalize()}-v0"
    )
    return results


POLICY_STORES = {"sft": ("judge", "data", "rollout.db"), "grpo": ("grpo", "store.db")}
"""The policy's own groups: the SFT adapter's judge-split rollout and the GRPO run's groups."""


def policy_heldout(work: Path, stores: list[Path], judge: Path) -> dict[str, Any]:
    """The judge on held-out pairs (tasks it never trained on) whose two trajectories both come
    from the SFT or the GRPO policy: pairwise accuracy (both orders, bootstrap CI over pairs),
    how often the longer trajectory wins, and how often the judge picks the longer one.

    The pairs are rebuilt exactly as ``judge-train`` built them (same stores, flags and seed),
    uncapped, so every held-out policy pair counts."""
    import random

    from rankgym.judges.judge_compare import pair_group
    from rankgym.judges.judge_data import build_dataset, visible_length
    from rankgym.judges.pair_judge import model_scorer, score_pairs
    from rankgym.judges.prompt import build_prompt, default_rubric
    from rankgym.model import load_embedded
    from rankgym.store import Store

    flags = dict(zip(JUDGE_TRAIN_FLAGS[::2], JUDGE_TRAIN_FLAGS[1::2], strict=True))
    paths = [*map(str, stores), str(work.joinpath(*POLICY_STORES["sft"]))]
    opened = {s: Store(s, readonly=True) for s in paths}
    try:
        ds = build_dataset(opened, 0.3, 0.5, 4, True, int(flags["--seed"]))
        kinds: dict[str, str] = {}
        for kind, parts in POLICY_STORES.items():
            s = opened[str(work.joinpath(*parts))]
            for gid in s.group_ids():
                for t in s.get_group(gid).trajectories:
                    kinds[t.content_hash()] = kind
    finally:
        for s in opened.values():
            s.close()

    def kind_of(p: Any) -> str | None:
        a, b = kinds.get(p.winner.content_hash()), kinds.get(p.loser.content_hash())
        return a if a is not None and a == b else ("mixed" if a and b else None)

    from peft import PeftModel

    base, tok = load_embedded()
    lm = PeftModel.from_pretrained(base, str(judge)).merge_and_unload().eval()
    chars = int(flags["--max-line-chars"])
    scorer = model_scorer(lm, tok)
    out: dict[str, Any] = {}
    for split, pairs in (("heldout", ds.heldout), ("train", ds.train)):
        rows = []
        for p in pairs:
            k = kind_of(p)
            if k is None:
                continue
            row = {"kind": k, "longer_wins": 0.5, "judge_picks_longer": 0.5, "correct": None}
            lw, ll = visible_length(p.winner), visible_length(p.loser)
            if lw != ll:
                row["longer_wins"] = float(lw > ll)
            if split == "heldout":
                prompt = build_prompt(pair_group(p), default_rubric())
                scores, _ = score_pairs(scorer, prompt.messages, list(prompt.labels), chars)
                by_id = {prompt.labels[lab]: v for lab, v in scores.items()}
                w, lo = by_id[p.winner.id], by_id[p.loser.id]
                row["correct"] = 1.0 if w > lo else 0.5 if w == lo else 0.0
                if lw != ll:
                    picks_winner = row["correct"]
                    row["judge_picks_longer"] = picks_winner if lw > ll else 1.0 - picks_winner
            rows.append(row)
        summary: dict[str, Any] = {}
        for k in ("sft", "grpo", "mixed", "all"):
            sel = [r for r in rows if k == "all" or r["kind"] == k]
            if not sel:
                continue
            cell: dict[str, Any] = {"pairs": len(sel), "longer_wins": mean([r["longer_wins"] for r in sel])}  # fmt: skip
            if split == "heldout":
                acc = [r["correct"] for r in sel]
                rng = random.Random(0)
                boots = sorted(mean(rng.choices(acc, k=len(acc))) for _ in range(2000))
                cell.update(pairwise_accuracy=mean(acc), pairwise_ci=[boots[49], boots[1949]],
                            judge_picks_longer=mean([r["judge_picks_longer"] for r in sel]))  # fmt: skip
            summary[k] = cell
        out[split] = summary
    return out


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def last_json(path: Path) -> dict[str, Any]:
    """The JSON object on the last line of a ``--json`` command's output."""
    return json.loads(path.read_text().strip().splitlines()[-1])


def headline(rep: dict[str, Any]) -> dict[str, Any]:
    """tau, pairwise, position consistency (value + CI) of a judge-check report."""
    out = {}
    for k in ("kendall_tau", "pairwise_accuracy", "position_consistency", "top1"):
        v = rep.get(k) or {}
        out[k] = {"value": v.get("value"), "ci_low": v.get("ci_low"), "ci_high": v.get("ci_high")}
    out["can_judge"] = rep.get("can_judge")
    out["judged_groups"] = rep.get("judged")
    return out


def ship(work: Path, dest: Path, report: dict[str, Any], checks: dict[str, Any],
         log: list[list[str]], seconds: float, note: str = "",
         policy: dict[str, Any] | None = None) -> None:  # fmt: skip
    adapter = work / "judge" / "adapter"
    dest.mkdir(parents=True, exist_ok=True)
    for f in SHIPPED_FILES:
        shutil.copyfile(adapter / f, dest / f)
    data = work / "judge" / "data"
    manifest = {
        "what": "the default judge served as local/smollm2: a pairwise LoRA on SmolLM2-135M-Instruct",
        "rebuild": "make default-judge",
        "note": note,
        "commands": [" ".join(c) for c in log],
        "files": {f: sha256(dest / f) for f in SHIPPED_FILES},
        "data": {f.name: sha256(f) for f in sorted(data.glob("*.jsonl"))},
        "dataset": json.loads((data / "dataset.json").read_text()),
        "train": {
            k: report.get(k)
            for k in (
                "train_pairs",
                "heldout_pairs",
                "train_presentations",
                "skipped_too_long",
                "train_steps",
                "planned_steps",
                "last10_train_accuracy",
                "seconds",
                "threads",
            )
        },  # fmt: skip
        "heldout_pairs": (report.get("comparison") or {}).get("judges"),
        "judge_check_test_split": {env: headline(r) for env, r in checks.items()},
        "policy_pairs": policy,
        "build_seconds": round(seconds),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    print(f"shipped {dest} ({', '.join(SHIPPED_FILES)} + manifest.json)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/rankgym-default-judge", help="work directory (resumable)")  # fmt: skip
    ap.add_argument("--ship", metavar="DIR", help="copy the adapter and write manifest.json here")
    ap.add_argument("--note", default="", help="a remark recorded in the manifest")
    ap.add_argument("--stop-after", choices=("train",), help="stop once the judge is trained")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    log: list[list[str]] = []
    stores = build_data(work, log)
    sft = build_sft(work, log)
    stores.append(build_grpo(work, sft, log))
    report = train(work, stores, sft, log)
    if args.stop_after == "train":
        return 0
    checks = check(work, f"local/smollm2@{work / 'judge' / 'adapter'}", log)
    for env, rep in checks.items():
        h = headline(rep)
        print(env, json.dumps({k: v["value"] if isinstance(v, dict) else v for k, v in h.items()}))
    policy_path = work / "policy-pairs.json"
    if not policy_path.is_file():
        policy_path.write_text(json.dumps(policy_heldout(work, stores, work / "judge" / "adapter")))
    policy = json.loads(policy_path.read_text())
    print("policy pairs", json.dumps(policy))
    if args.ship:
        ship(work, Path(args.ship), report, checks, log, time.perf_counter() - t0, args.note,
             policy)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
