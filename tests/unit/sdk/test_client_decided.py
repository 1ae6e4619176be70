"""SDK: a tx is *included*; the memory is decided later (issue 18, points 6-7).

`submit(wait="decided")` waits for the validators, so a search right after it finds the
memory `committed`; `memory_status` always says what became of the memory, apart from
the tx's own `status`. Against a scripted node (httpx MockTransport).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from nacl.signing import SigningKey

from memledger.sdk import AsyncClient, Client, MemLedgerError, TxReceipt

KEY = SigningKey(b"\x07" * 32)
CHAIN = "decided-test"


def _memory(status: str) -> dict[str, Any]:
    return {"id": "m-1", "domain": "general", "author": "a" * 64, "type": "fact",
            "content": "some content", "content_hash": "0" * 64, "confidence": 0.9,
            "confidence_ppm": 900_000, "tags": [], "status": status, "submitted_height": 7,
            "submitted_time_ns": 1, "decided_height": None if status == "proposed" else 8,
            "scope": None, "cocommit": None, "tx": "f" * 64, "history": [[7, "proposed"]],
            "status_reason": "accepted by validator votes" if status == "committed" else None}


def node(statuses: list[str]) -> Callable[[httpx.Request], httpx.Response]:
    """POST /v1/memories includes the tx (memory proposed); GETs answer `statuses` in
    turn, repeating the last."""
    seen = list(statuses)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            tx = base64.b64decode(json.loads(request.content)["tx"])
            return httpx.Response(200, json={
                "status": "included", "hash": hashlib.sha256(tx).hexdigest(), "code": 0,
                "height": 7, "memory_id": "m-1", "memory_status": "proposed"})
        status = seen.pop(0) if len(seen) > 1 else seen[0]
        return httpx.Response(200, json=_memory(status))

    return handle


def _client(statuses: list[str]) -> Client:
    return Client("http://node", key=KEY, chain_id=CHAIN,
                           transport=httpx.MockTransport(node(statuses)))


def test_commit_wait_returns_an_included_tx_and_a_proposed_memory() -> None:
    with _client(["proposed"]) as ml:
        receipt = ml.submit("m-1", "some content")
    assert receipt.status == "included" and receipt.included
    assert receipt.memory_status == "proposed"


def test_decided_wait_returns_the_validators_verdict() -> None:
    with _client(["proposed", "proposed", "committed"]) as ml:
        receipt = ml.submit("m-1", "some content", wait="decided")
        assert receipt.status == "included" and receipt.memory_status == "committed"
        memory = ml.wait_decided("m-1")
    assert memory.status == "committed" and memory.status_reason == "accepted by validator votes"


def test_undecided_by_the_deadline_is_reported_not_raised() -> None:
    with _client(["proposed"]) as ml:
        receipt = ml.submit("m-1", "some content", wait="decided", decide_timeout=0.3)
        assert receipt.included and receipt.memory_status == "proposed"
        with pytest.raises(MemLedgerError) as info:
            ml.wait_decided("m-1", timeout=0.3, poll=0.05)
    assert info.value.name == "decision_timeout" and "still proposed" in str(info.value)


def test_async_client_waits_the_same_way() -> None:
    async def run() -> TxReceipt:
        async with AsyncClient(
                "http://node", key=KEY, chain_id=CHAIN,
                transport=httpx.MockTransport(node(["proposed", "deprecated"]))) as ml:
            return await ml.submit("m-1", "some content", wait="decided")

    assert asyncio.run(run()).memory_status == "deprecated"


def test_receipts_from_older_nodes_still_count_as_included() -> None:
    old = TxReceipt.from_json({"status": "committed", "hash": "h", "events": [
        {"type": "memory", "attributes": {"id": "m-1", "status": "proposed"}}]})
    assert old.included and old.committed and old.memory_status == "proposed"
