# One entry point for every task; CI (.ci/run) runs the same targets a developer runs.
#
# Installs come from lock files (requirements/*.txt: exact versions with hashes, made by uv):
#   requirements/runtime.txt  what `make serve` installs: the service and nothing else
#   requirements/dev.txt      what `make deps` / `make test` install: runtime + test and lint tools
#   requirements/build.txt    pip and setuptools, to build Horismos itself without fetching them
# To add or change a dependency: edit pyproject.toml ([project] dependencies for the service,
# [project.optional-dependencies] dev for tests and tools, population for Spark), then run `make lock` and commit
# pyproject.toml with the three lock files. `make lock` keeps every other pin as it is;
# `make lock-upgrade` moves every pin to the newest allowed version.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.horismos-runtime
DEV_STAMP := $(VENV)/.horismos-dev
LOCK_BUILD := requirements/build.txt
LOCK_RUNTIME := requirements/runtime.txt
LOCK_DEV := requirements/dev.txt
PIP_LOCKED := $(BIN)/python -m pip install --quiet --require-hashes --no-deps
# Horismos itself, from the tree, against what the locks installed (no resolution, no download).
PIP_SELF := $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
PIP_CHECK := $(BIN)/python -m pip check || { echo "the lock files do not satisfy pyproject.toml: run make lock" >&2; exit 1; }
UV_COMPILE := $(BIN)/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock"
HOST ?= 127.0.0.1
PORT ?= 8000

.DEFAULT_GOAL := help
.PHONY: help serve test test-deep deps lint typecheck pytest migrate openapi lock lock-upgrade bench terminology java

help:
	@echo "make serve   install the service if needed, migrate ./horismos.db, serve on http://$(HOST):$(PORT)"
	@echo "make test    install the service and its dev tools if needed, then ruff, ruff format --check, mypy and pytest"
	@echo "make test-deep  the same with ten times the property-test examples (a scheduled run)"
	@echo "make lock    re-lock requirements/*.txt after editing the dependencies in pyproject.toml"
	@echo "make terminology  fetch, check and index the HL7 Terminology package (serve and deps do it too)"
	@echo "make bench   the hook benchmark (bench/hooks.py; BENCH_ARGS=... passes options), installs wrk if missing"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Runtime only: no test, lint or type-checking tool. Reinstalls when a lock or pyproject changes.
$(RUNTIME_STAMP): pyproject.toml $(LOCK_BUILD) $(LOCK_RUNTIME) | $(BIN)/python
	$(PIP_LOCKED) -r $(LOCK_BUILD)
	$(PIP_LOCKED) -r $(LOCK_RUNTIME)
	$(PIP_SELF)
	$(PIP_CHECK)
	touch $@

# Runtime plus the dev tools (the dev lock pins every runtime package at the runtime lock's version).
$(DEV_STAMP): pyproject.toml $(LOCK_BUILD) $(LOCK_DEV) | $(BIN)/python
	$(PIP_LOCKED) -r $(LOCK_BUILD)
	$(PIP_LOCKED) -r $(LOCK_DEV)
	$(PIP_SELF)
	$(PIP_CHECK)
	touch $@ $(RUNTIME_STAMP)

# Everything the tests need. Other tool chains add a prerequisite here.
deps: $(DEV_STAMP) terminology fhir-server/node_modules tests/browser/node_modules /usr/bin/chromium java

# The HL7 Terminology package the service reads at run time (app/terminology), fetched with
# npm and checked against its pinned sha512 by scripts/install-terminology (a no-op once it is
# installed), then indexed so a process loads one small file (half a second, every time: the
# index always matches the package and the code that reads it).
TERMINOLOGY_DIR := terminology/packages
terminology: | $(BIN)/python
	scripts/install-terminology $(TERMINOLOGY_DIR)
	$(BIN)/python -m app.terminology build $(TERMINOLOGY_DIR)

# The Node FHIR test server (tests/support/fhir_server.py), pinned by its package-lock.json.
fhir-server/node_modules: fhir-server/package-lock.json
	cd fhir-server && npm ci --no-audit --no-fund
	touch $@

# axe-core, injected into pages by the browser tests, pinned by its package-lock.json.
tests/browser/node_modules: tests/browser/package-lock.json
	cd tests/browser && npm ci --no-audit --no-fund
	touch $@

# Debian's Chromium for the browser tests (Playwright drives it; it never downloads a browser).
/usr/bin/chromium:
	scripts/install-chromium

# a Java runtime for Spark (population runs); the script keeps one the machine has
java:
	scripts/install-java

# Serving needs the runtime install and the terminology package (npm fetches that package once);
# the Node test servers and Chromium are for the test suite.
migrate: $(RUNTIME_STAMP) terminology
	$(BIN)/horismos db upgrade

serve: migrate
	$(BIN)/horismos serve --host $(HOST) --port $(PORT)

lint: deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: deps
	$(BIN)/mypy

# The suite runs on every core (pytest-xdist: each worker has its own PostgreSQL database, SQLite
# files and FHIR test server) and ends with its 15 slowest tests, so a slow one is seen when it
# lands. PYTEST_ARGS=... replaces both (e.g. PYTEST_ARGS="-n 0 tests/cds" for one part, in order).
PYTEST_ARGS ?= -n auto --durations=15
pytest: deps
	$(BIN)/pytest $(PYTEST_ARGS)

test: lint typecheck pytest

# The same suite with ten times the property-test examples (tests/support/depth.py): for a
# scheduled run, not for every change.
test-deep:
	HORISMOS_TEST_DEEP=1 $(MAKE) test

openapi: $(RUNTIME_STAMP)
	$(BIN)/horismos openapi

# The hook benchmark needs wrk, Debian's native HTTP load generator (a Python one saturates
# before the service does). Installed through apt-get, as root or with sudo.
/usr/bin/wrk:
	$$([ "$$(id -u)" = 0 ] || echo sudo) apt-get update -qq
	$$([ "$$(id -u)" = 0 ] || echo sudo) apt-get install -y -qq wrk

bench: $(RUNTIME_STAMP) /usr/bin/wrk
	$(BIN)/python bench/hooks.py $(BENCH_ARGS)

# uv resolves for every platform at once (--universal) in well under a second; the pinned uv
# comes from the dev lock. Existing pins are kept unless lock-upgrade asks for newer ones.
$(BIN)/uv: | $(BIN)/python
	$(BIN)/python -m pip install --quiet "$$(grep -m1 '^uv==' $(LOCK_DEV) | cut -d' ' -f1)"

lock: $(BIN)/uv
	$(UV_COMPILE) $(LOCK_ARGS) requirements/build.in -o $(LOCK_BUILD)
	$(UV_COMPILE) $(LOCK_ARGS) pyproject.toml -o $(LOCK_RUNTIME)
	$(UV_COMPILE) $(LOCK_ARGS) pyproject.toml --extra dev --extra population -c $(LOCK_RUNTIME) -o $(LOCK_DEV)

lock-upgrade:
	$(MAKE) lock LOCK_ARGS=--upgrade
