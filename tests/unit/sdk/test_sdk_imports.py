"""The SDK is a library an agent imports without the node: it must load nothing else.

Checked in a fresh interpreter (this test process has the node's modules loaded already):
after `import memledger.sdk`, every module it loaded is the standard library's, one of the
SDK's three dependencies (httpx, PyNaCl, protobuf), or memledger.sdk / memledger.protocol.
The dependencies are imported first and what they load themselves is left out (httpx
loads its command line's click and rich when they are installed, as in the node's venv).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Packages the node or the serving side needs, none of which an SDK user should load.
SERVER_SIDE = ("fastapi", "starlette", "uvicorn", "sqlalchemy", "psycopg", "lmdb", "numpy",
               "usearch", "tantivy", "wordllama", "click", "prometheus_client", "pydantic",
               "memledger.consensus", "memledger.api", "memledger.projection",
               "memledger.recall", "memledger.daemon", "memledger.cli", "memledger.testnet",
               "memledger.devtools")
#: Top-level packages the SDK may load: its dependencies and theirs (httpx's transport
#: loads httpcore, h11, anyio, certifi on first use).
ALLOWED = {"httpx", "httpcore", "h11", "anyio", "sniffio", "certifi", "idna", "nacl", "cffi",
           "google", "typing_extensions"}
ALLOWED_OWN = ("memledger.sdk", "memledger.protocol")


def _loaded_after(statement: str) -> set[str]:
    code = ("import sys, httpx, nacl.signing, google.protobuf.message; "
            f"before = set(sys.modules); {statement}; "
            "import json; print(json.dumps(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return set(json.loads(out))


def _foreign(loaded: set[str]) -> list[str]:
    stdlib = sys.stdlib_module_names
    bad = []
    for name in sorted(loaded):
        top = name.split(".")[0]
        if top in stdlib or top in ALLOWED or name.startswith("_"):
            continue
        if top == "memledger" and (name == "memledger" or name.startswith(ALLOWED_OWN)):
            continue
        bad.append(name)
    return bad


@pytest.mark.parametrize("statement", [
    "import memledger.sdk",
    "from memledger import Client, AsyncClient, Agent, MemLedgerError",
])
def test_sdk_loads_only_its_dependencies(statement: str) -> None:
    loaded = _loaded_after(statement)
    assert "memledger.sdk.sync" in loaded and "memledger.sdk.aio" in loaded  # it did load
    assert not [n for n in loaded if n.startswith(SERVER_SIDE)]
    assert _foreign(loaded) == []


def test_importing_memledger_alone_loads_no_sdk() -> None:
    """`import memledger` (as the node's packages do) does not pull the HTTP stack in."""
    loaded = _loaded_after("import memledger")
    assert "memledger" in loaded
    assert "httpx" not in loaded and "memledger.sdk" not in loaded


def test_public_names() -> None:
    import memledger
    from memledger import sdk

    assert memledger.Client is sdk.Client and memledger.AsyncClient is sdk.AsyncClient
    assert sdk.MemLedgerClient is sdk.Client and sdk.AsyncMemLedgerClient is sdk.AsyncClient
    with pytest.raises(AttributeError, match="no attribute 'Clent'"):
        memledger.Clent  # noqa: B018
