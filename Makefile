# pwf developer tasks. `make demo` and `make test` work on a fresh machine:
# each creates .venv with the machine's python3 and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
RUNTIME := $(VENV)/.installed-runtime
# The environments are made and filled by uv, fetched once with the machine's pip into
# .tools: it resolves and installs the dev extras in ~3 s where pip took ~20 s (ADR 0069).
UV_VERSION := 0.13.9
TOOLS := .tools
UV := $(TOOLS)/bin/uv
UV_PIP := $(UV) pip install --quiet --python $(BIN)/python
# pwf is installed as `pwf-host` (ADR 0073); an environment made while it was named `pwf`
# drops that name first, or both would claim the same files and the `pwf` command.
DROP_OLD_NAME := $(UV) pip uninstall --quiet --python $(BIN)/python pwf
# uv trusts the machine's certificate store, as pip does (PIP_CERT), not only its own roots.
export UV_NATIVE_TLS := 1
# Two pytest workers per core: many tests wait on processes, sockets and timers (ADR 0054);
# three per core cost 8% more CPU and wall once the timer waits were cut (ADR 0068).
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
BENCH_VENV := .venv-bench

.PHONY: install check static-checks suite test test-deep demo docs bench bench-scale artifacts reliability-report mutate clean

$(UV):
	$(PYTHON) -m venv --without-pip $(TOOLS)
	$(PYTHON) -m pip --python $(TOOLS)/bin/python install --quiet 'uv==$(UV_VERSION)'

$(BIN)/python: | $(UV)
	$(UV) venv --quiet --python $(PYTHON) $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(DROP_OLD_NAME)
	$(UV_PIP) -e '.[dev,web,postgres,metrics,docs,audit]'
	touch $(STAMP)

# `make demo` needs pwf, its runtime dependencies and the metrics extra (its served host
# prints its metrics); the dev tools come with `make test`.
# Its modules are compiled at install, as pip did: the demo starts pwf some seventy times.
$(RUNTIME): pyproject.toml | $(BIN)/python
	$(DROP_OLD_NAME)
	$(UV_PIP) --compile-bytecode -e '.[metrics]'
	touch $(RUNTIME)

install: $(STAMP)

# The static checks run beside the suite, which leaves a core idle while its tests wait on
# processes; make fails when either fails (pytest's exit code 5, no tests, included).
check: install
	@$(MAKE) --no-print-directory -j 2 static-checks suite

static-checks: install
	$(BIN)/ruff format --check src tests bench
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pwf dev export --check
	$(BIN)/mkdocs build --strict --site-dir $(VENV)/site

# The documentation site from docs/ into site/; --strict fails on a broken link or anchor
# (ADR 0082). Not -q: it hides the warnings that --strict counts.
docs: install
	$(BIN)/mkdocs build --strict

# A cold bytecode cache (a fresh clone) is filled by one collection first: otherwise every
# worker compiles the same modules and rewrites the same asserts at once (ADR 0064).
WARM := $(VENV)/pycache/.warm
warm = test -e $(WARM) || { mkdir -p $(VENV)/pycache; $(BIN)/pytest --collect-only -q >/dev/null 2>&1; touch $(WARM); }

suite: install
	@$(warm)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal

# The suite starts pwf some thousand times and each pytest worker rewrites every test
# module: compiled once into the venv, each start costs ~40% less CPU (ADR 0054).
suite test-deep: export PYTHONDONTWRITEBYTECODE =
suite test-deep: export PYTHONPYCACHEPREFIX = $(CURDIR)/$(VENV)/pycache

test: check

# The whole suite with the Hypothesis example counts the tests had before ADR 0049.
test-deep: install
	@$(warm)
	PWF_TEST_DEPTH=deep $(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal

demo: $(RUNTIME)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

# The benchmarks run on a regular (non-editable) install with compiled bytecode,
# as users have pwf, plus the `bench` extra (the eventsourcing library) and the `metrics`
# extra (bench/bench_metrics.py serves --metrics).
bench:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip uninstall -qq --yes pwf
	$(BENCH_VENV)/bin/python -m pip install --quiet '.[bench,metrics]'
	$(BENCH_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall .
	$(BENCH_VENV)/bin/python bench/run.py $(BENCH_ARGS)

# Every read and write path timed on generated logs of growing size (ADR 0077), on the
# same regular install as `make bench`; the logs are cached in .bench-cache by seed and size.
# `make bench-scale SIZES=10000,100000` for a quicker run.
SIZES ?= 10000,100000,1000000
bench-scale:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet '.[bench,web]'
	$(BENCH_VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall .
	$(BENCH_VENV)/bin/python bench/bench_scale.py --sizes $(SIZES) $(SCALE_ARGS)

# The reliability suite alone, rewriting docs/reliability.md from this whole run.
reliability-report: install
	PWF_RELIABILITY_REPORT=1 $(BIN)/pytest tests/reliability

# Mutation testing, a habit and not a gate (ADR 0046): prints the surviving mutants.
# `make mutate TARGETS="canonical chain"` runs some targets; MUTATE_ARGS="--fresh" starts over.
$(VENV)/.installed-mutate: pyproject.toml | $(STAMP)
	$(UV_PIP) -e '.[dev,web,postgres,metrics,docs,audit,mutate]'
	touch $@

mutate: $(VENV)/.installed-mutate
	$(BIN)/python scripts/mutate.py $(TARGETS) $(MUTATE_ARGS)

artifacts: install
	$(BIN)/pwf dev export

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache .hypothesis .mutate demo-state bench/out site
