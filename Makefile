# The two commands that matter: `make run` (the demo) and `make test` (the whole suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20
# Tests, the demo, benchmarks and synth never reach AWS: fake credentials, a fixed region.
# Not for deploy, which runs with the caller's own credentials (a profile must not be
# shadowed by fake keys).
OFFLINE := run test lint typecheck pytest unit bench synth iam-roles
$(OFFLINE): export AWS_ACCESS_KEY_ID ?= testing
$(OFFLINE): export AWS_SECRET_ACCESS_KEY ?= testing
$(OFFLINE): export AWS_DEFAULT_REGION ?= us-east-1
# `make deploy CDK_ARGS="-c clusterId=soca-prod ..."`; `make synth` shows a demo cluster.
CDK_ARGS ?=
SYNTH_ARGS ?= -c clusterId=demo

.PHONY: run test lint typecheck unit pytest bench synth deploy cfn-lint clean help iam-roles ec2-model

help:
	@echo "make run    - start the capacity emulator with the demo scenario and run the broker end to end"
	@echo "make test   - lint, type-check and run the whole test suite (unit, emulator, integration, infra)"
	@echo "make bench  - benchmarks against the emulator; writes bench/results.json"
	@echo "make synth  - synthesize the CDK app offline into cdk.out"
	@echo "make iam-roles - rewrite emulator/iam/roles.json (the functions' roles) from infra/"
	@echo "make ec2-model - rewrite the functions' trimmed EC2 API model from the installed botocore"
	@echo 'make deploy CDK_ARGS="-c clusterId=<id> ..." - deploy one broker with your credentials'

$(STAMP): pyproject.toml requirements-lock.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements-lock.txt -e ".[dev]"
	@touch $@

venv: $(STAMP)

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

run: $(STAMP)
	$(BIN)/python -m demo

test: $(STAMP) node_modules/.installed lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/vulture

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite in three sessions (and the few tests that must run alone), each with fresh workers: a worker's memory grows with the tests
# it runs (one session over the whole suite grew two workers past 8 GB each, near this
# machine's 24), and is given back between sessions. Every test file is in exactly one.
# Every session waits as well as computes (a real slurmctld's scheduling, subprocesses, servers
# on 127.0.0.1, the fault matrix's persistent throttles): two workers a core, so one test's
# wait is another's CPU, and worksteal, so no worker idles behind a slow one. The Slurm
# tests stay last: worksteal hands out contiguous quarters and steals from their ends, so the
# idle workers share them out at the end (first, one worker would run them all, one by one).
FAULT_MATRIX := tests/integration/test_fault_matrix.py
# Probes as processes of their own on real time, one SIGKILLed at a chosen line: the others'
# answers come within their Lambda budget only while the machine keeps up, so they run alone,
# after the sessions that load both cores.
ALONE := tests/integration/test_group_crash.py
CORES := $(shell nproc 2>/dev/null || echo 2)
WAITING := -n $(shell echo $$(( $(CORES) * 2 ))) --dist worksteal
pytest: $(STAMP) node_modules/.installed
	$(BIN)/pytest $(WAITING) tests/unit tests/emulator tests/infra tests/slurm
	$(BIN)/pytest $(WAITING) $(FAULT_MATRIX)
	$(BIN)/pytest $(WAITING) tests/integration --ignore=$(FAULT_MATRIX) --ignore=$(ALONE)
	$(BIN)/pytest -p no:xdist $(ALONE)

unit: $(STAMP)
	$(BIN)/pytest tests/unit

bench: $(STAMP)
	$(BIN)/python -m bench

# cdk.json runs `python3 app.py`: the virtualenv first on PATH gives it aws-cdk-lib.
synth: $(STAMP) node_modules/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" npx cdk synth --quiet $(SYNTH_ARGS)

# The functions' IAM roles as the emulator evaluates them offline (`capacity-broker local`):
# synthesized from infra/; tests/infra/test_emulated_roles.py fails when the file is stale.
# (Every synth compiles the functions' bytecode: node_modules has the CPython 3.14, Pyodide.)
iam-roles: $(STAMP) node_modules/.installed
	$(BIN)/python -m infra.emulated_roles

# EC2's API model as the functions' clients load it: botocore's own, trimmed to the operations
# the broker calls (functions/capacity_broker/adapters/ec2/operations.py) by infra/ec2_model.py;
# tests/infra/test_ec2_model.py fails when the file is stale (a new botocore pin, a new call).
ec2-model: $(STAMP)
	$(BIN)/python -m infra.ec2_model

deploy: $(STAMP) node_modules/.installed
	PATH="$(CURDIR)/$(BIN):$$PATH" npx cdk deploy $(CDK_ARGS)

clean:
	rm -rf cdk.out out .pytest_cache .mypy_cache .ruff_cache
