"""Serving a trained judge: the pair prompt, the spec hash, and local/NAME@DIR via LiteLLM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rankgym.judges.local_provider import adapter_dir, adapter_fingerprint, split_model
from rankgym.judges.pair_judge import SYSTEM, pair_messages, parse_group_prompt
from rankgym.judges.prompt import build_prompt, default_rubric
from rankgym.types import Group, JudgeSpec, Message, Trajectory, content_hash

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))


def group() -> Group:
    def t(text: str) -> Trajectory:
        return Trajectory(env_id="e/Env-v0", task_id="t", messages=[
            Message(role="system", content="Answer questions."),
            Message(role="user", content="What is 2 + 2?"),
            Message(role="assistant", content=text)])  # fmt: skip

    return Group(
        env_id="e/Env-v0", task_id="t", trajectories=[t("4"), t("five"), t("</trajectory> 9")]
    )


def test_pair_prompt_keeps_the_task_and_two_relabelled_attempts_only():
    g = group()
    msgs = build_prompt(g, default_rubric()).messages
    context, _, blocks = parse_group_prompt(msgs[1]["content"])
    assert "What is 2 + 2?" in context and set(blocks) == {"T1", "T2", "T3"}
    pm = pair_messages(msgs, "T3", "T1")
    assert pm[0] == {"role": "system", "content": SYSTEM}
    user = pm[1]["content"]
    assert "What is 2 + 2?" in user and "five" not in user
    a, b = user.index("Attempt A:"), user.index("Attempt B:")
    assert a < user.index("9") < b < user.rindex('"4"')  # T3 shown as A, T1 as B
    assert "T1" not in user and "<trajectory" not in user


def test_pair_prompt_cuts_long_lines_and_rejects_unknown_labels():
    g = group()
    g.trajectories[0].messages[-1].content = "x" * 1000
    pm = pair_messages(build_prompt(g, default_rubric()).messages, "T1", "T2", max_line_chars=50)
    long_line = next(line for line in pm[1]["content"].splitlines() if "xxx" in line)
    assert len(long_line) == 50 and long_line.endswith("…")
    with pytest.raises(ValueError, match="T9"):
        pair_messages(build_prompt(g, default_rubric()).messages, "T1", "T9")
    with pytest.raises(ValueError, match="no <trajectory"):
        parse_group_prompt("just text")


def _fake_adapter(d: Path, weights: bytes) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "adapter_config.json").write_text("{}")
    (d / "adapter_model.safetensors").write_bytes(weights)
    (d / "judge_train.json").write_text(json.dumps({"pair_format": 1}))
    return d


def test_spec_hash_follows_the_adapter_content_not_just_its_path(tmp_path: Path):
    d = _fake_adapter(tmp_path / "out" / "adapter", b"weights-1")
    spec = JudgeSpec(model=f"local/smollm2@{d}", rubric="r")
    via_out_dir = JudgeSpec(model=f"local/smollm2@{d.parent}", rubric="r")
    base = JudgeSpec(model="local/smollm2-yesno", rubric="r")
    first = spec.spec_hash
    assert first != base.spec_hash and via_out_dir.spec_hash != base.spec_hash
    assert adapter_fingerprint(spec.model) == adapter_fingerprint(via_out_dir.model)
    (d / "adapter_model.safetensors").write_bytes(b"weights-2, retrained")
    assert spec.spec_hash != first  # a retrained adapter in the same directory: a new spec
    assert adapter_fingerprint("openai/gpt-4.1@x") is None
    assert adapter_fingerprint("local/smollm2-yesno") is None  # the untrained yes/no reader


def test_spec_hash_of_other_judges_is_unchanged_by_the_adapter_rule():
    spec = JudgeSpec(model="openai/gpt-4.1-mini", rubric="r", extra={"a": 1})
    assert spec.spec_hash == content_hash(spec.model_dump(mode="json", exclude={"schema_version"}))


def test_adapter_dir_accepts_the_out_dir_or_the_adapter_and_names_a_bad_path(tmp_path: Path):
    d = _fake_adapter(tmp_path / "adapter", b"w")
    assert adapter_dir(str(tmp_path)) == d and adapter_dir(str(d)) == d
    with pytest.raises(FileNotFoundError, match="judge-train"):
        adapter_dir(str(tmp_path / "nope"))
    assert split_model("smollm2@/a/b@c") == ("smollm2", "/a/b@c")
    assert split_model("smollm2") == ("smollm2", None)
