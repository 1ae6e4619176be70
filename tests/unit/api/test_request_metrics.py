"""/metrics counts a request by the status actually sent: a client that leaves before
any answer (mid-body, or cancelled) is 499, never the 500 it was counted as, and 500
stays for an exception that escaped the app without an answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memledger.api.middleware import (
    BodyLimitMiddleware,
    Message,
    Receive,
    RequestMetricsMiddleware,
    Scope,
    Send,
)

SCOPE: Scope = {"type": "http", "method": "POST", "path": "/v1/txs",
                "headers": [(b"content-length", b"1000")]}


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _fails(scope: Scope, receive: Receive, send: Send) -> None:
    raise RuntimeError("a bug")


async def _fails_mid_body(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    raise RuntimeError("a bug after the headers")


async def _cancelled(scope: Scope, receive: Receive, send: Send) -> None:
    raise asyncio.CancelledError


def _observed(app: Any, messages: list[Message]) -> list[tuple[str, str, int]]:
    """Run `app` under the metrics middleware; what it observed."""
    seen: list[tuple[str, str, int]] = []
    metered = RequestMetricsMiddleware(app, lambda m, r, s, _t: seen.append((m, r, s)))
    queue = list(messages)

    async def receive() -> Message:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        pass

    asyncio.run(metered(dict(SCOPE), receive, send))
    return seen


def test_a_client_gone_mid_body_is_499_not_500() -> None:
    app = BodyLimitMiddleware(_ok, max_bytes=4096)
    partial = {"type": "http.request", "body": b'{"tx":', "more_body": True}
    assert _observed(app, [partial, {"type": "http.disconnect"}]) == [
        ("POST", "unmatched", 499)]
    assert _observed(app, [{"type": "http.request", "body": b"{}", "more_body": False}]) == [
        ("POST", "unmatched", 200)]


def test_500_only_for_an_exception_without_an_answer() -> None:
    seen: list[tuple[str, str, int]] = []
    metered = RequestMetricsMiddleware(_fails, lambda m, r, s, _t: seen.append((m, r, s)))

    async def nothing() -> Message:
        return {"type": "http.disconnect"}

    async def drop(message: Message) -> None:
        pass

    for app, status in ((_fails, 500), (_fails_mid_body, 200)):
        seen.clear()
        metered.app = app
        with pytest.raises(RuntimeError):
            asyncio.run(metered(dict(SCOPE), nothing, drop))
        assert seen == [("POST", "unmatched", status)]
    seen.clear()
    metered.app = _cancelled
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(metered(dict(SCOPE), nothing, drop))
    assert seen == [("POST", "unmatched", 499)]
