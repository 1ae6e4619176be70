"""Fill a chain with many memories fast, through real blocks (tests and benchmarks).

Pre-signs every tx, sends them as JSON-RPC batches (CometBFT allows 10 requests per batch
by default) of `broadcast_tx_async` round-robin
over the nodes while keeping each mempool below a bound, then waits until every agent's
last nonce is committed. Each agent's txs go to one node, in nonce order.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass

import httpx
from nacl.signing import SigningKey

from memledger.sdk.txbuilder import TxBuilder


@dataclass
class FillReport:
    memories: int
    agents: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.memories / self.seconds if self.seconds else 0.0


def _pending(http: httpx.Client) -> int:
    return int(http.post("", json={"jsonrpc": "2.0", "id": 0, "method": "num_unconfirmed_txs",
                                   "params": {}}).json()["result"]["n_txs"])


def _last_nonce(http: httpx.Client, key: SigningKey) -> int:
    data = bytes(key.verify_key).hex().encode().hex()
    res = http.post("", json={"jsonrpc": "2.0", "id": 0, "method": "abci_query",
                              "params": {"path": "/account", "data": data}}).json()
    value = res["result"]["response"].get("value") or ""
    return int(json.loads(base64.b64decode(value))["nonce"]) if value else 0


def fill(rpc_urls: list[str], chain_id: str, memories: int, *, agents: int = 16,
         content_bytes: int = 100, batch: int = 10, max_pending: int = 3000,
         label: str = "fill", timeout: float = 1800.0) -> FillReport:
    """Commit `memories` memory submits; returns when all are in blocks."""
    keys = [SigningKey.generate() for _ in range(agents)]
    per_agent = [memories // agents + (1 if i < memories % agents else 0)
                 for i in range(agents)]
    padding = "x" * max(0, content_bytes - 40)
    started = time.monotonic()
    deadline = started + timeout
    clients = [httpx.Client(base_url=url, timeout=60.0) for url in rpc_urls]
    try:
        for a, key in enumerate(keys):
            builder = TxBuilder(key, chain_id)
            http = clients[a % len(clients)]
            txs = [builder.submit(n, f"{label}-{a}-{n}", f"{label} {a}/{n} {padding}")
                   for n in range(1, per_agent[a] + 1)]
            for lo in range(0, len(txs), batch):
                while _pending(http) > max_pending:
                    if time.monotonic() > deadline:
                        raise TimeoutError("mempool did not drain")
                    time.sleep(0.05)
                body = [{"jsonrpc": "2.0", "id": i, "method": "broadcast_tx_async",
                         "params": {"tx": base64.b64encode(tx).decode()}}
                        for i, tx in enumerate(txs[lo:lo + batch])]
                answer = http.post("", json=body)
                answer.raise_for_status()
                errors = [r["error"] for r in answer.json() if "error" in r]
                if errors:  # e.g. a batch above rpc.max_request_batch_size (default 10)
                    raise RuntimeError(f"broadcast refused: {errors[0]}")
        for a, key in enumerate(keys):
            while _last_nonce(clients[0], key) < per_agent[a]:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"agent {a} not fully committed in {timeout:.0f}s")
                time.sleep(0.2)
    finally:
        for http in clients:
            http.close()
    return FillReport(memories, agents, time.monotonic() - started)
