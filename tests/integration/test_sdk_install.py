"""The base install is the SDK, and the SDK works from it alone.

A wheel is built with `python -m build` (the dev lock's build, setuptools and wheel, no
isolation), an empty venv gets the base requirements from requirements-sdk.lock
(hash-checked) and the wheel with --no-deps, and in that venv, isolated from this
checkout, a script signs, submits (waiting for the validators' decision), recalls and
reads with proof against a real node started by this venv's tooling. The server side
(FastAPI, SQLAlchemy, LMDB, ...) must not be importable there.

The venv's site-packages size is printed (`pytest -s`); scripts/install_size.py measures
it beside the node's install (BENCHMARKS.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from scripts.install_size import install_lock, make_venv, pip_install, site_packages, tree_bytes
from tests.support.node import REPO, NodeRunner, wait_api_ready

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-sdk-install"
BASE = {"httpx", "protobuf", "pynacl"}
NOT_IN_BASE = ("fastapi", "sqlalchemy", "lmdb", "uvicorn", "starlette", "orjson", "numpy",
                  "usearch", "tantivy", "onnxruntime", "click")
# The base install measured 15.7 MB (BENCHMARKS.md), a validator's ~500 MB: a server
# package slipping into the base set would pass this bound by far.
MAX_BASE_BYTES = 25_000_000

# Run inside the clean venv with `python -I`: neither this checkout nor PYTHONPATH is on
# its path, so every memledger module comes from the installed wheel.
AGENT_SCRIPT = r'''
import json, sys, time
import memledger
from memledger import Agent, Client
from memledger.sdk.light import GenesisRoot
entry = f"{Client.__module__}.{Client.__qualname__}"

api, genesis, content = sys.argv[1:4]
with Client(api, key=Agent.generate(), trust=GenesisRoot.from_file(genesis)) as ml:
    receipt = ml.submit(None, content, tags=["sdk-install"], wait="decided")
    ids = []
    deadline = time.monotonic() + 60
    while receipt.memory_id not in ids and time.monotonic() < deadline:
        ids = [hit.id for hit in ml.recall("which port does the wheel test node use", limit=5)]
        if receipt.memory_id not in ids:
            time.sleep(0.5)  # the node indexes after Commit
    memory = ml.get(receipt.memory_id, verify=True)
print(json.dumps({
    "package": memledger.__file__, "entry": entry, "memory_id": receipt.memory_id,
    "decided": receipt.memory_status, "recalled": ids, "content": memory.content,
    "status": memory.status, "verified_height": memory.verified_height,
}))
'''

IMPORTS_SCRIPT = r'''
import importlib, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        found[name] = "imported"
    except ModuleNotFoundError as exc:
        found[name] = f"missing: {exc.name}"
print(json.dumps(found))
'''


def _source_copy(dest: Path) -> Path:
    """What the wheel is built from, copied so the build leaves this checkout untouched."""
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "memledger", dest / "memledger",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


@pytest.fixture(scope="session")
def sdk_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = _source_copy(tmp_path_factory.mktemp("wheel-src"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                           "--outdir", str(out), str(src)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout}\n{done.stderr}"
    wheels = list(out.glob("memledger-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[NodeRunner]:
    """Started without waiting: it comes up while the venv is installed."""
    runner = NodeRunner(tmp_path_factory.mktemp("sdk-node") / "home", chain_id=CHAIN,
                        voter=True)
    runner.start(wait=False)
    try:
        yield runner
    finally:
        runner.stop()


@pytest.fixture(scope="module")
def sdk_python(tmp_path_factory: pytest.TempPathFactory, sdk_wheel: Path) -> Path:
    """An empty venv with the base requirements (hash-checked) and the wheel alone."""
    python = make_venv(tmp_path_factory.mktemp("sdk-venv") / "venv")
    install_lock(python, REPO / "requirements-sdk.lock")
    pip_install(python, "--no-deps", str(sdk_wheel))
    return python


@pytest.fixture(scope="module")
def agent_python(tmp_path_factory: pytest.TempPathFactory, sdk_wheel: Path) -> Path:
    """An agent's install, `memledger[mcp]`: the SDK, click and the MCP SDK, from
    requirements-agent.lock (hash-checked), and the wheel alone."""
    python = make_venv(tmp_path_factory.mktemp("agent-venv") / "venv")
    install_lock(python, REPO / "requirements-agent.lock")
    pip_install(python, "--no-deps", str(sdk_wheel))
    return python


def _run(python: Path, script: str, *args: str, cwd: Path) -> str:
    done = subprocess.run([str(python), "-I", "-c", script, *args], capture_output=True,
                          text=True, timeout=180, cwd=cwd, check=False)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_wheel_metadata_names_the_sdk_as_its_base(sdk_wheel: Path) -> None:
    with zipfile.ZipFile(sdk_wheel) as whl:
        names = set(whl.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(whl.read(info).decode())
    reqs = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    assert {r.name.lower() for r in reqs if r.marker is None} == BASE
    assert {"node", "mcp", "dev"} <= set(meta.get_all("Provides-Extra") or [])
    assert meta["License-Expression"] == "Apache-2.0"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "memledger/py.typed" in names
    assert "memledger/sdk/sync.py" in names


def test_base_install_has_no_server_side(sdk_python: Path, tmp_path: Path) -> None:
    found = json.loads(_run(sdk_python, IMPORTS_SCRIPT, "memledger.sdk",
                            "memledger.sdk.light", *NOT_IN_BASE, cwd=tmp_path))
    assert found.pop("memledger.sdk") == found.pop("memledger.sdk.light") == "imported"
    imported = sorted(name for name, how in found.items() if how == "imported")
    assert not imported, f"the base install can import server packages: {imported}"
    size = tree_bytes(site_packages(sdk_python))
    print(f"\nbase install (requirements-sdk.lock + wheel): site-packages {size / 1e6:.1f} MB")
    assert size <= MAX_BASE_BYTES, f"the base install grew to {size / 1e6:.1f} MB"


def test_command_in_the_base_install_names_the_extra_it_needs(
        sdk_python: Path, tmp_path: Path) -> None:
    """The wheel installs the `memledger` command in every install; without the node's
    packages it says what to install, in one line, instead of a traceback."""
    done = subprocess.run([str(sdk_python.parent / "memledger"), "--help"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          check=False)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert "pip install 'memledger[mcp]'" in done.stderr, done.stderr
    assert "pip install 'memledger[node]'" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_sdk_from_the_base_install_against_a_real_node(
        node: NodeRunner, sdk_python: Path, tmp_path: Path) -> None:
    node.wait_rpc()
    wait_api_ready(node.api_url)
    genesis = node.home / "cometbft" / "config" / "genesis.json"
    content = f"the wheel test node serves its API on port {node.base + 24}"
    out = json.loads(_run(sdk_python, AGENT_SCRIPT, node.api_url, str(genesis), content,
                          cwd=tmp_path).splitlines()[-1])
    print(f"\nclean venv: {out}")
    assert Path(out["package"]).is_relative_to(site_packages(sdk_python)), out["package"]
    assert not Path(out["package"]).is_relative_to(REPO), "imported the checkout, not the wheel"
    assert out["entry"] == "memledger.sdk.sync.Client", out
    assert out["decided"] == "committed", out
    assert out["memory_id"] in out["recalled"], out
    assert out["content"] == content and out["status"] == "committed", out
    assert isinstance(out["verified_height"], int) and out["verified_height"] >= 1, out


def test_agent_install_runs_the_agent_commands_and_names_the_node_extra(
        agent_python: Path, tmp_path: Path) -> None:
    """`memledger[mcp]` is what an agent's machine installs: the agent's commands work
    there without the server stack; a node command says, in one line, what it needs."""
    found = json.loads(_run(agent_python, IMPORTS_SCRIPT, "memledger.cli.main",
                            "memledger.mcp.server", *NOT_IN_BASE[:-1], cwd=tmp_path))
    assert found.pop("memledger.cli.main") == found.pop("memledger.mcp.server") == "imported"
    server_side = {"fastapi", "sqlalchemy", "lmdb", "orjson", "numpy", "usearch", "tantivy",
                   "onnxruntime"}
    imported = sorted(n for n, how in found.items() if how == "imported" and n in server_side)
    assert not imported, f"the agent install can import server packages: {imported}"
    command = str(agent_python.parent / "memledger")
    env = {"PATH": str(agent_python.parent), "MEMLEDGER_HOME": str(tmp_path / "home"),
           "HOME": str(tmp_path)}
    made = subprocess.run([command, "keys", "new", "agent"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env=env, check=False)
    assert made.returncode == 0 and "created key agent" in made.stdout, made
    node_cmd = subprocess.run([command, "init"], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path, env=env, check=False)
    assert node_cmd.returncode == 1, node_cmd
    assert "pip install 'memledger[node]'" in node_cmd.stderr, node_cmd.stderr
    assert "Traceback" not in node_cmd.stderr and len(node_cmd.stderr.splitlines()) == 1
    size = tree_bytes(site_packages(agent_python))
    print(f"\nagent install (requirements-agent.lock + wheel): site-packages "
          f"{size / 1e6:.1f} MB")


def test_mcp_server_from_the_agent_install_against_a_real_node(
        node: NodeRunner, agent_python: Path, tmp_path: Path) -> None:
    """The one line a host runs, `memledger mcp --key K --node URL`, from the agent's
    install, driven by the official MCP client: remember, then recall it."""
    import asyncio

    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from memledger.sdk.keys import Agent

    node.wait_rpc()
    wait_api_ready(node.api_url)
    keys = tmp_path / "keys"
    keys.mkdir()
    Agent.generate("agent").save(keys / "agent.json")
    env = {"PATH": str(agent_python.parent), "HOME": str(tmp_path),
           "MEMLEDGER_KEYS_DIR": str(keys), "MEMLEDGER_HOME": str(tmp_path / "home")}
    params = StdioServerParameters(command=str(agent_python.parent / "memledger"),
                                   args=["mcp", "--key", "agent", "--node", node.api_url],
                                   env=env, cwd=str(tmp_path))
    content = "the agent install MCP server stores this memory on the wheel test node"

    async def run() -> tuple[str, str]:
        async with stdio_client(params) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            stored = await session.call_tool("remember", {"content": content,
                                                          "wait": "decided"})
            assert not stored.is_error, stored
            for _ in range(60):  # the node indexes after Commit
                found = await session.call_tool("recall", {"query": "what does the agent "
                                                           "install MCP server store"})
                assert not found.is_error, found
                if content in found.content[0].text:  # type: ignore[union-attr]
                    break
                await asyncio.sleep(0.5)
            return (stored.content[0].text, found.content[0].text)  # type: ignore[union-attr]

    stored, found = asyncio.run(run())
    assert "status committed" in stored, stored
    assert content in found, found
