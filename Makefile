# opencode-brain: `make run` serves over stdio, `make test` runs lint + tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install run test lint bench bench-quick clean

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
	$(BIN)/mypy brain config.py mcp_server.py mcp_surface tools bench

# Two workers (pytest-xdist): much of the suite waits on child processes and kill -9 recovery,
# so two cores run it in ~2/3 of the serial time. PYTEST_WORKERS=0 runs it serially.
PYTEST_WORKERS ?= 2
test: lint
	$(BIN)/pytest -q -x -n $(PYTEST_WORKERS) --durations=15

bench: install
	$(BIN)/python -m bench $(BENCH_ARGS)

bench-quick: install
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
