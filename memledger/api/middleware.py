"""ASGI middleware: request body limit, per-route request metrics, CORS with problem+json,
HEAD served as GET without the body.

The body limit is enforced before any route or JSON parser runs, on the declared
Content-Length and on the bytes actually streamed, so a chunked upload cannot get past
it either. Oversized bodies are drained (up to a hard cap) before the 413 answer so the
client reliably reads the problem document instead of a reset connection.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from memledger.api.problems import Problem

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DRAIN_CAP_FACTOR = 8


async def send_problem(problem: Problem, scope: Scope, send: Send) -> None:
    response = problem.response(scope.get("path"))
    response.headers["connection"] = "close"
    await response(scope, _no_receive, send)  # type: ignore[arg-type]


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


class BodyLimitMiddleware:
    """Buffer request bodies up to `max_bytes`; answer 413 problem+json beyond that."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, size: int | None) -> Problem:
        shown = f"{size} bytes" if size is not None else "more"
        return Problem(413, "body_too_large",
                       f"request body is {shown}; the limit is {self.max_bytes} bytes",
                       limit=self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared: int | None = None
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_problem(Problem(400, "bad_request",
                                                "Content-Length is not a number"), scope, send)
                    return
        chunks: list[bytes] = []
        total = 0
        over = declared is not None and declared > self.max_bytes
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                over = True
            if not over:
                chunks.append(body)
            if not message.get("more_body", False):
                break
            if total > self.max_bytes * DRAIN_CAP_FACTOR:
                break
        if over:
            await send_problem(self._too_large(max(total, declared or 0)), scope, send)
            return
        buffered = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": buffered, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


#: nginx's "client closed request": the client left before any answer was sent
CLIENT_CLOSED = 499


class RequestMetricsMiddleware:
    """Count requests and time them per route template (not per raw path), by the status
    sent. A request answered with nothing is 500 only when an exception escaped; a client
    that left first (mid-body, or cancelled) is 499, so it cannot raise the 5xx rate."""

    def __init__(self, app: ASGIApp, observe: Callable[[str, str, int, float], None]) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        sent: list[int] = []
        unanswered = CLIENT_CLOSED

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, capture)
        except Exception:
            unanswered = 500
            raise
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.observe(scope.get("method", ""), template, sent[0] if sent else unanswered,
                         time.perf_counter() - start)


class ProblemCORSMiddleware(CORSMiddleware):
    """Starlette's CORS, except that a refused preflight is a problem+json document like
    every other error (Starlette answers `400 text/plain`). Mounted outermost (inside
    the metrics only), so the rate limit's 429 and the timeout's 504 carry the CORS
    headers too and a preflight never spends a rate-limit token."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        refused = bytes(response.body).decode()  # "Disallowed CORS origin, headers"
        problem = Problem(response.status_code, "cors_refused",
                          f"{refused} (this node's CORS settings refuse the preflight)")
        problem.headers.update((k, v) for k, v in response.headers.items()
                               if k.lower() not in ("content-type", "content-length"))
        return problem.response()


class HeadMiddleware:
    """HEAD is GET without the body (RFC 9110 9.3.2). FastAPI routes serve only the
    methods they declare, so HEAD /health answered 405; here it runs as GET (same status
    and headers, Content-Length included) and the body is dropped. The OpenAPI document
    is unchanged: it lists no HEAD operations, as HEAD comes with every GET."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return

        async def bodiless(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, bodiless)
