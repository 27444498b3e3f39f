# make demo : create .venv, install, run the demo on the embedded FakeProvider (no keys)
# make serve-demo : the server on the demo's routes, with a printed key (no provider key)
# make test : create .venv, install with dev extras, lint, type-check, build the docs, run the whole suite
# Installs go through constraints.txt (exact versions), so a new LiteLLM release never
# changes what CI runs; bump it on purpose with `make constraints`.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip

# LiteLLM must never reach for the network here: its price map is read locally and
# tokenizers are never downloaded.
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true
# Material for MkDocs' notice of its successor, printed on every build.
export NO_MKDOCS_2_WARNING := 1

.PHONY: demo serve-demo test test-fast lint docs bench notebooks constraints clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "policy_router needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml constraints.txt tests/node/package-lock.json
	@# The docs tools' pins (pymdown-extensions 13) need 3.11.5: say so, not a resolver error.
	$(BIN)/python -c 'import sys; assert sys.version_info >= (3, 11, 5), "make test needs Python 3.11.5+ (the dev pins); make demo runs on 3.11"'
	$(PIP) install --quiet -c constraints.txt -e '.[dev,langchain,notebooks,redis,otel,duckdb,postgres,server]'
	@# The OpenAI Node SDK the server's tests use as a client, pinned by its lock file,
	@# where node is on PATH (those tests are skipped where it is not).
	if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/node --no-audit --no-fund --loglevel=error; fi
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m policy_router demo

# The server on the demo's routes (FakeProvider, no provider key): point any client at it.
$(VENV)/.installed-server: $(VENV)/.installed
	$(PIP) install --quiet -c constraints.txt -e '.[server]'
	touch $@

serve-demo: $(VENV)/.installed-server
	$(BIN)/python -m policy_router serve --demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check policy_router tests
	# mypy over the package, strictly, and over every documentation example as a user's
	# script, those the docs tests cannot run included.
	$(BIN)/python -m tests.docs_examples
	$(BIN)/lint-imports --no-cache

# The documentation site, built strictly: a broken link, a missing page or an unresolved
# reference fails (not with --quiet, which hides the warnings strict mode counts). Its
# examples are run by the suite (tests/test_docs.py).
docs: $(VENV)/.installed-dev
	$(BIN)/mkdocs build --strict

test: lint docs
	$(BIN)/python -m pytest -q -rs tests

test-fast: lint
	$(BIN)/python -m pytest -q -rs -m "not slow" tests

# Re-run the notebooks and store them with their outputs (and the plots they save).
notebooks: $(VENV)/.installed-dev
	$(BIN)/python -m tests.notebook_runner

bench: $(VENV)/.installed-dev
	$(BIN)/python tests/bench/overhead.py
	$(BIN)/python tests/bench/cold.py
	$(BIN)/python tests/bench/selection.py
	$(BIN)/python tests/bench/throughput.py
	$(BIN)/python tests/bench/redis_store.py
	$(BIN)/python tests/bench/metrics.py
	$(BIN)/python tests/bench/budgetbench.py
	$(BIN)/python tests/bench/server.py

constraints: $(VENV)/.installed-dev
	$(PIP) freeze --exclude-editable | grep -v '^policy-router' > constraints.txt

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .site
