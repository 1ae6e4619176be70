"""The REST write path against a real node (cometbft + app + API), on SQLite and PostgreSQL.

Every bad input gets the right 4xx problem+json with the ledger's code where there is
one, and the node keeps serving afterwards. The voter is off so tests decide votes.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger.daemon import cometbft
from memledger.protocol.pb import tx_pb2
from memledger.sdk import Client
from memledger.sdk.txbuilder import TxBuilder
from tests.support.chain import seeded_key
from tests.support.node import NodeRunner, wait_api_ready
from tests.support.postgres import create_database, drop_database, unique_db_name

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-rest"
AGENT = seeded_key("rest-agent")
OTHER = seeded_key("rest-other")



@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres",
                                                               marks=pytest.mark.postgres)])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
         cometbft_bin: Path) -> Iterator[NodeRunner]:
    db_url, pg, dbname = "", "", ""
    if request.param == "postgres":
        pg = request.getfixturevalue("postgres_url")
        dbname = unique_db_name("rest")
        db_url = create_database(pg, dbname)
    runner = NodeRunner(tmp_path_factory.mktemp(f"rest-{request.param}") / "home",
                        chain_id=CHAIN, db_url=db_url)
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        yield runner
    finally:
        runner.stop()
        if pg:
            drop_database(pg, dbname)


class Nonces:
    """Fresh nonces per test run (time-based, like the SDK)."""

    def __init__(self) -> None:
        self.last = 0

    def __call__(self) -> int:
        self.last = max(time.time_ns(), self.last + 1)
        return self.last


NONCE = Nonces()


def _api(node: NodeRunner) -> httpx.Client:
    return httpx.Client(base_url=node.api_url, timeout=60)


def _b64(tx: bytes) -> dict[str, str]:
    return {"tx": base64.b64encode(tx).decode()}


def _problem(resp: httpx.Response, status: int, name: str, code: int | None = None
             ) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json"), resp.headers
    doc: dict[str, Any] = resp.json()
    assert doc["name"] == name and doc["status"] == status, doc
    assert doc["detail"] and doc["title"], doc
    assert "Traceback" not in resp.text
    if code is not None:
        assert doc["code"] == code, doc
    return doc


def _still_serving(api: httpx.Client) -> None:
    assert api.get("/health").status_code == 200
    assert api.get("/v1/status").status_code == 200
    assert api.get("/v1/memories", params={"limit": 1}).status_code == 200


def _forge(tx: bytes) -> bytes:
    env = tx_pb2.Tx.FromString(tx)
    env.signature = bytes(63) + b"\x07"
    return env.SerializeToString(deterministic=True)


def test_raw_and_json_submission_forms(node: NodeRunner) -> None:
    agent = TxBuilder(AGENT, CHAIN)
    with _api(node) as api:
        raw = agent.submit(NONCE(), "r-raw", "submitted as raw octet-stream bytes")
        resp = api.post("/v1/txs", params={"wait": "commit"}, content=raw,
                        headers={"content-type": "application/octet-stream"})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["status"] == "included" and body["code"] == 0 and body["height"] > 0
        # The tx is included; the memory it proposes is not committed by that (issue 18).
        assert body["memory_id"] == "r-raw" and body["memory_status"] == "proposed", body
        assert body["hash"] == hashlib.sha256(raw).hexdigest()
        assert any(e["type"] == "memory" and e["attributes"]["id"] == "r-raw"
                   for e in body["events"])
        assert api.get("/v1/memories/r-raw").json()["status"] == "proposed"

        synced = agent.submit(NONCE(), "r-sync", "submitted as JSON, waiting for CheckTx")
        resp = api.post("/v1/memories", params={"wait": "sync"}, json=_b64(synced))
        assert resp.status_code == 202, resp.text
        assert resp.json()["status"] == "accepted" and resp.json()["memory_id"] == "r-sync"
        tx_hash = resp.json()["hash"]
        assert resp.headers["location"] == f"/v1/txs/{tx_hash}"
        with Client(node.api_url) as ml:
            assert ml.wait_tx(tx_hash).committed

        # the JSON form: fields + signature over the body the client built
        signed = tx_pb2.Tx.FromString(agent.submit(nonce := NONCE(), "r-form",
                                                   "submitted as the JSON field form",
                                                   tags=["b", "a"]))
        form = {"memory_id": "r-form", "content": "submitted as the JSON field form",
                "tags": ["a", "b"], "nonce": nonce, "public_key": signed.public_key.hex(),
                "signature": signed.signature.hex()}
        resp = api.post("/v1/memories", params={"wait": "commit"}, json=form)
        assert resp.status_code == 200, resp.text
        assert api.get("/v1/memories/r-form").json()["tags"] == ["a", "b"]

        fire = agent.submit(NONCE(), "r-none", "fire and forget")
        resp = api.post("/v1/txs", params={"wait": "none"}, json=_b64(fire))
        assert resp.status_code == 202 and resp.json()["status"] == "submitted"


def test_bad_signature_is_code_8(node: NodeRunner) -> None:
    agent = TxBuilder(AGENT, CHAIN)
    with _api(node) as api:
        forged = _forge(agent.submit(NONCE(), "r-forged", "forged signature"))
        doc = _problem(api.post("/v1/txs", json=_b64(forged)), 400, "bad_signature", 8)
        assert doc["codespace"] == "memledger" and doc["hash"]
        _problem(api.post("/v1/memories", params={"wait": "commit"}, json=_b64(forged)), 400,
                 "bad_signature", 8)
        form = {"memory_id": "r-forged", "content": "forged signature", "nonce": NONCE(),
                "public_key": bytes(AGENT.verify_key).hex(), "signature": "00" * 64}
        _problem(api.post("/v1/memories", json=form), 400, "bad_signature", 8)
        _still_serving(api)
        assert api.get("/v1/memories/r-forged").status_code == 404


def _at_once(node: NodeRunner, tx: bytes, wait: str, copies: int) -> list[tuple[int, str]]:
    """POST the same bytes from `copies` threads at once; (status, name) of each answer."""
    import threading

    answers: list[tuple[int, str]] = []

    def post() -> None:
        with _api(node) as api:
            resp = api.post("/v1/txs", params={"wait": wait}, json=_b64(tx))
            answers.append((resp.status_code, resp.json().get("name", "")))

    threads = [threading.Thread(target=post) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_copies_sent_at_once_are_never_acknowledged_unless_checked(node: NodeRunner) -> None:
    """cometbft caches a tx's bytes before CheckTx runs and drops them when CheckTx
    refuses it: a second copy arriving meanwhile hears "already in cache". That was
    answered 202 accepted (code 0) for forged txs: 8 of 16 copies in one run."""
    agent = TxBuilder(AGENT, CHAIN)
    for wait in ("sync", "sync", "commit"):
        forged = _forge(agent.submit(NONCE(), f"r-copies-{wait}", "sent 12 times at once"))
        answers = _at_once(node, forged, wait, 12)
        assert answers == [(400, "bad_signature")] * 12, answers
    # A good tx sent twice at once: both copies acknowledged, and it lands once.
    good = agent.submit(NONCE(), "r-copies-good", "a valid tx, sent twice")
    with _api(node) as api, _api(node) as other:
        first = api.post("/v1/txs", params={"wait": "sync"}, json=_b64(good))
        second = other.post("/v1/txs", params={"wait": "sync"}, json=_b64(good))
        assert (first.status_code, second.status_code) in {(202, 202), (202, 200)}, second.text
        assert second.json()["code"] == 0
        landed = api.post("/v1/txs", params={"wait": "commit"}, json=_b64(good))
        assert landed.status_code == 200 and landed.json()["status"] == "included", landed.text


def test_nonce_rules(node: NodeRunner) -> None:
    agent = TxBuilder(OTHER, CHAIN)
    pk = bytes(OTHER.verify_key).hex()
    with _api(node) as api:
        first = NONCE()
        ok = api.post("/v1/txs", params={"wait": "commit"},
                      json=_b64(agent.submit(first, "n-1", "first with this nonce")))
        assert ok.status_code == 200, ok.text
        account = api.get(f"/v1/accounts/{pk}").json()
        assert account["last_nonce"] == first and account["next_nonce"] == first + 1
        replay = agent.submit(first, "n-2", "same nonce, different memory")
        doc = _problem(api.post("/v1/txs", params={"wait": "commit"}, json=_b64(replay)), 409,
                       "nonce_replayed", 10)
        assert doc["stage"] == "check_tx"
        # v3 window: an unused lower nonce is still fresh, in any order.
        older = api.post("/v1/txs", params={"wait": "commit"},
                         json=_b64(agent.submit(first - 5, "n-3", "older but unused")))
        assert older.status_code == 200, older.text
        _problem(api.post("/v1/txs", json=_b64(agent.submit(first - 5, "n-3b", "again"))), 409,
                 "nonce_replayed", 10)
        _problem(api.post("/v1/txs", json=_b64(agent.submit(0, "n-4", "zero"))), 400,
                 "nonce_zero", 9)
        wrong_chain = TxBuilder(OTHER, "other-chain").submit(NONCE(), "n-5", "wrong chain")
        _problem(api.post("/v1/txs", json=_b64(wrong_chain)), 400, "wrong_chain_id", 6)
        # Two txs sharing a nonce: CheckTx sees the first one pending in the mempool and
        # refuses the second at the door (or, had a block taken the first in between,
        # as a replay), so it is never acknowledged.
        n = NONCE()
        a = agent.submit(n, "n-6", "first of a pair sharing a nonce")
        b = agent.submit(n, "n-7", "second of a pair sharing a nonce")
        assert api.post("/v1/txs", params={"wait": "sync"}, json=_b64(a)).status_code == 202
        second = api.post("/v1/txs", params={"wait": "commit"}, json=_b64(b))
        doc = _problem(second, 409, second.json().get("name", "?"))
        assert (doc["name"], doc["code"]) in {("nonce_pending", 14), ("nonce_replayed", 10)}
        assert doc["stage"] == "check_tx"
        assert api.get("/v1/memories/n-7").status_code == 404
        _still_serving(api)


def test_unknown_outcome_is_not_failure(node: NodeRunner) -> None:
    agent = TxBuilder(AGENT, CHAIN)
    tx = agent.submit(NONCE(), "r-slow", "a commit wait that times out first")
    with _api(node) as api:
        resp = api.post("/v1/txs", params={"wait": "commit", "timeout": 0.001}, json=_b64(tx))
        assert resp.status_code == 202, resp.text
        body = resp.json()
        assert body["status"] == "unknown" and body["code"] is None
        assert f"/v1/txs/{body['hash']}" in body["log"]
        again = api.post("/v1/txs", params={"wait": "commit"}, json=_b64(tx))  # same bytes
        assert again.status_code == 200 and again.json()["status"] == "included", again.text
        assert api.get(f"/v1/txs/{body['hash'].upper()}").json()["status"] == "included"
        _problem(api.get(f"/v1/txs/{'0' * 64}"), 404, "tx_not_found")
        _problem(api.get("/v1/txs/xyz"), 422, "invalid_request")


def test_bad_http_input(node: NodeRunner) -> None:
    with _api(node) as api:
        _problem(api.post("/v1/txs", content=b'{"tx": ', headers={"content-type":
                                                                  "application/json"}),
                 400, "malformed_json")
        _problem(api.post("/v1/memories", content=b"{]", headers={"content-type":
                                                                 "application/json"}),
                 400, "malformed_json")
        _problem(api.post("/v1/txs", json={"tx": "%%%"}), 400, "invalid_base64")
        _problem(api.post("/v1/txs", json={"tx": "AA==", "extra": 1}), 422, "invalid_request")
        _problem(api.post("/v1/txs", content=b"\x00\x01garbage",
                          headers={"content-type": "application/octet-stream"}),
                 400, "tx_decode", 2)
        vote = TxBuilder(AGENT, CHAIN).vote(NONCE(), "r-raw")
        _problem(api.post("/v1/memories", json=_b64(vote)), 422, "wrong_tx_kind")
        _problem(api.post("/v1/txs", params={"wait": "later"}, json=_b64(vote)), 422,
                 "invalid_request")
        oversized = {"tx": base64.b64encode(b"x" * (2 << 20)).decode()}
        doc = _problem(api.post("/v1/txs", json=oversized), 413, "body_too_large")
        assert "limit" in doc["detail"]
        _problem(api.get("/v1/memories/does-not-exist"), 404, "not_found")
        _problem(api.get("/v1/memories", params={"status": "pending"}), 422, "invalid_request")
        _problem(api.get("/v1/memories", params={"limit": 0}), 422, "invalid_request")
        _problem(api.get("/v1/memories", params={"cursor": "bm9wZQ"}), 422, "invalid_request")
        _problem(api.get("/v1/nope"), 404, "not_found")
        _problem(api.put("/v1/txs"), 405, "method_not_allowed")
        assert api.put("/v1/memories").headers["allow"] == "GET, HEAD, POST"  # HEAD comes with GET
        _still_serving(api)


def test_sdk_vote_commits_and_metrics_count_codes(node: NodeRunner) -> None:
    validator = cometbft.validator_signing_key(node.home / "cometbft")
    with Client(node.api_url, key=AGENT) as agent, \
            Client(node.api_url, key=validator) as val:
        receipt = agent.submit("r-voted", "a memory the validator accepts", tags=["t"])
        assert receipt.committed and receipt.memory_id == "r-voted"
        assert val.vote("r-voted", "accept", reason="checked by hand").committed
        memory = agent.get_memory("r-voted")
        assert memory.status == "committed" and memory.decided_height is not None
        assert [(v.decision, v.reason) for v in agent.votes("r-voted")] == \
            [("accept", "checked by hand")]
        assert memory.status_reason is not None
        assert memory.status_reason.endswith("voted accept: checked by hand")
        assert [m.id for m in agent.search("validator accepts")] == ["r-voted"]
        assert agent.status().chain_id == CHAIN
    with _api(node) as api:
        # A rejection of its own to count (not test_bad_signature_is_code_8's).
        forged = _forge(TxBuilder(AGENT, CHAIN).submit(NONCE(), "r-forged-2", "forged"))
        _problem(api.post("/v1/txs", json=_b64(forged)), 400, "bad_signature", 8)
        text = api.get("/metrics").text
    assert 'memledger_tx_submissions_total{code="8",name="bad_signature"' in text or \
        'name="bad_signature"' in text
    assert 'name="ok",wait="commit"' in text
    assert "memledger_block_height" in text and "memledger_proposed_backlog" in text
