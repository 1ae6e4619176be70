"""The clients seal before they send and open after they read (private domains, v10+):
no request a node receives holds the plaintext, and a reader without the epoch key gets
the envelope (sync and async alike)."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest

from memledger import AsyncClient, Client
from memledger.protocol import sealed
from memledger.protocol.pb import tx_pb2
from memledger.sdk import private
from memledger.sdk.private import EpochKeyMissing
from tests.support.chain import seeded_key

OWNER = seeded_key("client-private-owner")
STRANGER = seeded_key("client-private-stranger")
DOMAIN = "team/private"
SECRET = "canary-client-3d9 the alarm code is 0451"
EPOCH_KEY = private.new_epoch_key()
RECORD = {"owner": bytes(OWNER.verify_key).hex(), "scope": None, "created": 2,
          "private": {"since": 2, "epochs": [{"epoch": 1, "since": 2, "keys": {
              bytes(OWNER.verify_key).hex():
                  private.seal_epoch_key(EPOCH_KEY, bytes(OWNER.verify_key)).hex()}}]}}


class Node:
    """Answers the domain proof and tx posts; keeps every request body it was sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.txs: list[tx_pb2.TxBody] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request.url.query + request.content)
        if request.url.path == "/v1/proofs/domain":
            value = base64.b64encode(json.dumps(RECORD).encode()).decode()
            return httpx.Response(200, json={"kind": "domain", "id": DOMAIN,
                                             "record": {"value": value, "height": 3}})
        if request.method == "POST":
            raw = base64.b64decode(json.loads(request.content)["tx"])
            self.txs.append(tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(raw).body))
            return httpx.Response(200, json={"status": "included", "hash": "00" * 32,
                                             "code": 0, "height": 4})
        envelope = self.txs[-1].memory_submit.content
        return httpx.Response(200, json=_served(envelope))


def _served(envelope: str) -> dict[str, Any]:
    return {"id": "p-1", "domain": DOMAIN, "author": RECORD["owner"], "type": "fact",
            "content": envelope, "content_hash": "00", "confidence_ppm": 900_000,
            "tags": [], "status": "proposed", "submitted_height": 4,
            "submitted_time_ns": 0, "decided_height": None, "epoch": 1}


def test_the_sync_client_seals_before_sending_and_opens_after_reading() -> None:
    node = Node()
    with Client("http://node", key=OWNER, chain_id="c",
                transport=httpx.MockTransport(node)) as ml:
        ml.submit("p-1", SECRET, domain=DOMAIN)
        body = node.txs[-1].memory_submit
        assert body.epoch == 1 and sealed.is_sealed(body.content)
        assert all(SECRET.encode() not in sent for sent in node.sent)
        got = ml.get_memory("p-1")
        assert got.content == SECRET and not got.sealed
        with pytest.raises(Exception, match="carry no tags"):
            ml.submit("p-2", SECRET, domain=DOMAIN, tags=["t"])
    with Client("http://node", key=STRANGER, chain_id="c",
                transport=httpx.MockTransport(node)) as other:
        seen = other.get_memory("p-1")
        assert seen.sealed and SECRET not in (seen.content or "")
        with pytest.raises(EpochKeyMissing, match="epoch 1"):
            other.submit("p-3", SECRET, domain=DOMAIN)
    assert all(SECRET.encode() not in sent for sent in node.sent)


def test_the_async_client_seals_and_opens_alike() -> None:
    node = Node()

    async def run() -> None:
        async with AsyncClient("http://node", key=OWNER, chain_id="c",
                               transport=httpx.MockTransport(node)) as aml:
            await aml.submit("p-1", SECRET, domain=DOMAIN)
            assert (await aml.get_memory("p-1")).content == SECRET

    asyncio.run(run())
    assert sealed.is_sealed(node.txs[-1].memory_submit.content)
    assert all(SECRET.encode() not in sent for sent in node.sent)


class TurningNode(Node):
    """A domain made private in the newest block: its settled record (fresh=false) still
    says public, so the first submit is plaintext, refused by consensus (code 110)."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/proofs/domain":
            fresh = request.url.params.get("fresh", "true")
            self.lookups.append(fresh)
            if fresh == "false":
                self.sent.append(request.url.query)
                return httpx.Response(200, json={"kind": "domain", "id": DOMAIN,
                                                 "record": {"value": None, "height": 2}})
        if request.method == "POST" and not self.txs:
            raw = base64.b64decode(json.loads(request.content)["tx"])
            self.txs.append(tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(raw).body))
            return httpx.Response(422, json={
                "type": "urn:memledger:problem:private_content_not_sealed",
                "title": "refused", "status": 422, "detail": "refused",
                "name": "private_content_not_sealed", "code": 110})
        return super().__call__(request)


def _first_words_through_both_clients(node_class: type[Node]) -> tuple[Any, Any, Any]:
    """(sync receipt, the node the sync client wrote to, the node the async one wrote
    to): one submit of "first words" to DOMAIN through each client, each on a new node."""
    node = node_class()
    with Client("http://node", key=OWNER, chain_id="c",
                transport=httpx.MockTransport(node)) as ml:
        receipt = ml.submit(None, "first words", domain=DOMAIN)
    async_node = node_class()

    async def run() -> None:
        async with AsyncClient("http://node", key=OWNER, chain_id="c",
                               transport=httpx.MockTransport(async_node)) as aml:
            await aml.submit(None, "first words", domain=DOMAIN)

    asyncio.run(run())
    return receipt, node, async_node


def test_a_write_looks_the_domain_up_settled_and_reseals_when_it_just_turned() -> None:
    """The lookup before sealing is at the settled height (verifies with no wait for a
    block); a refusal saying the domain changed in the newest block seals again from a
    fresh lookup, once, in both clients."""
    receipt, node, async_node = _first_words_through_both_clients(TurningNode)
    assert receipt.included and node.lookups == ["false", "true"]
    assert [bool(t.memory_submit.epoch) for t in node.txs] == [False, True]
    assert sealed.is_sealed(node.txs[-1].memory_submit.content)
    assert async_node.lookups == ["false", "true"]
    assert sealed.is_sealed(async_node.txs[-1].memory_submit.content)


class GrantedNode(Node):
    """This key was granted the epoch key in the newest block: its settled record
    (fresh=false) names the epoch but holds no sealed copy for it yet."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/proofs/domain":
            fresh = request.url.params.get("fresh", "true")
            self.lookups.append(fresh)
            if fresh == "false":
                before = json.loads(json.dumps(RECORD))
                before["private"]["epochs"][0]["keys"] = {}
                value = base64.b64encode(json.dumps(before).encode()).decode()
                return httpx.Response(200, json={"kind": "domain", "id": DOMAIN,
                                                 "record": {"value": value, "height": 2}})
        return super().__call__(request)


def test_a_write_just_after_its_grant_looks_the_key_up_afresh() -> None:
    """A member writing right after the grant that hands it the epoch key: the settled
    lookup has no key for it yet, so the client looks again at the newest height instead
    of failing with EpochKeyMissing (both clients)."""
    receipt, node, async_node = _first_words_through_both_clients(GrantedNode)
    assert receipt.included and node.lookups == ["false", "true"]
    assert sealed.is_sealed(node.txs[-1].memory_submit.content)
    assert async_node.lookups == ["false", "true"]
    assert sealed.is_sealed(async_node.txs[-1].memory_submit.content)
