"""One agent, many threads: a burst of submits under one key, and what became of them.

This is how agent frameworks use the SDK (parallel tool calls sharing one identity), and
the load under which nonce ordering used to lose acknowledged writes. Used by the
concurrency tests and `bench/bench_nonce.py`.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
from nacl.signing import SigningKey

from memledger.sdk import Client, MemLedgerError, NonceSource
from memledger.sdk.waiting import wait_until


@dataclass
class BurstReport:
    """Outcome of a burst: what the nodes acknowledged, and what they refused (by name)."""

    submitted: int = 0
    acknowledged: dict[str, str] = field(default_factory=dict)  # memory id -> tx hash
    refused: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def refuse(self, name: str) -> None:
        self.refused[name] = self.refused.get(name, 0) + 1


def run_burst(api_urls: list[str], key: SigningKey | None, *, writers: int, total: int,
              label: str, wait: str = "sync") -> BurstReport:
    """Submit `total` memories under `key` from `writers` threads, spread over `api_urls`.

    All clients share one NonceSource, as threads of one agent process would. With
    `key=None` every writer signs with its own fresh key instead (the baseline without
    any nonce contention).
    """
    if key is None:
        clients = [Client(api_urls[w % len(api_urls)], key=SigningKey.generate(),
                                   timeout=60.0) for w in range(writers)]
    else:
        nonces = NonceSource()
        clients = [Client(url, key=key, nonces=nonces, timeout=60.0)
                   for url in api_urls]
    for client in clients:
        client.chain_id  # noqa: B018 - fetch once, before the clock starts
    report = BurstReport(submitted=total)
    lock = threading.Lock()
    counter = iter(range(total))

    def writer(index: int) -> None:
        client = clients[index % len(clients)]
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            content = f"{label}: memory {i} written by writer {index} of one agent"
            try:
                receipt = client.submit(f"{label}-{i}", content, wait=wait)
            except MemLedgerError as err:
                with lock:
                    report.refuse(err.name or str(err.status))
                continue
            with lock:
                report.acknowledged[f"{label}-{i}"] = receipt.hash

    started = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=writers) as pool:
            for future in [pool.submit(writer, w) for w in range(writers)]:
                future.result()
    finally:
        report.elapsed_s = time.monotonic() - started
        for client in clients:
            client.close()
    return report


def missing(api_url: str, memory_ids: list[str]) -> list[str]:
    """The ids whose memory the node's projection does not hold."""
    absent = []
    with httpx.Client(base_url=api_url, timeout=30.0) as http:
        for memory_id in memory_ids:
            if http.get(f"/v1/memories/{memory_id}").status_code != 200:
                absent.append(memory_id)
    return absent


def wait_mempool_empty(rpc_url: str, timeout: float = 120.0) -> None:
    """Until the node's mempool is empty and two more blocks have committed."""
    started = time.monotonic()
    with httpx.Client(base_url=rpc_url, timeout=10.0) as http:
        def height() -> int:
            return int(http.get("/status").json()["result"]["sync_info"]["latest_block_height"])

        wait_until(lambda: int(http.get("/num_unconfirmed_txs").json()["result"]["n_txs"]) == 0,
                   timeout, 0.2, what=f"the mempool of {rpc_url} to empty")
        start = height()
        wait_until(lambda: height() >= start + 2, timeout - (time.monotonic() - started), 0.2,
                   what=f"two blocks on {rpc_url} after its mempool emptied")
