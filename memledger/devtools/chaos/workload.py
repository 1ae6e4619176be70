"""The campaign's workload: one agent per node, recording every operation it makes.

Each agent talks to its own node's REST API with the SDK: it submits memories
(wait=commit) with its own key, votes on any agent's memories with its node's validator
key (the nets run without the auto-voter, so every vote is an operation in the history),
challenges its own memories, and reads memories plainly (with the node's status: height
and app hash) and with ``verify=True``.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from memledger.daemon import cometbft
from memledger.devtools.chaos.history import FAIL, OK, UNKNOWN, History, Op
from memledger.sdk import Client, MemLedgerConnectionError, MemLedgerError, ProvenAbsent
from memledger.sdk.keys import Agent
from memledger.sdk.light import GenesisRoot
from memledger.sdk.light.errors import VerificationError
from memledger.sdk.models import Memory, TxReceipt
from memledger.sdk.retry import RetryPolicy
from memledger.testnet.net import Testnet, TestnetNode

#: (kind, weight): writes dominate, so faults meet them
MIX = (("submit", 30), ("vote", 25), ("challenge", 5), ("read", 20), ("verified_read", 20))
CLIENT_TIMEOUT_S = 20.0
#: few retries: a fault should show up as an unknown, not be waited out inside the SDK
RETRY = RetryPolicy(retries=1, backoff=0.2, max_wait=2.0, backlog_wait=2.0)


@dataclass
class Pool:
    """Memory ids the agents have tried to submit (any outcome but a refusal)."""

    ids: list[str] = field(default_factory=list)
    authors: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, memory_id: str, node: int) -> None:
        with self.lock:
            self.ids.append(memory_id)
            self.authors[memory_id] = node

    def pick(self, rng: random.Random, node: int | None = None) -> str | None:
        with self.lock:
            ids = [m for m in self.ids[-40:] if node is None or self.authors[m] == node]
        return rng.choice(ids) if ids else None


def _write_outcome(rec: Op, receipt: TxReceipt) -> None:
    if receipt.included:
        rec.outcome = OK
        rec.result = {"height": receipt.height, "hash": receipt.hash}
    else:  # accepted into a mempool but not seen in a block in time
        rec.outcome = UNKNOWN
        rec.result = {"status": receipt.status, "hash": receipt.hash}


def _error_outcome(rec: Op, err: MemLedgerError) -> None:
    """A ledger result code is a refusal; no answer or a 5xx is an unknown."""
    if isinstance(err, MemLedgerConnectionError) or err.code is None and (
            err.status == 0 or err.status >= 500):
        rec.outcome, rec.code = UNKNOWN, err.name or type(err).__name__
    else:
        rec.outcome, rec.code = FAIL, err.name or str(err.code)


def _memory_result(m: Memory) -> dict[str, object]:
    return {"status": m.status, "content_hash": m.content_hash,
            "submitted_height": m.submitted_height, "verified_height": m.verified_height}


class AgentLoop(threading.Thread):
    """One agent on one node, until ``stop`` is set."""

    def __init__(self, net: Testnet, node: TestnetNode, history: History, pool: Pool,
                 stop: threading.Event, seed: int) -> None:
        super().__init__(name=f"agent-{node.index}", daemon=True)
        self.node, self.history, self.pool, self.stop = node, history, pool, stop
        self.rng = random.Random(seed * 1000 + node.index)
        root = GenesisRoot.from_file(cometbft.genesis_path(node.node_home.cometbft))
        self.client = Client(node.api_url, key=Agent.generate(), chain_id=net.chain_id,
                             timeout=CLIENT_TIMEOUT_S, retry=RETRY, trust=root)
        self.validator = Client(node.api_url,
                                key=cometbft.validator_signing_key(node.node_home.cometbft),
                                chain_id=net.chain_id, timeout=CLIENT_TIMEOUT_S, retry=RETRY)
        self.count = 0

    def run(self) -> None:
        kinds = [k for k, _ in MIX]
        weights = [w for _, w in MIX]
        try:
            while not self.stop.is_set():
                kind = self.rng.choices(kinds, weights)[0]
                getattr(self, f"_{kind}")()
                self.stop.wait(self.rng.uniform(0.02, 0.2))
        finally:
            self.client.close()
            self.validator.close()

    def _submit(self) -> None:
        self.count += 1
        mid = f"chaos-n{self.node.index}-{self.count}"
        with self.history.op(self.name, self.node.index, "submit", memory_id=mid) as rec:
            self.pool.add(mid, self.node.index)
            try:
                _write_outcome(rec, self.client.submit(mid, f"chaos write {mid}",
                                                       wait="commit"))
            except MemLedgerError as err:
                _error_outcome(rec, err)
            except Exception as exc:  # noqa: BLE001 - anything else: the effect is unknown
                rec.outcome, rec.code = UNKNOWN, type(exc).__name__

    def _write(self, kind: str, mid: str | None) -> None:
        if mid is None:
            return
        signer = self.validator if kind == "vote" else self.client
        with self.history.op(self.name, self.node.index, kind, memory_id=mid,
                             signer=signer.public_key) as rec:
            try:
                if kind == "vote":
                    receipt = self.validator.vote(mid, "accept")
                else:
                    receipt = self.client.challenge(mid, "chaos challenge")
                _write_outcome(rec, receipt)
            except MemLedgerError as err:
                _error_outcome(rec, err)
            except Exception as exc:  # noqa: BLE001
                rec.outcome, rec.code = UNKNOWN, type(exc).__name__

    def _vote(self) -> None:
        self._write("vote", self.pool.pick(self.rng))

    def _challenge(self) -> None:
        self._write("challenge", self.pool.pick(self.rng, self.node.index))

    def _read(self) -> None:
        mid = self.pool.pick(self.rng)
        with self.history.op(self.name, self.node.index, "read", memory_id=mid) as rec:
            try:
                status = self.client.status()
                rec.result = {"height": status.height, "app_hash": status.app_hash.lower()}
                if mid is not None:
                    rec.result["memory"] = _memory_result(self.client.get(mid))
                rec.outcome = OK
            except MemLedgerError as err:
                if rec.result and err.status == 404:
                    rec.result["memory"] = None
                    rec.outcome = OK
                else:
                    rec.outcome, rec.code = FAIL, err.name or type(err).__name__
            except Exception as exc:  # noqa: BLE001
                rec.outcome, rec.code = FAIL, type(exc).__name__

    def _verified_read(self) -> None:
        mid = self.pool.pick(self.rng)
        if mid is None:
            return
        with self.history.op(self.name, self.node.index, "verified_read",
                             memory_id=mid) as rec:
            try:
                rec.result = _memory_result(self.client.get(mid, verify=True))
                rec.outcome = OK
            except ProvenAbsent as absent:
                rec.result = {"absent": True, "verified_height": absent.verified_height}
                rec.outcome = OK
            except VerificationError as err:  # refused, not accepted: that is allowed
                rec.outcome, rec.code = FAIL, f"verification:{err.reason}"
            except MemLedgerError as err:
                rec.outcome, rec.code = FAIL, err.name or type(err).__name__
            except Exception as exc:  # noqa: BLE001
                rec.outcome, rec.code = FAIL, type(exc).__name__


def start_agents(net: Testnet, history: History, stop: threading.Event,
                 seed: int) -> list[AgentLoop]:
    pool = Pool()
    agents = [AgentLoop(net, node, history, pool, stop, seed) for node in net.nodes]
    for a in agents:
        a.start()
    return agents
