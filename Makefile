# The two commands of the README's Quick start: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PORT ?= 17890
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
BENCH_ARGS ?=

.PHONY: run test lint unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

$(STAMP_RUN): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_TEST): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $@ $(STAMP_RUN)

run: $(STAMP_RUN)
	PORT=$(PORT) $(BIN)/busbar dev

lint: $(STAMP_TEST)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP_TEST)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache
