# One place for the commands people and CI run. `make setup` is implied by the others.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
DB ?= chainrecall.db

.PHONY: setup serve demo test lint bench bench-quick clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,tokens,bench]'
	touch $@

serve: setup
	$(BIN)/chainrecall serve --db $(DB)

test: setup
	$(PY) -m pytest -n 2 -q

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

bench: setup
	$(PY) -m benchmarks.run --full

bench-quick: setup
	$(PY) -m benchmarks.run --quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
