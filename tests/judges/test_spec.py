"""One judge spec from user options, for the CLI flags and the train config's ``[judge]``."""

from __future__ import annotations

import pytest

from rankgym.errors import UserError
from rankgym.judges.spec import default_spec, spec_from_options

TRAIN_NAMES = {
    "judge": "judge.model",
    "rubric": "judge.rubric",
    "max_tokens": "judge.max_tokens",
    "context_window": "judge.context_window",
}


def test_options_give_the_same_spec_as_default_spec(tmp_path):
    rubric = tmp_path / "r.md"
    rubric.write_text("Prefer correct answers.", encoding="utf-8")
    got = spec_from_options(
        "openai/gpt-4.1-mini",
        rubric_file=str(rubric),
        seed=3,
        max_tokens=100,
        context_window=4000,
        api_base="http://127.0.0.1:1",
    )
    want = default_spec(
        "openai/gpt-4.1-mini",
        "Prefer correct answers.",
        seed=3,
        max_tokens=100,
        context_window=4000,
        extra={"api_base": "http://127.0.0.1:1"},
    )
    assert got.spec_hash == want.spec_hash


@pytest.mark.parametrize(("names", "typed"), [(None, "--rubric"), (TRAIN_NAMES, "judge.rubric")])
def test_a_bad_rubric_file_is_named_as_the_user_typed_it(tmp_path, names, typed):
    with pytest.raises(UserError, match=f"{typed}: file .* does not exist"):
        spec_from_options("local/smollm2", rubric_file=str(tmp_path / "nope.md"), names=names)
    empty = tmp_path / "empty.md"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(UserError, match=f"{typed}: file .* is empty"):
        spec_from_options("local/smollm2", rubric_file=str(empty), names=names)
    latin = tmp_path / "latin.md"
    latin.write_bytes("Préférez".encode("latin-1"))
    with pytest.raises(UserError, match=f"{typed}: file .* is not UTF-8 text"):
        spec_from_options("local/smollm2", rubric_file=str(latin), names=names)


def test_bad_model_and_budgets_name_the_option():
    with pytest.raises(UserError, match="judge.model 'gpt4' is not a LiteLLM model string"):
        spec_from_options("gpt4", names=TRAIN_NAMES)
    with pytest.raises(UserError, match="--max-tokens must be at least 1"):
        spec_from_options("local/smollm2", max_tokens=0)
    with pytest.raises(UserError, match="judge.context_window 100 leaves no room"):
        spec_from_options("local/smollm2", context_window=100, names=TRAIN_NAMES)


def test_the_shipped_judge_adapter_is_part_of_the_bare_local_judges_spec(tmp_path, monkeypatch):
    """``local/smollm2`` serves the shipped adapter: retraining it must not reuse cached scores,
    while the yes/no reader's spec does not depend on any adapter."""
    from rankgym import judge_adapter

    shipped = tmp_path / "default_judge"
    shipped.mkdir()
    for name in judge_adapter.ADAPTER_FILES:
        (shipped / name).write_text("{}", encoding="utf-8")
    monkeypatch.setattr(judge_adapter, "DEFAULT_JUDGE_DIR", shipped)
    first = default_spec("local/smollm2").spec_hash
    yesno = default_spec("local/smollm2-yesno").spec_hash
    (shipped / "adapter_model.safetensors").write_text("retrained", encoding="utf-8")
    assert default_spec("local/smollm2").spec_hash != first
    assert default_spec("local/smollm2-yesno").spec_hash == yesno
