# One place for the commands people and CI run. `make setup` is implied by the others.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
DB ?= chainrecall.db

.PHONY: setup serve demo test lint bench bench-quick fuzz clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,tokens,bench]'
	touch $@

serve: setup
	$(BIN)/chainrecall serve --db $(DB)

demo: setup
	$(BIN)/chainrecall demo --db $(DB)

test: setup
	$(PY) -m pytest -n 2 -q

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

# Speed and scale (docs/benchmarks.md), then recall quality and cost: LoCoMo (about 30 min),
# the official MCP memory server side by side (installs it from npm), the replay week.
bench: setup
	$(PY) -m benchmarks.run --full
	$(PY) -m benchmarks.locomo --full
	$(PY) -m benchmarks.peer_mcp --full
	$(PY) -m benchmarks.replay --full

# CI's smoke run: every benchmark at tiny sizes, reports under bench-out/ (docs/ untouched).
bench-quick: setup
	$(PY) -m benchmarks.run --quick
	$(PY) -m benchmarks.locomo --quick --doc bench-out/benchmarks-recall-quick.md
	$(PY) -m benchmarks.replay --quick --doc bench-out/benchmarks-replay-quick.md

# The long schemathesis run (the test suite runs a short one).
fuzz: setup
	CHAINRECALL_FUZZ_EXAMPLES=100 CHAINRECALL_FUZZ_PHASES=examples,coverage,fuzzing,stateful $(PY) -m pytest tests/test_fuzz.py -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
