# AgentMesh: the README's two commands are `make run` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: setup run test test-reliability soak check lint typecheck protolint protobreaking pytest bench eval eval-chat gen lock clean docs

## setup: virtualenv, pinned deps, generated contracts, embedded model, Redis (idempotent)
setup:
	@scripts/setup.sh

## run: set up if needed, then start the mesh on the embedded default (agentmesh up).
run: setup
	@$(BIN)/agentmesh up

## test: set up if needed, then lint, type-check, buf lint, buf breaking and the whole test suite
test: setup check pytest

check: lint typecheck protolint protobreaking

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

protolint:
	cd protos && ../$(BIN)/buf lint

## protobreaking: buf breaking against the contracts before their newest change (BUF_AGAINST=<ref> for another)
protobreaking:
	scripts/buf_breaking.sh

pytest:
	$(BIN)/pytest -q

## test-reliability: the chaos and interop suite on the mesh as real processes (also part of `make test`; RELIABILITY.md)
test-reliability: setup
	$(BIN)/pytest -q tests/reliability

## soak: 10 minutes of ~70% load on simulator replicas; RSS growth, descriptors, errors (SOAK_S=<seconds> for another length)
soak: setup
	$(PY) -m tests.support.soak --seconds $(or $(SOAK_S),600)

## bench: run the benchmark suite and rewrite its sections of BENCHMARKS.md (QUICK=1: under a minute, no vLLM)
bench: setup
	$(PY) -m loadtest.suite $(if $(QUICK),--quick,)

## eval: run the agent evaluation (dev + held-out, embedding vs llm tool selection) on vLLM and write EVAL.md
eval: setup
	$(PY) -m evals

## eval-chat: degenerate plain-chat answers per repetition penalty (dev chooses, then held-out) → a section of EVAL.md
eval-chat: setup
	$(PY) -m evals.chat --heldout-all --report EVAL.md

## docs: serve the docs site on http://127.0.0.1:8000, rebuilt on every change (`make test` builds it with --strict)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

## gen: regenerate the contracts from protos/
gen:
	$(PY) scripts/gen_protos.py --force

## lock: re-pin every dependency into requirements/lock.txt
lock:
	scripts/lock.sh

clean:
	rm -rf agentmesh .setup-stamps .mypy_cache .ruff_cache .pytest_cache
