PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed

.PHONY: demo test check lint docs dist bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

## the runtime alone (make demo): no test, lint or docs tools in an environment an operator may reuse
$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME)

## the runtime with the dev and docs extras (make test, docs, lint, bench, dist)
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $(RUNTIME) $(STAMP)

## make demo: create the environment if needed (the runtime only), release the embedded Adult data
## (epsilon = 1).
demo: $(RUNTIME)
	$(BIN)/dprelease demo --out releases

## make test: create the environment if needed, lint and type-check, build the docs, and run the test suite
## in two tiers at once: the deploy and install tiers (real Prefect servers, workers and a fresh venv: they
## mostly wait on them) and the few tests over a minute of CPU (long) in the background, everything else in
## the foreground; both must pass.
test: $(STAMP) docs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	@mkdir -p build
	@$(BIN)/python -m pytest -m "deploy or install or long" -p no:cacheprovider --durations=15 \
		> build/tier-deploy.log 2>&1 & servers=$$!; \
	$(BIN)/python -m pytest -m "not deploy and not install and not long" --durations=40; rest=$$?; \
	wait $$servers; tier=$$?; \
	echo "---- the deploy and install tiers (build/tier-deploy.log) ----"; cat build/tier-deploy.log; \
	test $$rest -eq 0 && test $$tier -eq 0

## make check: the inner loop (under 3 CPU-minutes): lint, type-check, and the unit tier: every test that
## imports neither Prefect nor GX (tests/conftest.py skips a module that does, so the tier is that by
## construction), without the statistical audits (slow), the property tests at scale (property) and the
## tiers that start servers (e2e, deploy, install, long).
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	DPRELEASE_UNIT=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
		-m "not slow and not property and not e2e and not deploy and not install and not long"

## make docs: the documentation site in build/site; every warning (a broken link or anchor) is an error.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

## make dist: the wheel and sdist of the last commit in dist/, built from a clean export (git archive),
## never from the working tree, whose build/ may hold stale modules.
dist: $(STAMP)
	rm -rf dist && tmp=$$(mktemp -d) && git archive HEAD | tar -x -C $$tmp && \
	$(BIN)/python -m build --outdir dist $$tmp && rm -rf $$tmp

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

## make bench: the benchmarks behind BENCHMARKS.md (not part of make test).
bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) releases dist .pytest_cache
