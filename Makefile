# agents-core: the two set-up commands are `make dev` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SAM_VENV := .venv-sam
SAM := $(SAM_VENV)/bin/sam
STAMP := $(VENV)/.installed
# Four pytest workers on two cores: the e2e tests spend much of their time waiting (a bounded wait, a Runtime's
# or exec-server's reconnection, a browser, a stack starting), so more workers fill those waits (a fresh make
# test: 6 min 35 s of pytest with four against 7 min 15 s with three; the CPU was 60 % busy with three).
TEST_WORKERS ?= 4
# uv installs the pinned requirements (PyPI's wheels, as pip would) in seconds where pip's resolver took 40 s
# (and 1 min 40 s for the SAM CLI): the time make test can spend on tests instead. It uses the system's CA store.
UV_VERSION := 0.13.9
UV := UV_NATIVE_TLS=1 $(VENV)/bin/uv
SAM_CLI_VERSION := 1.170.0

.PHONY: dev test lint lint-code browser sandbox asl unit integration e2e bench build deploy validate clean sam-cli

$(STAMP): requirements-dev.txt layers/contract/requirements.txt layers/contract/pyproject.toml runtime/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(UV) pip install --quiet --python $(PY) -r requirements-dev.txt
	touch $(STAMP)

node_modules/.installed: package.json
	npm install --no-audit --no-fund --silent
	touch node_modules/.installed

## test: lint (ruff, sam validate --lint, asl-validator) then every test (sam build among them)
# It writes bytecode even where the environment sets PYTHONDONTWRITEBYTECODE (an empty value is unset): otherwise
# every pytest process rewrites the assertions of ~430 plugin modules again (schemathesis, hypothesis: ~5 s
# each) and every stack and Runtime process compiles ours again. The files are .gitignored. pip installs with
# --no-compile: byte-compiling every module of every package (moto's hundreds of services) took half the
# install's 43 s; the first process that imports a module compiles that one.
test: export PYTHONDONTWRITEBYTECODE =
test: export MAKE_TEST_SAM_CLI = $(abspath $(SAM))
# Two pytest runs side by side. Coverage of the pure contract package (agents_contract, at least 95 %) is measured
# by the unit test files that use it (those naming agents_contract: 99 % from them alone), in one process whose
# output is printed when both runs have ended. Every other test (the other unit files, integration, e2e) runs in
# the second run, with no coverage: Python 3.11's line tracer made an in-process stack's tests half again as slow
# (test_turns.py: 21 s of CPU against 14) for lines the contract's own tests already cover. Every test file is in
# exactly one of the two runs; either failing fails make test.
UNIT_TESTS := $(sort $(wildcard tests/unit/test_*.py))
CONTRACT_TESTS := $(shell grep -l agents_contract $(UNIT_TESTS))
test: lint-code browser sandbox $(SAM)
	@$(PY) -m pytest $(CONTRACT_TESTS) --durations=5 --cov=agents_contract --cov-report=term \
		--cov-fail-under=95 > .unit-tests.log 2>&1 & unit=$$!; \
	$(PY) -m pytest $(filter-out $(CONTRACT_TESTS),$(UNIT_TESTS)) tests/integration tests/e2e \
		-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15; rest=$$?; \
	wait $$unit; units=$$?; echo "---- the contract's unit tests (under coverage) ----"; cat .unit-tests.log; \
	echo "contract unit tests: exit $$units; the other tests: exit $$rest"; \
	test $$units -eq 0 && test $$rest -eq 0

# $(call debian,COMMAND,PACKAGE,WHAT IT IS FOR,WHAT HAPPENS WITHOUT IT): Debian's PACKAGE when COMMAND is
# missing, installed where this machine allows it (root and apt-get), as CI's clean machine needs.
define debian
	@if command -v $(1) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing Debian $(2) for $(3)..."; \
		(DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(2) >/dev/null 2>&1 || \
		 (apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(2) >/dev/null 2>&1)) \
		|| echo "could not install $(2): $(4)"; \
	else echo "no $(2) and no way to install it: $(4)"; fi
endef

## browser: Debian's chromium for the dashboard test
browser:
	$(call debian,chromium,chromium,the dashboard test,the dashboard browser test will be skipped)

## sandbox: Debian's bubblewrap, which isolates each hosted Environment, and nftables, with which the local
## stack refuses the Environments' uids the host's loopback, link-local and private addresses (defence in depth)
sandbox:
	$(call debian,bwrap,bubblewrap,hosted Environments,the hosted Environment tests will fail)
	$(call debian,nft,nftables,the sandboxes' host firewall,make dev runs without the sandboxes' host firewall)

## lint: ruff and the ASL validator, then `sam validate --lint` (SAM's transform and cfn-lint, the same cfn-lint
## 1.58 as .venv's). make test runs the first two before its tests and `sam validate --lint` among them
## (tests/integration/test_sam_build.py), beside the other tests instead of before them.
lint: lint-code $(SAM)
	$(SAM) validate --lint

lint-code: $(STAMP)
	$(VENV)/bin/ruff check .
	@if ls statemachines/*.asl.json >/dev/null 2>&1; then $(MAKE) --no-print-directory asl; fi

asl: node_modules/.installed
	for f in statemachines/*.asl.json; do npx --no-install asl-validator --json-path $$f || exit 1; done

unit: $(STAMP)
	$(PY) -m pytest tests/unit

integration: $(STAMP)
	$(PY) -m pytest tests/integration

## dev: the whole system on this machine (no AWS, no Docker)
dev: $(STAMP) sandbox
	$(PY) -m local

## bench: every benchmark in bench/, JSON under bench/results/
bench: $(STAMP)
	$(PY) -m bench

## SAM CLI pins older boto3/pydantic, so it lives in its own virtual environment (make test installs it: about
## 3 s with uv, so `sam validate --lint` and `sam build` in tests/integration/test_sam_build.py run on every change).
sam-cli: $(SAM)
$(SAM): $(STAMP)
	$(PYTHON) -m venv --without-pip $(SAM_VENV)  # uv installs into it: no pip to bootstrap
	$(UV) pip install --quiet --python $(SAM_VENV)/bin/python aws-sam-cli==$(SAM_CLI_VERSION)

validate: $(SAM)
	$(SAM) validate --lint

build: $(SAM)
	UV="$(abspath $(VENV))/bin/uv" UV_NATIVE_TLS=1 $(SAM) build

deploy: build
	$(SAM) deploy

clean:
	rm -rf .aws-sam .pytest_cache .ruff_cache .coverage bench/results
