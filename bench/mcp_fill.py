"""Fill a node with N memories fast, for benches that need a big ledger (bench_mcp's
session-start hook at 100k memories).

The domain belongs to `owner` (its first writer, docs/RULES.md); `owner` grants `write`
to a few fresh filler keys. Each filler's txs are signed before the clock starts and sent
in nonce order, one thread per filler, as JSON-RPC batches of `broadcast_tx_sync`
straight to CometBFT (which takes at most 10 calls a batch). A tx the mempool turns away
(full) is sent again, in order, after a pause. Then it waits until nothing is proposed
and the recall index holds every memory, reading the node's /metrics.

By default each memory is a co-commit of two filler keys (`cocommit=True`): committed
by its block's inclusion (docs/RULES.md, Co-commits), so a 100k fill does not wait for
the auto-voter to decide 100k ballots one vote at a time (it decided ~47 a second under
that backlog, BENCHMARKS.md §12). `cocommit=False` sends plain submits, decided by the
voter.
"""

from __future__ import annotations

import base64
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from nacl.signing import SigningKey

from memledger.sdk import Client
from memledger.sdk.keys import Agent
from memledger.sdk.txbuilder import TxBuilder, cocommit_core, sign_cocommit

SUBJECTS = ("deploys", "backups", "caches", "alerts", "reviews", "builds", "tests", "keys",
            "migrations", "dashboards", "queues", "certificates", "releases", "quotas")
FACTS = ("run every night at {h}:00 UTC", "need two approvals from the {t} team",
         "moved to the {t} cluster last week", "are owned by the {t} rota",
         "page the on-call after {h} failures", "keep {h} days of history",
         "are documented in the {t} handbook", "were slowed down by the {t} proxy")
TEAMS = ("platform", "storage", "payments", "search", "mobile", "infra", "data", "web")


def content(i: int) -> str:
    """A varied, deterministic sentence: recall ranks real words, not copies."""
    fact = FACTS[(i // 7) % len(FACTS)].format(h=i % 24, t=TEAMS[(i // 3) % len(TEAMS)])
    return f"Note {i}: our {SUBJECTS[i % len(SUBJECTS)]} {fact} (revision {i // 1000})."


@dataclass
class FillReport:
    memories: int
    fillers: int
    send_s: float = 0.0
    settle_s: float = 0.0
    resent: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"memories": self.memories, "fillers": self.fillers,
                "send_s": round(self.send_s, 1), "settle_s": round(self.settle_s, 1),
                "send_per_s": round(self.memories / self.send_s) if self.send_s else 0,
                "resent": self.resent, "refused": self.refused, "metrics": self.metrics}


def fill(api_url: str, rpc_url: str, chain_id: str, owner: Agent, domain: str, count: int,
         *, fillers: int = 4, batch: int = 10, settle_timeout: float = 1800,
         cocommit: bool = True) -> FillReport:
    """`count` memories in `domain` (owned by `owner`, who must have written there)."""
    if cocommit and fillers < 2:
        raise ValueError("a co-commit needs two filler keys")
    keys = [SigningKey.generate() for _ in range(fillers)]
    with Client(api_url, key=owner) as client:
        for key in keys:
            receipt = client.grant(domain, bytes(key.verify_key), "write")
            if not receipt.included:
                raise RuntimeError(f"the grant to a filler was not included: {receipt}")
    report = FillReport(count, fillers)
    before = metrics(api_url).get("memledger_recall_index_vectors", 0.0)
    signed: list[list[bytes]] = [[] for _ in keys]
    builders = [TxBuilder(key, chain_id) for key in keys]
    for i in range(count):
        k = i % fillers
        if cocommit:
            signed[k].append(_cocommit(builders[k], keys[k], keys[(k + 1) % fillers],
                                       len(signed[k]) + 1, chain_id, domain, i))
        else:
            signed[k].append(builders[k].submit(len(signed[k]) + 1, f"fill-{i}", content(i),
                                                domain=domain, memory_type="fact"))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def send(txs: list[bytes]) -> None:
        try:
            resent, refused = _send_in_order(rpc_url, txs, batch)
        except BaseException as exc:  # reported below, after the other threads end
            errors.append(exc)
            return
        with lock:
            report.resent += resent
            for code, n in refused.items():
                report.refused[code] = report.refused.get(code, 0) + n

    start = time.monotonic()
    threads = [threading.Thread(target=send, args=(txs,), daemon=True) for txs in signed]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"a filler failed: {errors[0]!r}") from errors[0]
    report.send_s = time.monotonic() - start
    start = time.monotonic()
    report.metrics = _settle(api_url, before + count - sum(report.refused.values()),
                             settle_timeout)
    report.settle_s = time.monotonic() - start
    return report


def _cocommit(builder: TxBuilder, key: SigningKey, other: SigningKey, nonce: int,
              chain_id: str, domain: str, i: int) -> bytes:
    """Memory `i` as a co-commit of `key` (the submitter) and `other`, window always open."""
    pair = sorted([key, other], key=lambda k: bytes(k.verify_key))
    core = cocommit_core(chain_id, content(i), [bytes(k.verify_key) for k in pair],
                         domain=domain, memory_type="fact", agreement_nonce=i + 1)
    return builder.cocommit(nonce, core, [sign_cocommit(k, core) for k in pair])


def _send_in_order(rpc_url: str, txs: list[bytes], batch: int) -> tuple[int, dict[str, int]]:
    """Send `txs` in order; a tx turned away for a full mempool is sent again (with the
    rest of its batch, keeping nonce order). Returns (resent, refused by code)."""
    resent = 0
    refused: dict[str, int] = {}
    at = 0
    with httpx.Client(timeout=120) as http:
        while at < len(txs):
            chunk = txs[at:at + batch]
            calls = [{"jsonrpc": "2.0", "id": n, "method": "broadcast_tx_sync",
                      "params": {"tx": base64.b64encode(tx).decode()}}
                     for n, tx in enumerate(chunk)]
            payload = http.post(rpc_url, json=calls).json()
            if not isinstance(payload, list):
                raise RuntimeError(f"{rpc_url} refused the batch: {str(payload)[:300]}")
            answers = sorted(payload, key=lambda a: a["id"])
            done = len(chunk)
            for n, answer in enumerate(answers):
                error = answer.get("error")
                if error is not None:
                    if "full" in str(error.get("data", "")) + str(error.get("message", "")):
                        done = n  # the mempool is full: send again from here, later
                        break
                    raise RuntimeError(f"broadcast refused: {error}")
                code = int(answer["result"].get("code", 0))
                if code:
                    refused[str(code)] = refused.get(str(code), 0) + 1
            at += done
            if done < len(chunk):
                resent += len(chunk) - done
                time.sleep(0.5)
    return resent, refused


_METRIC = re.compile(r"^(memledger_[a-z_]+) ([0-9.e+-]+)$", re.M)


def metrics(api_url: str) -> dict[str, float]:
    text = httpx.get(f"{api_url}/metrics", timeout=30).text
    return {name: float(value) for name, value in _METRIC.findall(text)}


def _settle(api_url: str, vectors: float, timeout: float) -> dict[str, float]:
    """Wait until nothing is proposed and the recall index holds `vectors` memories, at
    its projection's height; returns the last metrics read."""
    deadline = time.monotonic() + timeout
    while True:
        seen = metrics(api_url)
        if (seen.get("memledger_proposed_backlog", 1) == 0
                and seen.get("memledger_recall_index_vectors", 0) >= vectors
                and seen.get("memledger_recall_lag_blocks", 1) == 0):
            return seen
        if time.monotonic() > deadline:
            raise RuntimeError(f"the node did not settle in {timeout:.0f} s: {seen}")
        time.sleep(2)
