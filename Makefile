# Set-up and entry points; the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

# Python's bytecode caches, even where the environment turns them off (many container images set
# PYTHONDONTWRITEBYTECODE): without them every agent, proxy and kernel a test starts compiles the package
# from source, and pytest rewrites the asserts of every test module again on every run.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-loaded test-suite test-quick test-sdk1 screenshots recordings install install-dev bench bench-quick clean

# The SDK's 1.x line, tested beside the 0.12.x line the package installs by default.
SDK1 := agent-client-protocol==1.0.0rc3
SDK1_DIR := $(VENV)/sdk1

# An editable install leaves out the package's data files, so the saving server extension is enabled by
# copying its config into the venv. (A comment here, not in the recipe: make would print it, and a
# person reading `make demo` would take "by hand" as something left for them to do.)
$(VENV)/.installed-all: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]'
	mkdir -p $(VENV)/etc/jupyter/jupyter_server_config.d
	cp jupyter-config/jupyter_server_config.d/acp_notebook.json $(VENV)/etc/jupyter/jupyter_server_config.d/
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed-all
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed-all

install-dev: $(VENV)/.installed-dev

# The main job, offline: a guided run of the demo agent, then the quickstart notebook executed in a real kernel
# (its kernel shut down at the end; the demo sessions of both kept in temporary directories). JupyterLab
# comes with the [all] extra that `install` installs, so the command printed last works as it is.
demo: install
	$(BIN)/acp-notebook tour
	$(BIN)/python scripts/run-notebook.py notebooks/quickstart.ipynb
	@echo "Open it in JupyterLab: $(BIN)/jupyter lab notebooks/quickstart.out.ipynb"

# pytest-xdist workers for the whole suite. Its tests wait on kernels, JupyterLab, agents and the model server
# about a third of the time: on a 2-core machine three workers, with the SDK 1.x line running beside them, keep
# both cores busy. tests/conftest.py keeps each module (and the browser package, and the modules that start Ray) on
# one worker, and hands the longest of those units out first.
TEST_WORKERS ?= 3
PARALLEL := -n $(TEST_WORKERS) --dist loadfile

# Everything the tests need (Debian's chromium, the pinned npm agents), then the whole suite and the SDK 1.x
# line at the same time; make prints each one's output when it ends.
test: install-dev $(SDK1_DIR)/.installed
	bash scripts/install-test-deps.sh
	bash scripts/install-agents.sh
	$(MAKE) --no-print-directory -j2 --output-sync=target test-suite test-sdk1

# `make test` on a machine kept busy by LOAD (default 2) busy loops: races show that an idle machine hides.
test-loaded:
	bash scripts/test-under-load.sh

# The whole suite on the SDK line the package installs (half of `make test`).
test-suite: install-dev
	$(BIN)/python -m pytest $(PARALLEL)

# The edit-test loop (see docs/DEVELOPING.md): no browser, interop, kernel or slow tests; spread per test. Three
# workers, not four: each spends about 5 s of CPU collecting the suite, more than a fourth one gains on 2 cores.
test-quick: install-dev
	$(BIN)/python -m pytest -p no:cacheprovider -q -n 3 --durations=5 \
		-m "not browser and not interop and not kernel and not slow"

$(SDK1_DIR)/.installed: Makefile
	$(BIN)/python -m pip install --quiet --no-deps --upgrade --target $(SDK1_DIR) '$(SDK1)'
	touch $@

# The client, proxy, demo agent and record/replay suites again on the SDK's 1.x line (it shadows the
# 0.12 line through PYTHONPATH, in the agent and proxy subprocesses too).
test-sdk1: install-dev $(SDK1_DIR)/.installed
	PYTHONPATH=$(CURDIR)/$(SDK1_DIR) $(BIN)/python -m pytest -p no:cacheprovider -q -n 2 --dist loadfile \
		tests/test_client.py tests/test_client_protocol.py tests/test_proxy*.py tests/test_demo_*.py tests/test_record.py \
		tests/test_recordings.py tests/test_startup.py

# The README's screenshots (docs/img/), refreshed on purpose: the browser tests write them there
# only when asked (a plain `make test` leaves them in the ignored tests/browser/screenshots/).
screenshots: install-dev
	bash scripts/install-test-deps.sh
	ACPNB_SCREENSHOTS=$(CURDIR)/docs/img $(BIN)/python -m pytest tests/browser -p no:cacheprovider
	@echo "Refreshed docs/img/: review with git diff --stat docs/img before committing"

# The recordings of the real agents in notebooks/recordings/, made again (after bumping a pinned agent).
recordings: install-dev
	bash scripts/install-agents.sh
	$(BIN)/python tests/interop/record_sessions.py
	$(BIN)/python tests/interop/record_sessions.py --kernel

# Every benchmark of bench/ (about 10 minutes): bench/results.json and the table in bench/README.md.
# BENCH_ONLY=client,proxy runs a subset and updates just those results.
bench: install-dev
	$(BIN)/python bench/run.py $(if $(BENCH_ONLY),--only $(BENCH_ONLY))

# The same with tiny sizes and one round (about a minute; what CI runs through tests/test_bench.py):
# checks that every benchmark still runs, writes to a temporary file, leaves the recorded results alone.
bench-quick: install-dev
	$(BIN)/python bench/run.py --quick

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache notebooks/*.out.ipynb
