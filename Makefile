# One entry point for every task; CI (.ci/run) runs the same targets a developer runs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.horismos-installed
HOST ?= 127.0.0.1
PORT ?= 8000

.DEFAULT_GOAL := help
.PHONY: help serve test deps lint typecheck pytest migrate openapi

help:
	@echo "make serve   install if needed, migrate ./horismos.db, serve on http://$(HOST):$(PORT)"
	@echo "make test    install if needed, then ruff, ruff format --check, mypy and pytest"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall only when pyproject.toml changed since the last install.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Everything the tests and the server need. Other tool chains add a prerequisite line here.
deps: $(STAMP) fhir-server/node_modules

# The Node FHIR test server (tests/support/fhir_server.py), pinned by its package-lock.json.
fhir-server/node_modules: fhir-server/package-lock.json
	cd fhir-server && npm ci --no-audit --no-fund
	touch $@

# Serving needs only the Python install; Node is for the FHIR test server of the suite.
migrate: $(STAMP)
	$(BIN)/horismos db upgrade

serve: migrate
	$(BIN)/horismos serve --host $(HOST) --port $(PORT)

lint: deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: deps
	$(BIN)/mypy

pytest: deps
	$(BIN)/pytest

test: lint typecheck pytest

openapi: $(STAMP)
	$(BIN)/horismos openapi
