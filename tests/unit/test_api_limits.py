"""Per-client rate limiting and the request timeout answer with problem+json."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from memledger.node.api import problems
from memledger.node.api.ratelimit import RateLimitMiddleware, TimeoutMiddleware


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
    client = TestClient(_app(seconds=0.2, max_wait_s=1.0, wait_margin_s=0.3))
    # asked to wait 0.5 s, over the node's 0.2 s: its own answer comes, not a 504
    assert client.get("/v1/wait", params={"timeout": 0.5}).status_code == 200
    # a wait above the most a client may ask for is cut at that most plus the margin
    assert client.get("/v1/wait", params={"timeout": 3}).status_code == 504
    assert client.get("/v1/slow").status_code == 504  # no wait asked: the node's timeout
    assert client.get("/v1/slow", params={"timeout": "soon"}).status_code == 504
