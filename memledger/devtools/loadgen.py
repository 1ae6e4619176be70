"""Load generator: signed memory submissions at a target rate, tracked until committed.

Each agent is a fresh key (so nonces can simply count from 1) with its own thread and a
home node, so one agent's txs enter one mempool in nonce order; if its node stops
answering it fails over to the next one. A tracker thread follows the chain block by
block (/block + /block_results: two calls per height whatever the load) and matches tx
hashes, so tracking cost does not grow with the number of txs in flight.

Setup happens before the clock starts, so the measured window holds only submissions:
each agent's RPC client to its home node is opened in ``start()`` (an httpx client
costs ~50 ms of CPU to create; other nodes' clients are opened only on failover), and
``run()`` pre-builds (and so pre-signs) every tx an agent can send in its window.

"acknowledged" = CheckTx accepted it; "committed" = in a block with FinalizeBlock code 0
(the memory is then ``proposed`` on every node; validator votes decide its status).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from nacl.signing import SigningKey

from memledger.devtools.stats import percentile
from memledger.sdk.rpc import RpcClient, RpcError
from memledger.sdk.txbuilder import TxBuilder
from memledger.sdk.waiting import WaitTimeout, wait_until

#: (builder, nonce, memory id, content) -> tx bytes; lets benches send other payloads
#: (e.g. `key=value` txs for CometBFT's built-in kvstore) through the same machinery.
MakeTx = Callable[[TxBuilder, int, str, str], bytes]
TRANSPORT_ERRORS = (httpx.HTTPError, RpcError, OSError, KeyError, ValueError)


@dataclass
class Submission:
    memory_id: str
    tx_hash: str
    agent: int
    nonce: int
    submitted_at: float
    node: str = ""
    acked: bool = False
    check_code: int | None = None
    error: str = ""
    height: int = 0
    code: int | None = None
    committed_at: float = 0.0


@dataclass
class LoadReport:
    duration_s: float
    target_rate: float
    submitted: int
    acknowledged: int
    rejected: int
    errors: int
    committed: int
    failed: int
    pending: int
    achieved_rate: float
    latency_ms: dict[str, float]
    reject_codes: dict[str, int] = field(default_factory=dict)
    fail_codes: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def tx_hash(tx: bytes) -> str:
    """CometBFT's tx hash: upper-case hex SHA-256 of the raw bytes."""
    return hashlib.sha256(tx).hexdigest().upper()


class LoadGenerator:
    """Background load with ``start()`` / ``stop()``; ``run()`` for a blocking bench."""

    def __init__(self, rpc_urls: Sequence[str], chain_id: str, *, rate: float = 10.0,
                 agents: int = 4, content_bytes: int = 64, domain: str = "general",
                 rpc_timeout: float = 5.0, poll_s: float = 0.1,
                 make_tx: MakeTx | None = None) -> None:
        if not rpc_urls:
            raise ValueError("at least one RPC URL is needed")
        if rate <= 0 or agents < 1:
            raise ValueError("rate must be positive and agents at least 1")
        self.urls = list(rpc_urls)
        self.chain_id = chain_id
        self.rate = rate
        self.agents = agents
        self.content_bytes = content_bytes
        self.domain = domain
        self.rpc_timeout = rpc_timeout
        self.poll_s = poll_s
        self.make_tx = make_tx or self._memory_submit
        self.run_id = secrets.token_hex(4)
        self._keys = [SigningKey.generate() for _ in range(agents)]
        self._subs: dict[str, Submission] = {}
        self._order: list[Submission] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stop_tracker = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: list[_Clients] = []
        self._prebuilt: list[list[tuple[str, bytes, str]]] = []
        self._tracker: threading.Thread | None = None
        self._next_height = 0
        self._started = 0.0
        self._stopped = 0.0
        self.tracker_error = ""

    # --- lifecycle --------------------------------------------------------------------

    def start(self, prebuild: int = 0) -> LoadGenerator:
        """Open clients and pre-build ``prebuild`` txs per agent, then start the clock."""
        self._clients = [_Clients(self.urls, self.rpc_timeout) for _ in range(self.agents)]
        try:
            for a, clients in enumerate(self._clients):
                clients.get(a % len(self.urls))
            self._prebuilt = [self._build(a, prebuild) for a in range(self.agents)]
            self._next_height = self._latest_height() + 1
        except BaseException:
            for clients in self._clients:
                clients.close()
            raise
        self._started = time.monotonic()
        self._tracker = threading.Thread(target=self._track, name="loadgen-tracker",
                                         daemon=True)
        self._tracker.start()
        for a in range(self.agents):
            t = threading.Thread(target=self._agent, args=(a,), name=f"loadgen-agent-{a}",
                                 daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, settle: float = 0.0) -> LoadReport:
        """Stop submitting; wait up to ``settle`` s for acknowledged txs; stop tracking."""
        self._stop.set()
        for t in self._threads:
            t.join()
        if not self._stopped:
            self._stopped = time.monotonic()
        self.wait_settled(settle)
        self._stop_tracker.set()
        if self._tracker is not None:
            self._tracker.join()
        return self.report()

    def run(self, duration: float, settle: float = 30.0) -> LoadReport:
        # An agent sends at most one tx per interval plus the first: no on-the-fly signing.
        self.start(prebuild=int(duration * self.rate / self.agents) + 2)
        time.sleep(duration)
        return self.stop(settle)

    def wait_settled(self, timeout: float) -> bool:
        """True once every acknowledged tx has landed in a block (or timeout)."""
        try:
            return wait_until(lambda: not self.pending(), timeout, self.poll_s,
                              what="every acknowledged tx in a block")
        except WaitTimeout:
            return False

    # --- results ----------------------------------------------------------------------

    @property
    def submissions(self) -> list[Submission]:
        with self._lock:
            return list(self._order)

    def pending(self) -> list[Submission]:
        """Acknowledged but not (yet) seen in any block."""
        return [s for s in self.submissions if s.acked and s.height == 0]

    def committed(self) -> list[tuple[str, int]]:
        """(memory_id, height) of every submission with FinalizeBlock code 0."""
        done = [(s.memory_id, s.height) for s in self.submissions if s.code == 0]
        return sorted(done, key=lambda x: (x[1], x[0]))

    def acknowledged(self) -> list[Submission]:
        return [s for s in self.submissions if s.acked]

    def report(self) -> LoadReport:
        subs = self.submissions
        end = self._stopped or time.monotonic()
        duration = max(1e-9, end - self._started) if self._started else 0.0
        committed = [s for s in subs if s.code == 0]
        lat = [(s.committed_at - s.submitted_at) * 1000 for s in committed]
        return LoadReport(
            duration_s=round(duration, 3),
            target_rate=self.rate,
            submitted=len(subs),
            acknowledged=sum(s.acked for s in subs),
            rejected=sum(1 for s in subs if s.check_code not in (None, 0)),
            errors=sum(1 for s in subs if s.error and s.check_code is None),
            committed=len(committed),
            failed=sum(1 for s in subs if s.code not in (None, 0)),
            pending=sum(1 for s in subs if s.acked and s.height == 0),
            achieved_rate=round(len(subs) / duration, 2) if duration else 0.0,
            latency_ms={"p50": round(percentile(lat, 50), 1) if lat else 0.0,
                        "p99": round(percentile(lat, 99), 1) if lat else 0.0,
                        "max": round(max(lat, default=0.0), 1)},
            reject_codes=dict(Counter(str(s.check_code) for s in subs
                                      if s.check_code not in (None, 0))),
            fail_codes=dict(Counter(str(s.code) for s in subs if s.code not in (None, 0))),
        )

    # --- agents -----------------------------------------------------------------------

    def _memory_submit(self, builder: TxBuilder, nonce: int, memory_id: str,
                       content: str) -> bytes:
        return builder.submit(nonce, memory_id, content, domain=self.domain)

    def _content(self, memory_id: str) -> str:
        text = f"load test memory {memory_id} "
        return text + "x" * max(0, self.content_bytes - len(text))

    def _memory_id(self, a: int, nonce: int) -> str:
        return f"load-{self.run_id}-a{a}-{nonce}"

    def _make(self, a: int, builder: TxBuilder, nonce: int) -> tuple[str, bytes, str]:
        """(memory id, tx bytes, tx hash) of agent ``a``'s tx with this nonce."""
        memory_id = self._memory_id(a, nonce)
        tx = self.make_tx(builder, nonce, memory_id, self._content(memory_id))
        return memory_id, tx, tx_hash(tx)

    def _build(self, a: int, count: int) -> list[tuple[str, bytes, str]]:
        builder = TxBuilder(self._keys[a], self.chain_id)
        return [self._make(a, builder, nonce) for nonce in range(1, count + 1)]

    def _agent(self, a: int) -> None:
        builder = TxBuilder(self._keys[a], self.chain_id)
        prebuilt = self._prebuilt[a]
        interval = self.agents / self.rate
        target = a % len(self.urls)
        clients = self._clients[a]
        next_at = time.monotonic() + a / self.rate
        nonce = 0
        try:
            while not self._stop.is_set():
                delay = next_at - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    break
                next_at = max(next_at + interval, time.monotonic() - 1.0)  # bounded catch-up
                nonce += 1
                memory_id, tx, digest = (prebuilt[nonce - 1] if nonce <= len(prebuilt)
                                         else self._make(a, builder, nonce))
                sub = Submission(memory_id, digest, a, nonce, time.monotonic())
                with self._lock:
                    self._subs[sub.tx_hash] = sub
                    self._order.append(sub)
                target = self._broadcast(sub, tx, clients, target)
        finally:
            clients.close()

    def _broadcast(self, sub: Submission, tx: bytes, clients: _Clients,
                   target: int) -> int:
        """Send to the agent's node; on a transport error move to the next node once."""
        for attempt in range(2):
            client = clients.get(target)
            sub.node = client.url
            try:
                result = client.broadcast_tx_sync(tx)
            except RpcError as exc:
                sub.error = str(exc)
                return target
            except TRANSPORT_ERRORS as exc:
                sub.error = f"{type(exc).__name__}: {exc}"
                target = (target + 1) % len(self.urls)
                if attempt == 0 and len(self.urls) > 1:
                    continue
                return target
            sub.error = ""
            sub.check_code = result.code
            sub.acked = result.code == 0
            if not sub.acked:
                sub.error = result.log
            return target
        return target

    # --- tracker ----------------------------------------------------------------------

    def _latest_height(self) -> int:
        last: Exception | None = None
        for url in self.urls:
            try:
                with RpcClient(url, timeout=self.rpc_timeout) as c:
                    return c.latest_height()
            except TRANSPORT_ERRORS as exc:
                last = exc
        raise RuntimeError(f"no node answered /status: {last!r}")

    def _track(self) -> None:
        clients = _Clients(self.urls, self.rpc_timeout)
        current = 0
        try:
            while not self._stop_tracker.is_set():
                client = clients.get(current)
                try:
                    latest = client.latest_height()
                    while self._next_height <= latest and not self._stop_tracker.is_set():
                        self._scan(client, self._next_height)
                        self._next_height += 1
                except TRANSPORT_ERRORS as exc:
                    self.tracker_error = f"{client.url}: {exc!r}"
                    current = (current + 1) % len(self.urls)
                self._stop_tracker.wait(self.poll_s)
        finally:
            clients.close()

    def _scan(self, client: RpcClient, height: int) -> None:
        txs = client.block(height)["block"]["data"].get("txs") or []
        if not txs:
            return
        hashes = [tx_hash(base64.b64decode(t)) for t in txs]
        with self._lock:
            if not any(h in self._subs for h in hashes):
                return
        results = client.block_results(height).get("txs_results") or []
        now = time.monotonic()
        with self._lock:
            for i, h in enumerate(hashes):
                sub = self._subs.get(h)
                if sub is None or sub.height:
                    continue
                sub.height = height
                sub.code = int(results[i].get("code", 0)) if i < len(results) else None
                sub.committed_at = now


class _Clients:
    """One thread's RPC clients, one per URL, opened on first use (creation is costly)."""

    def __init__(self, urls: Sequence[str], timeout: float) -> None:
        self._urls = list(urls)
        self._timeout = timeout
        self._open: dict[int, RpcClient] = {}

    def get(self, index: int) -> RpcClient:
        client = self._open.get(index)
        if client is None:
            client = self._open[index] = RpcClient(self._urls[index], timeout=self._timeout)
        return client

    def close(self) -> None:
        for client in self._open.values():
            client.close()
        self._open.clear()
