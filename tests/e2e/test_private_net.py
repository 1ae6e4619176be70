"""Private domains on four real validators (issue 39, Must show 1 and 2).

A member writes a private memory holding a unique canary. No file under any node's home
(LMDB, SQL projection, indexes, snapshots, logs, CometBFT's block store and WAL) and no
answer of any node's REST API or CometBFT RPC holds the canary, while a member on another
node reads it (verified) and recalls it by a paraphrase, and a non-member gets only the
ciphertext. Then the member is revoked: what is written after cannot be opened with the
keys it kept, and what it could read before still can.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger import Client
from memledger.protocol import sealed
from memledger.protocol.codes import Code
from memledger.recall.defaults import DEFAULT_EMBEDDER
from memledger.recall.embedder import make_embedder
from memledger.sdk.errors import MemLedgerError
from memledger.sdk.keys import Agent
from memledger.sdk.light import GenesisRoot
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import Testnet

pytestmark = pytest.mark.cometbft

DOMAIN = "team/incidents"
CANARY = f"canary{uuid.uuid4().hex}"
SECRET = f"The passphrase for the incident bridge call is {CANARY}"
OTHERS = ["Lunch orders for the offsite go to the kitchen by noon on Fridays",
          "The staging database is rebuilt every night from the anonymised snapshot"]


@pytest.fixture(scope="module")
def pnet(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[Testnet]:
    """Four equal validators with voters and REST APIs (app version 10, the latest)."""
    testnet = Testnet.create(tmp_path_factory.mktemp("pnet"), 4, chain_id="memledger-private")
    try:
        testnet.up(api=True, voter=True)
        for url in [node.api_url for node in testnet.nodes]:
            wait_until(partial(_answers, url), 60, 0.5, what=f"the API at {url}")
        yield testnet
    finally:
        testnet.down(timeout=20)
        for node in testnet.nodes:
            node.kill()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/v1/status", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def root_of(net: Testnet) -> GenesisRoot:
    return GenesisRoot.from_file(net.node(0).node_home.cometbft / "config" / "genesis.json")


def client(net: Testnet, i: int, agent: Agent) -> Client:
    return Client(net.node(i).api_url, key=agent, trust=root_of(net))


def pk(agent: Agent) -> bytes:
    return bytes(agent.signing_key.verify_key)


def _files_holding(net: Testnet, needle: bytes) -> list[str]:
    found = []
    for path in net.root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


def _rpc(url: str, method: str, **params: Any) -> str:
    resp = httpx.get(f"{url}/{method}", params=params, timeout=30)
    return resp.text


def _decoded_rpc_answers(net: Testnet, memory_id: str) -> list[str]:
    """Every RPC answer about the chain's txs and the memory, with base64 fields decoded
    (tx bytes travel base64-encoded in JSON: the canary would hide from a plain search)."""
    answers = []
    for node in net.nodes:
        top = node.height() or 1
        for h in range(1, top + 1):
            answers.append(_rpc(node.rpc_url, "block", height=h))
        answers.append(_rpc(node.rpc_url, "tx_search", query='"tx.height>0"', per_page=100))
        for path in ("/content", "/memory"):
            answers.append(_rpc(node.rpc_url, "abci_query", path=f'"{path}"',
                                data="0x" + memory_id.encode().hex()))
    out = []
    for text in answers:
        out.append(text)
        for word in text.replace('"', " ").split():
            if len(word) >= 16:
                try:
                    out.append(base64.b64decode(word, validate=True).decode("latin-1"))
                except ValueError:
                    continue
    return out


def test_private_memory_reaches_members_only(pnet: Testnet) -> None:
    owner, member, outsider = Agent.generate(), Agent.generate(), Agent.generate()
    with client(pnet, 0, owner) as own, client(pnet, 1, member) as mem, \
            client(pnet, 2, outsider) as out:
        assert own.make_private(DOMAIN).code == 0
        assert own.grant(DOMAIN, pk(member), "write").code == 0  # grant + sealed key
        receipt = mem.submit(None, SECRET, domain=DOMAIN, wait="decided")
        assert receipt.code == 0 and receipt.memory_status == "committed", receipt
        secret_id = receipt.memory_id
        assert secret_id is not None
        for i, text in enumerate(OTHERS):
            assert own.submit(f"other-{i}", text, domain=DOMAIN, wait="decided").code == 0
        # a plain write into the private domain is refused by consensus
        with pytest.raises(MemLedgerError) as refused:
            out.send("memory_submit", memory_id="plain", content="oops", domain=DOMAIN)
        assert refused.value.code in (Code.DOMAIN_WRITE_DENIED,
                                      Code.PRIVATE_CONTENT_NOT_SEALED)
        pnet.wait_caught_up()
        # 1. no file under any node's home holds the canary
        assert _files_holding(pnet, CANARY.encode()) == []
        # 2. no RPC or REST answer of any node holds it
        for text in _decoded_rpc_answers(pnet, secret_id):
            assert CANARY not in text
        for node in pnet.nodes:
            for path, params in ((f"/v1/memories/{secret_id}", {"prove": "true"}),
                                 ("/v1/memories", {"domain": DOMAIN}),
                                 ("/v1/memories", {"q": "passphrase bridge", "mode": "text"}),
                                 ("/v1/proofs/content", {"id": secret_id})):
                answer = httpx.get(node.api_url + path, params=params, timeout=30).text
                assert CANARY not in answer, (node.name, path)
        # 3. the owner, on another node, reads it verified; the non-member gets ciphertext
        got = own.get(secret_id, verify=True)
        assert got.content == SECRET and got.verified_height and not got.sealed
        seen = out.get(secret_id)
        assert seen.sealed and seen.content is not None and sealed.is_sealed(seen.content)
        assert CANARY not in seen.content
        # 4. the owner recalls it by a paraphrase, ranked locally and merged
        embedder = make_embedder(DEFAULT_EMBEDDER)
        assert embedder is not None
        own.local.use_embedder(lambda texts: embedder.embed(texts).tolist())
        assert own.local.sync([DOMAIN]) == 3
        hits = own.recall("what is the secret code word to join the outage call", limit=1)
        assert [h.id for h in hits] == [secret_id] and hits[0].mode == "local"
        assert out.local.sync([DOMAIN]) == 0  # nothing the non-member can open


def test_revoked_member_cannot_read_what_follows(pnet: Testnet) -> None:
    owner, member = Agent.generate(), Agent.generate()
    domain = "team/revoked"
    with client(pnet, 0, owner) as own, client(pnet, 3, member) as mem:
        assert own.make_private(domain).code == 0
        assert own.grant(domain, pk(member), "read").code == 0
        own.submit("before-revoke", "the rota changes on monday", domain=domain)
        assert mem.get("before-revoke").content == "the rota changes on monday"
        revoked = own.revoke(domain, pk(member))
        assert revoked.code == 0
        height = revoked.height
        own.submit("after-revoke", "the new door code is 4455", domain=domain)
        record, _ = own.verified_record("domain", domain)
        epochs = record["private"]["epochs"]
        assert [e["epoch"] for e in epochs] == [1, 2] and epochs[1]["since"] == height
        assert pk(member).hex() not in epochs[1]["keys"]
        assert record["private"]["revoked"] == [[height, pk(member).hex()]]
        after = mem.get("after-revoke")
        assert after.sealed and after.epoch == 2  # written after H: ciphertext only
        # what it could read before stays readable with the keys it kept (and the chain
        # still holds its epoch-1 copy: a revoke cannot take back what was delivered)
        with client(pnet, 1, member) as fresh:
            assert fresh.get("before-revoke").content == "the rota changes on monday"
            assert fresh.get("after-revoke").sealed
        assert json.dumps(record).count(pk(member).hex()) == 2  # epoch-1 key + revoked list
