# The two commands a newcomer needs: `make reproduce` and `make test`.
# Each sets up what it needs (virtual environment, packages, data) idempotently.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PRESET ?= full
# The workflow (workflow/Snakefile, settings in config/config.yaml): the CORES it may use (all, or a
# number); THREADS per notebook (all: each runs on every core, one after another, as the reports were
# made; N: side by side on N threads each); TARGET: all (the notebooks and bench_reproduce), reports
# (and every report script a CPU reruns), or one rule (a notebook's name, a report id).
CORES ?= all
THREADS ?= all
TARGET ?= all
SNAKEMAKE = $(VENV)/bin/snakemake --snakefile workflow/Snakefile --cores $(CORES)
CONFIG = --config preset=$(PRESET) threads=$(THREADS)
# `make -n reproduce` (or resume, refresh) runs snakemake's dry run: what would rerun, and why.
DRY = $(if $(findstring n,$(firstword -$(MAKEFLAGS))),--dry-run)
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
SCRIPTS := workflow/scripts

.PHONY: help venv data browser format test reproduce resume refresh bench bench-penalty bench-seeds gpu-check index strip notebooks clean-runs clean

help:
	@echo "make reproduce   regenerate reports/ from every notebook (PRESET=full by default)"
	@echo "make resume      finish an interrupted make reproduce, resuming from its checkpoints"
	@echo "make refresh     rerun only the notebooks whose reports or executed copies are stale (make index says why)"
	@echo "make -n reproduce, make -n refresh: what would rerun, and why (snakemake's dry run); CORES=all by default"
	@echo "make test        run the library tests and execute every notebook on its small preset"
	@echo "make format      fix lint findings ruff can fix and format the code (make test checks both)"
	@echo "make clean       remove every run artefact (runs/: checkpoints, caches, small-preset reports, locks)"

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is needed (the default word vectors need it), found " + sys.version)'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing packages into $(VENV) (first time: a few minutes)"
	@$(PY) -m pip install -q -e '.[dev]' 2>&1 | { grep -v "^WARNING: Location" || true; }
	@$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $(STAMP)

venv: $(STAMP)

data: $(STAMP)
	@$(PY) -m orderlib.setup_data

# ruff: fix what it can and format (make test checks both, without changing files).
format: $(STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# Every step runs even when one fails (workflow/scripts/run_tests.py); checkpoints and caches go to a
# fresh runs/test-* folder, removed at the end (KEEP_RUNS=1 keeps it), and the disk it took is reported.
test: data browser
	ORDERLIB_REQUIRE_DATA=1 ORDERLIB_REQUIRE_FUSED=1 $(PY) $(SCRIPTS)/run_tests.py $(if $(KEEP_RUNS),--keep-runs)

# The notebooks from scratch (the papers' tables and figures) and their timings; the benchmarks are
# `make bench`. It marks every notebook out of date (runs/<preset>/reproduce.since: older outputs are
# rerun), so that `make resume` finishes an interrupted run.
reproduce: data clean-runs
	@mkdir -p runs/$(PRESET) && touch runs/$(PRESET)/reproduce.since
	+$(SNAKEMAKE) $(DRY) $(if $(DRY),--forceall) all $(CONFIG)
	$(PY) $(SCRIPTS)/report_index.py

# Headless Chromium for the JupyterLab test (apt where possible; the test skips without it).
browser: $(STAMP)
	@$(PY) $(SCRIPTS)/browser.py

# reports/README.md: one row per report id with its provenance and whether the code in this tree would
# still produce it (checked by `make test`: rerun it after changing code).
index: $(STAMP)
	$(PY) $(SCRIPTS)/report_index.py

# Benchmarks (benchmarks/README.md): measurements that are not tests (the optimizer choice for
# Table 1, the fused all-pairs penalty). Each writes a table under reports/tables/.
bench: bench-penalty bench-seeds
	$(PY) benchmarks/standing/hypernymy_optimizer.py
	$(PY) benchmarks/standing/word2gauss_loop.py
	$(PY) benchmarks/standing/concept_step.py
	$(PY) benchmarks/standing/huge_pages.py
	$(PY) benchmarks/standing/gru_step.py
	$(PY) benchmarks/standing/lanes.py
	$(PY) benchmarks/standing/compute_floor.py
	$(PY) benchmarks/standing/label_vectors.py
	$(PY) benchmarks/standing/eval_api.py

bench-penalty: data
	$(PY) benchmarks/standing/penalty.py

# Seed spread of the headline rows (full preset, 3 seeds each; resumable; each script's docstring says
# what a seed draws). Each writes a seed-spread table (per-seed rows, claims, verdicts) that the notebooks quote.
bench-seeds: data
	$(PY) benchmarks/seed_spread/devise_seed_spread.py
	$(PY) benchmarks/seed_spread/devise_pair_labels.py
	$(PY) benchmarks/seed_spread/retrieval_seed_spread.py
	$(PY) benchmarks/seed_spread/utama_seed_spread.py
	$(PY) benchmarks/seed_spread/sherlock_seed_spread.py
	$(PY) benchmarks/seed_spread/sherlock_table4_seed_spread.py

# On a machine with a CUDA device: the CUDA tests, bench_penalty's CUDA rows, a torchrun training on
# NCCL and notebooks 03-05 on the GPU (bench_reproduce_cuda); logs under runs/gpu_check/.
gpu-check: data
	bash benchmarks/standing/gpu_check.sh $(PY)

# Finish an interrupted `make reproduce` (or refresh): snakemake reruns the notebook it stopped in
# (--rerun-incomplete), resuming from its checkpoints, and every one still out of date.
resume: data
	+$(SNAKEMAKE) $(DRY) --rerun-incomplete $(TARGET) $(CONFIG)
	@echo "reports written to reports/ (full preset) or runs/<preset>/reports (others)"

# Rerun only what the code in this tree would no longer produce (reports/README.md, "Freshness"): the
# notebooks of stale reports and of stale executed copies, each resuming every model whose checkpoint
# key still matches, after any stale seed spread a notebook displays, and bench_reproduce after them;
# then list the stale benchmark reports (`make refresh TARGET=reports` reruns those too: hours).
refresh: data
	+$(SNAKEMAKE) $(DRY) $(TARGET) $(CONFIG)
	$(PY) $(SCRIPTS)/report_index.py
	@$(PY) $(SCRIPTS)/report_index.py --stale | { grep -v '\.ipynb$$' || true; } | sed 's/^/still stale, rerun by its script (reports\/README.md says why): /'

# Strip notebook outputs, keeping only cells marked NBVAL_CHECK_OUTPUT (nbval compares those).
strip: $(STAMP)
	$(PY) $(SCRIPTS)/strip_notebooks.py $(NOTEBOOKS)

# Re-execute every notebook on its small preset in place, then strip: refreshes the outputs
# that nbval compares. Run after editing a notebook, before committing.
notebooks: data
	@mkdir -p runs
	@for nb in $(NOTEBOOKS); do $(PY) -m papermill $$nb runs/.executed.ipynb && mv runs/.executed.ipynb $$nb || exit 1; done
	$(PY) $(SCRIPTS)/strip_notebooks.py $(NOTEBOOKS)

clean-runs:
	rm -rf runs/$(PRESET)/checkpoints

# Every run artefact: checkpoints, caches, locks, small-preset reports, executed notebooks.
# Keeps .venv/ and data/ (set-up) and reports/ (the committed tables).
clean:
	rm -rf runs
