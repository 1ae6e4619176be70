"""Per-client rate limiting and a whole-request timeout, as ASGI middleware.

Reads are public and writes cost every validator work, so one client must not be able
to monopolise a node. Each client address gets a token bucket (`rate` requests/s with
`burst` headroom); an empty bucket answers 429 problem+json with Retry-After. The
timeout bounds how long any request may hold a worker; `wait=commit` submissions carry
their own deadline (`timeout`, or the node's commit wait), this one stretches to it plus a
margin, so they report an unknown outcome with their tx hash instead of timing out here.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from urllib.parse import parse_qs

from memledger.api.middleware import ASGIApp, Message, Receive, Scope, Send, send_problem
from memledger.api.problems import Problem

MAX_TRACKED_CLIENTS = 10_000
EXEMPT_PATHS = ("/health", "/ready", "/metrics")


class _Bucket:
    __slots__ = ("tokens", "updated")

    def __init__(self, tokens: float, updated: float) -> None:
        self.tokens = tokens
        self.updated = updated


class RateLimitMiddleware:
    """Token bucket per client host; rate <= 0 disables limiting."""

    def __init__(self, app: ASGIApp, rate: float, burst: int) -> None:
        self.app = app
        self.rate = rate
        self.burst = max(1, burst)
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def _take(self, client: str, now: float) -> float:
        """Consume one token; return 0 when allowed, else seconds until one is free."""
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
            self._buckets[client] = bucket
            if len(self._buckets) > MAX_TRACKED_CLIENTS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(client)
            refill = (now - bucket.updated) * self.rate
            bucket.tokens = min(float(self.burst), bucket.tokens + refill)
            bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.rate <= 0 or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("unknown", 0))[0]
        wait = self._take(str(client), time.monotonic())
        if wait > 0:
            retry = max(1, math.ceil(wait))
            problem = Problem(429, "rate_limited",
                              f"too many requests from {client}; retry in {retry} s",
                              retry_after_s=retry)
            response = problem.response(scope.get("path"))
            response.headers["retry-after"] = str(retry)
            await response(scope, receive, send)  # type: ignore[arg-type]
            return
        await self.app(scope, receive, send)


#: routes that stream for as long as their data takes (an export of many memories); a
#: cut stream is caught by the reader (a bundle without its end line is refused)
UNTIMED = frozenset({"/v1/export"})


class TimeoutMiddleware:
    """Answer 504 problem+json when a request runs longer than `seconds`, or than its own
    commit wait (`timeout`, at most `max_wait_s`) plus `wait_margin_s`: a client that asks
    to wait longer than the node's default gets its 202 "unknown" with the tx hash when
    that wait ends, not a 504 without one."""

    def __init__(self, app: ASGIApp, seconds: float, max_wait_s: float = 0.0,
                 wait_margin_s: float = 10.0) -> None:
        self.app = app
        self.seconds = seconds
        self.max_wait_s = max_wait_s
        self.wait_margin_s = wait_margin_s

    def _deadline(self, scope: Scope) -> float:
        asked = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("timeout")
        try:
            wait = min(float(asked[-1]), self.max_wait_s) if asked else 0.0
        except ValueError:
            wait = 0.0  # the route answers 422 for it
        return max(self.seconds, wait + self.wait_margin_s) if wait > 0 else self.seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.seconds <= 0 or scope.get("path") in UNTIMED:
            await self.app(scope, receive, send)
            return
        seconds = self._deadline(scope)
        started = [False]

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                started[0] = True
            await send(message)

        try:
            # in this task: wait_for ran each request in a task of its own, two more turns
            # of the event loop (and a task to make) per request
            async with asyncio.timeout(seconds):
                await self.app(scope, receive, tracking_send)
        except TimeoutError:
            if started[0]:
                return  # headers already sent: nothing sound left to say
            await send_problem(Problem(504, "request_timeout",
                                        f"request took longer than {seconds:.0f} s"),
                                scope, send)
