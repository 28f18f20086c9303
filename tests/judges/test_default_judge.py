"""The shipped default judge: the files match their manifest, and ``local/smollm2`` serves them."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

from safetensors.torch import load_file

from rankgym.judges.local_provider import (
    ADAPTER_FILES,
    DEFAULT_JUDGE_DIR,
    adapter_fingerprint,
    default_judge_dir,
    resolve_ref,
)
from rankgym.types import JudgeSpec

ROOT = Path(__file__).resolve().parents[2]


def manifest() -> dict:
    return json.loads((DEFAULT_JUDGE_DIR / "manifest.json").read_text())


def test_every_shipped_file_matches_the_sha256_in_its_manifest():
    m = manifest()
    assert set(m["files"]) == set(ADAPTER_FILES)
    for name, digest in m["files"].items():
        assert hashlib.sha256((DEFAULT_JUDGE_DIR / name).read_bytes()).hexdigest() == digest, name


def test_the_manifest_says_how_it_was_built_on_what_data_and_how_it_did_held_out():
    m = manifest()
    assert m["rebuild"] == "make default-judge"
    assert any(c.startswith("rankgym judge-train ") for c in m["commands"])
    assert {"train.jsonl", "heldout.jsonl"} <= set(m["data"])
    assert all(len(h) == 64 for h in m["data"].values())
    for env in ("rankgym/ToolUse-v0", "rankgym/EmailSearch-v0", "rankgym/CodeTests-v0"):
        assert m["judge_check_test_split"][env]["kendall_tau"]["value"] is not None


def test_the_adapter_is_a_small_bf16_lora():
    cfg = json.loads((DEFAULT_JUDGE_DIR / "adapter_config.json").read_text())
    assert cfg["r"] <= 8
    weights = DEFAULT_JUDGE_DIR / "adapter_model.safetensors"
    assert weights.stat().st_size < 8 * 2**20
    import torch

    assert {t.dtype for t in load_file(str(weights)).values()} == {torch.bfloat16}


def test_local_smollm2_serves_the_shipped_adapter_and_the_yes_no_reader_keeps_its_own_name():
    assert default_judge_dir() == DEFAULT_JUDGE_DIR
    assert resolve_ref("smollm2") == str(DEFAULT_JUDGE_DIR) and resolve_ref("smollm2-yesno") is None
    shipped = adapter_fingerprint("local/smollm2")
    assert shipped and shipped == adapter_fingerprint(f"local/smollm2@{DEFAULT_JUDGE_DIR}")
    assert adapter_fingerprint("local/smollm2-yesno") is None
    a, b = (
        JudgeSpec(model=m, rubric="r").spec_hash for m in ("local/smollm2", "local/smollm2-yesno")
    )
    assert a != b  # scores cached for the yes/no reader are never reused for the shipped judge


def test_the_package_ships_the_judge_directory():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "default_judge/*" in data["package-data"]["rankgym.judges"]
