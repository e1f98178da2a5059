# opencode-brain: `make run` serves over stdio, `make test` runs lint + tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install run test lint browser bench bench-quick clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: the CPU wheel on this machine. A bare `torch` pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python mcp_server.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy brain config.py mcp_server.py mcp_surface webui tools bench

# The explorer's browser tests (tests/test_webui_browser.py) drive Debian's Chromium through
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

# Two workers (pytest-xdist): much of the suite waits on child processes and kill -9 recovery,
# so two cores run it in ~2/3 of the serial time. PYTEST_WORKERS=0 runs it serially.
PYTEST_WORKERS ?= 2
test: lint browser
	$(BIN)/pytest -q -x -n $(PYTEST_WORKERS) --durations=15

bench: install
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-quick: install
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
