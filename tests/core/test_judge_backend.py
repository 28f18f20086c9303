"""The judge backend object: one parse of a model string answers every caller's question."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rankgym.judge_backend import LOCAL_PREFIX, LocalBackend, RemoteBackend, parse_model
from rankgym.judges.prompt import exact_token_counts
from rankgym.judges.spec import default_spec, missing_credentials, spec_from_options


def test_a_local_model_runs_in_process_free_and_without_credentials():
    b = parse_model("local/smollm2@runs/judge/adapter")
    assert isinstance(b, LocalBackend) and b.is_local and b.in_process and b.free
    assert not b.needs_credentials
    assert (b.provider, b.name, b.adapter) == ("local", "smollm2@runs/judge/adapter", "runs/judge/adapter")  # fmt: skip
    assert parse_model("local/smollm2-yesno").adapter is None


def test_a_provider_model_needs_credentials_and_names_its_provider():
    b = parse_model("openai/gpt-4.1-mini")
    assert isinstance(b, RemoteBackend) and not (b.is_local or b.in_process or b.free)
    assert b.needs_credentials and b.provider == "openai" and b.exact_token_counts
    assert not parse_model("ollama/qwen3:8b").exact_token_counts
    assert parse_model("gpt-4o").provider == "" and parse_model("gpt-4o").exact_token_counts


def test_specs_take_their_backends_defaults_as_before():
    local, remote = default_spec("local/smollm2"), default_spec("openai/gpt-4.1-mini")
    assert (local.context_window, local.max_tokens) == (8192, 512)
    assert (remote.context_window, remote.max_tokens) == (None, 2048)
    assert missing_credentials(local) == []
    assert spec_from_options("local/smollm2", context_window=600).context_window == 600
    assert exact_token_counts("openai/gpt-4.1-mini") and not exact_token_counts("ollama/m")


@given(st.text(max_size=40))
def test_any_model_string_parses_and_only_local_prefixed_ones_are_local(text):
    for model in (text, LOCAL_PREFIX + text):
        b = parse_model(model)
        assert b.is_local == model.startswith(LOCAL_PREFIX) and b.model == model
        if isinstance(b, LocalBackend):
            assert LOCAL_PREFIX + b.name == model
            assert b.adapter is None or b.name.endswith("@" + b.adapter)
        else:
            assert b.provider == (model.split("/", 1)[0] if "/" in model else "")


def test_only_a_local_judge_with_an_adapter_adds_its_fingerprint_to_the_spec_hash(tmp_path):
    assert parse_model("openai/gpt-4.1-mini@x").spec_hash_fields() == {}
    assert parse_model("local/smollm2-yesno").spec_hash_fields() == {}  # serves no adapter
    assert parse_model("local/smollm2@pairwise").fingerprint == "pairwise"
    missing = parse_model(f"local/smollm2@{tmp_path}")
    assert missing.spec_hash_fields() == {"adapter": f"missing:{tmp_path.resolve()}"}
    a, b = default_spec(f"local/smollm2@{tmp_path}"), default_spec("local/smollm2@pairwise")
    assert a.spec_hash != b.spec_hash
