"""Per-client rate limiting, the request timeout and CORS refusals answer with
problem+json; CORS headers are on every answer, the limits' too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from memledger.api import ApiSettings, create_app, problems
from memledger.api.middleware import ProblemCORSMiddleware
from memledger.api.ratelimit import EXEMPT_PATHS, RateLimitMiddleware, TimeoutMiddleware


def _app(**limits: Any) -> FastAPI:
    app = FastAPI()
    problems.install(app)

    @app.get("/v1/ping")
    async def ping() -> dict[str, str]:
        return {"ok": "yes"}

    @app.get("/v1/slow")
    async def slow() -> dict[str, str]:
        await asyncio.sleep(5)
        return {"ok": "late"}

    @app.get("/v1/wait")
    async def wait(timeout: float) -> dict[str, str]:  # a commit wait of `timeout` s
        await asyncio.sleep(timeout)
        return {"ok": "unknown outcome, with its hash"}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"ok": "yes"}

    if "seconds" in limits:
        app.add_middleware(TimeoutMiddleware, seconds=limits["seconds"],
                           max_wait_s=limits.get("max_wait_s", 0.0),
                           wait_margin_s=limits.get("wait_margin_s", 10.0))
    if "rate" in limits:
        app.add_middleware(RateLimitMiddleware, rate=limits["rate"], burst=limits["burst"])
    return app


def test_rate_limit_per_client_with_retry_after() -> None:
    client = TestClient(_app(rate=0.5, burst=3))
    codes = [client.get("/v1/ping").status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    limited = client.get("/v1/ping")
    assert limited.headers["content-type"].startswith("application/problem+json")
    assert limited.json()["name"] == "rate_limited"
    assert int(limited.headers["retry-after"]) >= 1
    assert client.get("/health").status_code == 200  # probes are never limited


def test_buckets_are_per_client() -> None:
    app = _app(rate=0.5, burst=1)
    first = TestClient(app, client=("10.0.0.1", 1000))
    second = TestClient(app, client=("10.0.0.2", 1000))
    assert first.get("/v1/ping").status_code == 200
    assert first.get("/v1/ping").status_code == 429
    assert second.get("/v1/ping").status_code == 200


def test_request_timeout_is_a_504_problem() -> None:
    client = TestClient(_app(seconds=0.2))
    resp = client.get("/v1/slow")
    assert resp.status_code == 504
    assert resp.json()["name"] == "request_timeout"
    assert client.get("/v1/ping").status_code == 200


def test_a_request_may_wait_for_its_own_commit_timeout_but_no_longer_than_allowed() -> None:
    # the margin leaves a loaded box time to answer a 0.5 s wait (0.3 s was too little:
    # the answer and the cut race on one event loop), and still cuts a 3 s wait at 2.5 s
    client = TestClient(_app(seconds=0.2, max_wait_s=1.0, wait_margin_s=1.5))
    # asked to wait 0.5 s, over the node's 0.2 s: its own answer comes, not a 504
    assert client.get("/v1/wait", params={"timeout": 0.5}).status_code == 200
    # a wait above the most a client may ask for is cut at that most plus the margin
    assert client.get("/v1/wait", params={"timeout": 3}).status_code == 504
    assert client.get("/v1/slow").status_code == 504  # no wait asked: the node's timeout
    assert client.get("/v1/slow", params={"timeout": "soon"}).status_code == 504


ORIGIN = "https://app.example"


def _cors_app(tmp_path: Path, **settings: Any) -> FastAPI:
    """The node's own middleware stack with CORS on (no route here reads the database)."""
    return create_app(ApiSettings(db_url=f"sqlite:///{tmp_path / 'none.db'}",
                                  rpc_url="http://127.0.0.1:9", cors_origins=(ORIGIN,),
                                  **settings))


def test_cors_headers_are_on_the_rate_limit_s_429(tmp_path: Path) -> None:
    # one token per 100 s: a first answer slowed by a busy machine does not refill it
    client = TestClient(_cors_app(tmp_path, rate_limit_per_s=0.01, rate_limit_burst=1))
    assert client.get("/openapi.json", headers={"Origin": ORIGIN}).status_code == 200
    limited = client.get("/openapi.json", headers={"Origin": ORIGIN})
    assert limited.status_code == 429 and limited.json()["name"] == "rate_limited"
    # a browser may read the 429 and, being exposed, its Retry-After
    assert limited.headers["access-control-allow-origin"] == ORIGIN
    assert "retry-after" in limited.headers["access-control-expose-headers"].lower()
    assert int(limited.headers["retry-after"]) >= 1


def test_cors_wraps_the_rate_limit_and_the_timeout(tmp_path: Path) -> None:
    """The timeout's 504 is answered inside CORS too (the order is what makes it so)."""
    order: list[object] = [m.cls for m in _cors_app(tmp_path).user_middleware]  # outer first
    assert order.index(ProblemCORSMiddleware) < order.index(RateLimitMiddleware)
    assert order.index(ProblemCORSMiddleware) < order.index(TimeoutMiddleware)


def test_preflights_spend_no_rate_limit_token(tmp_path: Path) -> None:
    client = TestClient(_cors_app(tmp_path, rate_limit_per_s=0.01, rate_limit_burst=1))
    ask = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "content-type"}
    for _ in range(5):
        ok = client.options("/v1/memories", headers=ask)
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ORIGIN
    assert client.get("/openapi.json", headers={"Origin": ORIGIN}).status_code == 200


@pytest.mark.parametrize(("headers", "refused"), [
    ({"Origin": "https://evil.example"}, "origin"),
    ({"Origin": ORIGIN, "Access-Control-Request-Headers": "x-request-id"}, "headers"),
])
def test_a_refused_preflight_is_a_problem(tmp_path: Path, headers: dict[str, str],
                                          refused: str) -> None:
    client = TestClient(_cors_app(tmp_path))
    resp = client.options("/v1/memories",
                          headers={**headers, "Access-Control-Request-Method": "POST"})
    assert resp.status_code == 400
    assert resp.headers["content-type"].startswith("application/problem+json")
    doc = resp.json()
    assert doc["name"] == "cors_refused" and refused in doc["detail"]
    assert "Origin" in resp.headers["vary"]


def test_security_doc_states_the_default_rate_limit() -> None:
    """docs/SECURITY.md once said "no rate limiting" while the limit is on by default."""
    doc = (Path(__file__).parents[3] / "docs" / "SECURITY.md").read_text()
    text = " ".join(doc.split())
    assert "no rate limiting" not in text.lower()
    assert (f"{ApiSettings.rate_limit_per_s:g} requests/s with a burst of "
            f"{ApiSettings.rate_limit_burst}") in text
    assert all(path in text for path in EXEMPT_PATHS)
