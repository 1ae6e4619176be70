"""REST read routes against a projection written by the real engine (in-process chain).

No cometbft here: the app points its RPC at a closed port, which also shows that reads
never depend on it. Write routes are covered by tests/integration/test_rest_api.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from memledger.api import ApiSettings, create_app
from memledger.api.db import readonly_engine
from tests.support.api import served_api
from tests.support.chain import LocalChain, seeded_key

ALICE = seeded_key("api-alice")
BOB = seeded_key("api-bob")
A_HEX = bytes(ALICE.verify_key).hex()
PAGED = 23


def _build(chain: LocalChain) -> None:
    a, b = chain.builder(ALICE), chain.builder(BOB)
    v3, v4 = (chain.builder(k) for k in chain.validator_keys[2:])
    n = chain.next_nonce
    chain.block([
        a.submit(n(ALICE), "m-cache", "The build cache lives in the .cache directory",
                 tags=["infra", "build"]),
        a.submit(n(ALICE), "m-deploy", "Deploys happen on Tuesdays after the standup",
                 memory_type="observation", tags=["ops"]),
        b.submit(n(BOB), "team/m-rust", "Rust compile times dropped after caching crates",
                 domain="team-b", tags=["build"]),
    ])
    chain.block([v3.vote(n(chain.validator_keys[2]), "m-cache"),
                 v4.vote(n(chain.validator_keys[3]), "m-cache"),
                 v3.vote(n(chain.validator_keys[2]), "team/m-rust"),
                 v4.vote(n(chain.validator_keys[3]), "team/m-rust")])
    chain.block([b.corroborate(n(BOB), "m-cache"), a.corroborate(n(ALICE), "team/m-rust")])
    chain.block([b.challenge(n(BOB), "team/m-rust", "numbers are from one machine")])
    for i in range(PAGED):
        chain.block([a.submit(n(ALICE), f"p-{i:02d}", f"paged memory number {i} about zebras",
                              domain="paging", tags=["paged"])])
    results = chain.last_results
    assert all(r.code == 0 for r in results), results


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalChain]:
    chain = LocalChain(tmp_path_factory.mktemp("api-reads"))
    _build(chain)
    yield chain
    chain.close()


@pytest.fixture(scope="module")
def api(chain: LocalChain) -> Iterator[TestClient]:
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def served(chain: LocalChain) -> Iterator[str]:
    """The same app served by uvicorn over real HTTP (its base URL)."""
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x")
    with served_api(settings) as url:
        yield url


def _problem(resp: Any, status: int, name: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    doc: dict[str, Any] = resp.json()
    assert doc["status"] == status and doc["name"] == name, doc
    assert doc["detail"] and doc["title"] and doc["type"]
    assert "Traceback" not in resp.text
    return doc


def test_get_memory_and_unknown_id(api: TestClient) -> None:
    doc = api.get("/v1/memories/m-cache").json()
    assert doc["status"] == "committed" and doc["content"].startswith("The build cache")
    assert doc["tags"] == ["build", "infra"] and doc["author"] == A_HEX
    assert doc["confidence"] == 0.9 and doc["confidence_ppm"] == 900_000
    assert doc["corroborators"] == [bytes(BOB.verify_key).hex()]
    assert [h[1] for h in doc["history"]] == ["proposed", "committed"]
    slash = api.get("/v1/memories/team/m-rust").json()
    assert slash["id"] == "team/m-rust" and slash["status"] == "challenged"
    problem = _problem(api.get("/v1/memories/nope"), 404, "not_found")
    assert "nope" in problem["detail"] and problem["instance"] == "/v1/memories/nope"


def test_filters(api: TestClient) -> None:
    def ids(**params: Any) -> list[str]:
        resp = api.get("/v1/memories", params={"limit": 500, **params})
        assert resp.status_code == 200, resp.text
        return [m["id"] for m in resp.json()["items"]]

    assert ids(domain="general") == ["m-cache"]  # by default committed only
    assert ids(domain="general", status=["proposed", "committed"]) == ["m-cache", "m-deploy"]
    assert ids(type="observation") == []
    assert ids(type="observation", status="proposed") == ["m-deploy"]
    assert ids(status="committed") == ["m-cache"]
    assert ids(tag="build") == ["m-cache"]  # the challenged one is hidden by default
    assert ids(tag="build", include_disputed="true") == ["m-cache", "team/m-rust"]
    assert ids(tag=["build", "infra"]) == ["m-cache"]
    assert ids(status="challenged") == ["team/m-rust"]
    assert ids(author=A_HEX.upper(), domain="general", status=["committed", "proposed"]) == \
        ["m-cache", "m-deploy"]
    assert ids(domain="nowhere") == []


def test_cursor_pages_cover_everything_once(api: TestClient) -> None:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"domain": "paging", "limit": 5, "status": "proposed"}
        if cursor:
            params["cursor"] = cursor
        doc = api.get("/v1/memories", params=params).json()
        seen += [m["id"] for m in doc["items"]]
        pages += 1
        cursor = doc["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"p-{i:02d}" for i in range(PAGED)]
    assert pages == (PAGED + 4) // 5


@pytest.mark.parametrize(("q", "expected"), [
    ("build cache", ["m-cache"]),
    ("caching", ["m-cache"]),  # porter stemming: caching ~ cache
    ("infra", ["m-cache"]),  # tags are indexed too
    ("zebras number 7", ["p-07"]),
    ('"unbalanced', []),
    ("AND OR NOT", []),
    ("cache* NEAR(x y)", []),
    ("tuesdays: deploys", ["m-deploy"]),
    ("zebras\x00number\x1b7", ["p-07"]),  # control characters separate words
    (" - * ", []),  # no word left: matches nothing
])
def test_full_text_search(api: TestClient, q: str, expected: list[str]) -> None:
    resp = api.get("/v1/memories", params={"q": q, "limit": 100,
                                           "status": ["proposed", "committed"]})
    assert resp.status_code == 200, resp.text
    assert [m["id"] for m in resp.json()["items"]] == expected


def test_invalid_filters_are_problems(api: TestClient) -> None:
    doc = _problem(api.get("/v1/memories?status=bogus"), 422, "invalid_request")
    assert "status" in doc["detail"] and doc["errors"][0]["loc"][:2] == ["query", "status"]
    assert "limit" in _problem(api.get("/v1/memories?limit=0"), 422, "invalid_request")["detail"]
    _problem(api.get("/v1/memories?limit=501"), 422, "invalid_request")
    _problem(api.get("/v1/memories?type=rumour"), 422, "invalid_request")
    _problem(api.get("/v1/memories?author=xyz"), 422, "invalid_request")
    doc = _problem(api.get("/v1/memories?cursor=not-a-cursor"), 422, "invalid_request")
    assert doc["errors"][0]["loc"] == ["query", "cursor"]
    _problem(api.get("/v1/memories?cursor=WzEsMiwzXQ"), 422, "invalid_request")  # old form
    _problem(api.get("/v1/proposals?cursor=a%20b"), 422, "invalid_request")
    _problem(api.get("/v1/memories?domain=a%00b"), 422, "invalid_request")
    _problem(api.get("/v1/memories?tag="), 422, "invalid_request")
    _problem(api.get("/v1/memories?tag=" + "t" * 65), 422, "invalid_request")
    _problem(api.get("/v1/memories?q=" + "%20".join(["w"] * 33)), 422, "invalid_query")
    _problem(api.get("/v1/memories?include_disputed=perhaps"), 422, "invalid_request")


def test_satellites(api: TestClient, chain: LocalChain) -> None:
    votes = api.get("/v1/memories/m-cache/votes").json()["votes"]
    voters = {bytes(k.verify_key).hex() for k in chain.validator_keys[2:]}
    assert {v["voter"] for v in votes} == voters and {v["decision"] for v in votes} == {"accept"}
    corr = api.get("/v1/memories/m-cache/corroborations").json()["corroborations"]
    assert [c["agent"] for c in corr] == [bytes(BOB.verify_key).hex()]
    rounds = api.get("/v1/memories/team/m-rust/challenges").json()["challenges"]
    assert len(rounds) == 1 and rounds[0]["opener"] == bytes(BOB.verify_key).hex()
    assert api.get("/v1/memories/m-deploy/challenges").json()["challenges"] == []
    for suffix in ("votes", "challenges", "corroborations"):
        _problem(api.get(f"/v1/memories/nope/{suffix}"), 404, "not_found")
    _problem(api.get("/v1/cocommits/nope"), 404, "not_found")
    _problem(api.get("/v1/proposals/nope"), 404, "not_found")
    assert api.get("/v1/proposals").json() == {"items": [], "next_cursor": None}


def test_accounts_and_validators(api: TestClient, chain: LocalChain) -> None:
    acct = api.get(f"/v1/accounts/{A_HEX}").json()
    assert acct["last_nonce"] == chain.nonces[bytes(ALICE.verify_key)]
    assert acct["next_nonce"] == acct["last_nonce"] + 1 and acct["height"] == chain.height
    fresh = api.get("/v1/accounts/" + "ab" * 32).json()
    assert (fresh["last_nonce"], fresh["next_nonce"]) == (0, 1)
    _problem(api.get("/v1/accounts/zz"), 422, "invalid_request")
    vals = api.get("/v1/validators").json()
    assert vals["total_power"] == 100 and [v["power"] for v in vals["validators"]] == [40, 30,
                                                                                      20, 10]


def test_error_shapes(api: TestClient) -> None:
    _problem(api.get("/v2/nothing"), 404, "not_found")
    _problem(api.delete("/v1/memories/m-cache"), 405, "method_not_allowed")
    _problem(api.post("/v1/memories", content=b"{not json",
                      headers={"content-type": "application/json"}), 400, "malformed_json")
    _problem(api.post("/v1/txs", content=b"[1,",
                      headers={"content-type": "application/json"}), 400, "malformed_json")
    _problem(api.post("/v1/txs", json={"tx": "***"}), 400, "invalid_base64")
    _problem(api.post("/v1/txs", content=b"hi", headers={"content-type": "text/plain"}),
             415, "unsupported_media_type")
    _problem(api.post("/v1/memories", json={"memory_id": "x"}), 422, "invalid_request")
    _problem(api.post("/v1/memories", content=b'{"tx":"AA=="}',
                      headers={"content-type": "application/merge-patch+json"}),
             503, "cometbft_unavailable")  # any +json is JSON, as on POST /v1/txs
    big = b"x" * (3 << 20)
    doc = _problem(api.post("/v1/txs", content=big,
                            headers={"content-type": "application/octet-stream"}),
                   413, "body_too_large")
    assert doc["limit"] == 2 << 20

    def chunked() -> Iterator[bytes]:
        for _ in range(40):
            yield b"y" * (64 << 10)

    _problem(api.post("/v1/txs", content=chunked(),
                      headers={"content-type": "application/octet-stream"}),
             413, "body_too_large")
    # cometbft is down in this test: writes and status report it, never crash
    _problem(api.get("/v1/status"), 503, "cometbft_unavailable")
    assert api.get("/health").json() == {"status": "ok"}
    ready = _problem(api.get("/ready"), 503, "not_ready")
    assert ready["failing"] == ["cometbft"] and ready["checks"]["projection"]["ok"]


@pytest.mark.parametrize("path", ["/v1/txs", "/v1/memories"])
def test_json_nested_past_the_parser_stack_is_malformed_json(api: TestClient,
                                                            path: str) -> None:
    """20 KB of "[[[[" outnests json.loads (RecursionError): a 400, never a 500."""
    depth = 10_000
    body = b'{"tx":' + b"[" * depth + b"]" * depth + b"}"
    doc = _problem(api.post(path, content=body, headers={"content-type": "application/json"}),
                   400, "malformed_json")
    assert "nested too deeply" in doc["detail"]


@pytest.mark.parametrize("path", ["/v1/txs", "/v1/memories"])
@pytest.mark.parametrize(("body", "said"), [
    (b'{"tx": "AA==", "nonce": 1' + b"0" * 5_000 + b"}", "4300 digits"),
    (b'{"tx": "\xff"}', "can't decode byte 0xff")])
def test_json_that_json_loads_refuses_is_malformed_json(api: TestClient, path: str,
                                                        body: bytes, said: str) -> None:
    """json.loads refuses an integer of more than 4,300 digits and bytes that are not
    UTF-8 (ValueError): POST /v1/txs said malformed_json, POST /v1/memories a vague
    bad_request 'There was an error parsing the body'."""
    doc = _problem(api.post(path, content=body, headers={"content-type": "application/json"}),
                   400, "malformed_json")
    assert said in doc["detail"]


@pytest.mark.parametrize("tx", ["CgA=", "0Ahm"])
def test_a_tx_with_no_message_is_left_to_the_ledger_on_post_memories(api: TestClient,
                                                                     tx: str) -> None:
    """A tx whose body holds no message (an empty body, "CgA="; unknown envelope fields,
    "0Ahm") is no other kind of tx: POST /v1/memories broadcasts it for the ledger's code
    (tx_not_canonical for both), as POST /v1/txs does, instead of answering 422
    wrong_tx_kind 'not an empty one; use POST /v1/txs'. cometbft is down here: reaching
    it is a 503."""
    _problem(api.post("/v1/memories", json={"tx": tx}), 503, "cometbft_unavailable")


@pytest.mark.parametrize("path", ["/v1/txs", "/v1/memories"])
@pytest.mark.parametrize("media", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_that_is_not_json_is_415_on_both_submit_routes(api: TestClient, path: str,
                                                              media: str | None) -> None:
    """curl -d sends form-encoded; the answer names the media type, not a field."""
    headers = {"content-type": media} if media else {}
    resp = api.post(path, content=b'{"tx": "AA=="}', headers=headers)
    if media is None:  # httpx adds no content-type to raw content
        assert "content-type" not in resp.request.headers
    doc = _problem(resp, 415, "unsupported_media_type")
    assert "application/json" in doc["detail"]


def test_proofs_document_the_account_ids_the_ledger_takes(api: TestClient) -> None:
    """The ledger reads an account id as hex bytes and refuses anything else ('malformed
    query data', a 400 without a result code); the document allowed any id of the common
    pattern for every kind, so GET /v1/proofs/account?id=zz, schema-valid, was refused."""
    spec = api.get("/openapi.json").json()
    account = spec["paths"]["/v1/proofs/account"]["get"]
    pattern = next(p["schema"]["pattern"] for p in account["parameters"] if p["name"] == "id")
    assert all(re.fullmatch(pattern, ok) for ok in (A_HEX, A_HEX.upper(), ""))
    assert not any(re.fullmatch(pattern, bad) for bad in ("zz", "abc", "m-cache", A_HEX + "a"))
    generic = spec["paths"]["/v1/proofs/{kind}"]["get"]
    kind = next(p["schema"]["pattern"] for p in generic["parameters"] if p["name"] == "kind")
    assert not re.fullmatch(kind, "account") and re.fullmatch(kind, "memory")
    _problem(api.get("/v1/proofs/account", params={"id": "zz"}), 422, "invalid_request")
    # a key is asked of the ledger as before (cometbft is down in this test)
    _problem(api.get("/v1/proofs/account", params={"id": A_HEX}), 503, "cometbft_unavailable")
    _problem(api.get("/v1/proofs/memory", params={"id": "zz"}), 503, "cometbft_unavailable")


def test_metrics(api: TestClient, chain: LocalChain) -> None:
    assert api.get("/v1/memories").status_code == 200  # a request of its own to count
    text = api.get("/metrics").text
    assert f"memledger_block_height {float(chain.height)}" in text
    assert "memledger_proposed_backlog 24.0" in text  # m-deploy + the paged ones
    assert 'memledger_api_requests_total{method="GET",route="/v1/memories",status="200"}' in text
    # a made-up method word is counted, under "other": never a series of its own
    for word in ("FOO", "BAR", "M0001"):
        assert api.request(word, "/health").status_code == 405
    text = api.get("/metrics").text
    assert 'memledger_api_requests_total{method="other",route="/health",status="405"} 3.0' \
        in text
    assert "FOO" not in text and "M0001" not in text


def test_openapi_is_valid(api: TestClient) -> None:
    from openapi_spec_validator import validate

    spec = api.get("/openapi.json").json()
    validate(spec)
    paths = set(spec["paths"])
    for path in ("/v1/txs", "/v1/txs/{tx_hash}", "/v1/memories", "/v1/memories/{memory_id}",
                 "/v1/memories/{memory_id}/votes", "/v1/accounts/{public_key}",
                 "/v1/validators", "/v1/proposals", "/v1/status", "/health", "/ready",
                 "/metrics", "/v1/cocommits/{cocommit_id}"):
        assert path in paths, path
    assert api.get("/docs").status_code == 200


def test_engine_is_read_only(chain: LocalChain) -> None:
    engine = readonly_engine(chain.db_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("select count(*) from memories")).scalar_one() > 0
        with pytest.raises(sa.exc.OperationalError):
            conn.execute(sa.text("delete from memories"))
    engine.dispose()


def test_json_form_rebuilds_the_sdk_tx(chain: LocalChain) -> None:
    """The JSON form of POST /v1/memories yields byte-identical txs to TxBuilder's."""
    from memledger.api.routes_txs import _tx_from_form
    from memledger.api.schemas import MemorySubmitForm
    from memledger.protocol.pb import tx_pb2

    tx = chain.builder(ALICE).submit(77, "j-1", "same bytes either way", tags=["b", "a"],
                                     confidence_ppm=500_000, memory_type="task")
    env = tx_pb2.Tx.FromString(tx)
    req = MemorySubmitForm.model_validate({
        "memory_id": "j-1", "content": "same bytes either way", "type": "task",
        "confidence_ppm": 500_000, "tags": ["a", "b"], "nonce": 77,
        "public_key": env.public_key.hex(), "signature": env.signature.hex()})
    assert _tx_from_form(req, chain.chain_id) == tx
    assert json.loads(req.model_dump_json())["domain"] == "general"


def test_search_ddl_survives_rebuild(chain: LocalChain, tmp_path: Path) -> None:
    from memledger.projection.writer import Projection

    target = Projection(f"sqlite:///{tmp_path / 'rebuilt.db'}")
    store = chain.app.store
    target.rebuild(store, store.last_height, store.last_app_hash)
    with target.engine.connect() as conn:
        hits = conn.exec_driver_sql(
            "select m.id from memories m where m.rowid in "
            "(select rowid from memories_fts where memories_fts match '\"zebras\"')").all()
        conn.exec_driver_sql(
            "insert into memories_fts(memories_fts, rank) values ('integrity-check', 1)")
    assert len(hits) == PAGED
    target.close()


def test_unexpected_errors_are_problems_without_traces(chain: LocalChain) -> None:
    app = create_app(ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9"))

    def boom() -> None:
        raise RuntimeError("secret internals")

    app.add_api_route("/boom", boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        resp = client.get("/boom")
        doc = _problem(resp, 500, "internal_error")
        assert "secret internals" not in resp.text and "RuntimeError" not in resp.text
        assert "access-control-allow-origin" not in client.get(
            "/health", headers={"origin": "http://evil.example"}).headers
        assert doc["instance"] == "/boom"


@pytest.mark.parametrize("q", ["zebras", "paged memory", "cache", "build"])
def test_ordered_scan_plan_returns_the_same_pages(chain: LocalChain, q: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Common words take a different SQLite plan; pages must not change with it."""
    from memledger.api import queries, search

    engine = readonly_engine(chain.db_url)

    def pages() -> list[list[str]]:
        out, cursor = [], None
        with engine.connect() as conn:
            while True:
                items, cursor = queries.list_memories(
                    conn, queries.MemoryFilter(q=q, status=("proposed", "committed")), 4, cursor)
                out.append([m["id"] for m in items])
                if cursor is None:
                    return out

    default = pages()
    monkeypatch.setattr(search, "COMMON_MIN_MATCHES", 1)
    with engine.connect() as conn:
        assert search.common_on_sqlite(conn, q)
    assert pages() == default and default[0]
    engine.dispose()


@pytest.mark.parametrize("path", ["/health", "/ready", "/v1/status", "/docs", "/openapi.json",
                                  "/v1/memories/m-cache", "/v1/memories?limit=2", "/nope"])
def test_head_is_get_without_a_body_over_real_http(served: str, path: str) -> None:
    """Served by uvicorn, so the HTTP framing of a bodiless answer is the real one."""
    with httpx.Client(base_url=served) as http:
        got, head = http.get(path), http.head(path)
    assert head.status_code == got.status_code != 405, (head.status_code, head.text)
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    if "content-length" in got.headers:
        assert head.headers["content-length"] == got.headers["content-length"]


def test_allow_names_head_with_get_and_no_head_without_it(api: TestClient) -> None:
    refused = api.head("/v1/txs")
    assert refused.status_code == 405 and refused.headers["allow"] == "POST"
    assert api.request("DELETE", "/v1/memories").headers["allow"] == "GET, HEAD, POST"
    assert api.request("DELETE", "/health").headers["allow"] == "GET, HEAD"


def test_allow_of_a_mounted_app_s_405_names_its_methods(api: TestClient) -> None:
    """The docs assets (a mounted StaticFiles) refuse POST with Allow: GET, HEAD; matched
    against the app's own routes, from inside the mount, it was replaced by an empty
    Allow (RFC 9110: no method at all)."""
    refused = api.post("/docs/assets/swagger-ui.css")
    _problem(refused, 405, "method_not_allowed")
    assert refused.headers["allow"] == "GET, HEAD"


def test_head_adds_no_operation_to_the_openapi_document(api: TestClient) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    assert not any("head" in ops for ops in paths.values())


def test_a_projection_file_that_is_not_a_database_is_a_503(tmp_path: Path) -> None:
    """A damaged SQLite projection is an outage (the node rebuilds it at its next start),
    not a fault of this code: it answered 500 internal_error."""
    db = tmp_path / "projection.db"
    db.write_bytes(b"this is not a database, " * 400)
    app = create_app(ApiSettings(db_url=f"sqlite:///{db}", rpc_url="http://127.0.0.1:9"))
    with TestClient(app, raise_server_exceptions=False) as client:
        for path in ("/v1/memories/m1", "/v1/memories"):
            doc = _problem(client.get(path), 503, "projection_unavailable")
            assert "not a database" in doc["detail"]


def test_export_needs_the_node_beside_it(api: TestClient) -> None:
    """Export reads the canonical store: a REST process without a node home says so."""
    problem = _problem(api.get("/v1/export", params={"domain": "d1"}), 501,
                       "export_needs_node")
    assert "beside its node" in problem["detail"]
    _problem(api.get("/v1/export", params={"status": "nope"}), 422, "invalid_request")
