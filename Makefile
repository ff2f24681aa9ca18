# Set-up and entry points; the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install install-dev bench clean

$(VENV)/.installed-all: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed-all
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed-all

install-dev: $(VENV)/.installed-dev

# The main job, offline: a guided run of the demo agent, then the quickstart notebook executed in a real kernel.
demo: install
	$(BIN)/acp-notebook tour
	$(BIN)/python scripts/run-notebook.py notebooks/quickstart.ipynb
	@echo "Executed notebook: notebooks/quickstart.out.ipynb (open it in JupyterLab: $(BIN)/jupyter lab)"

# Everything the tests need (Debian's chromium, the pinned npm agents), then the whole suite.
test: install-dev
	bash scripts/install-test-deps.sh
	bash scripts/install-agents.sh
	$(BIN)/python -m pytest

bench: install-dev
	$(BIN)/python bench/proxy_latency.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache notebooks/*.out.ipynb
