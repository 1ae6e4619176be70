"""Reads get their own, bounded capacity; writes, health and readiness never queue behind
them, and reads beyond the bound are shed at once with 503 and Retry-After.

Before, every read ran in the one shared worker-thread pool: with 300 concurrent hybrid
searches, a write waited seconds for a thread and `/health` timed out, though the node
was only busy. Now reads run on their own `slots` threads, which keeps the GIL free
enough for the event loop that serves writes and probes; at most `slots + backlog` reads
are in the process at once, and the next one is answered 503 in well under a
millisecond instead of making every request's latency grow, with a Retry-After that
grows with the overload (`ReadGate.retry_after_s`).

The reads' threads run at background priority (memledger.priority): a write's CheckTx
in the ABCI process and cometbft never wait for a core behind reads, and the index
followers get the same share of a core as the searches (at a higher priority, searches
starved the vector index's follower and then did its embedding themselves, 5 ms at a
time: BENCHMARKS.md, "Reads at background priority").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

from memledger.api.problems import Problem
from memledger.priority import run_in_background

T = TypeVar("T")

#: seconds a shed read is told to wait at least and at most (the SDK honours Retry-After)
SHED_RETRY_AFTER_S = 1
SHED_RETRY_AFTER_MAX_S = 8
#: shed clients may come back at 1/RETURNS_PER_SERVED of the rate reads are served
RETURNS_PER_SERVED = 4
#: paths under /v1 that are not reads to shed: writes and a tx's outcome, the node status
NOT_READS = ("/v1/txs", "/v1/status")


def is_read(scope: Scope) -> bool:
    """A GET (HEAD is one inside) of data under /v1; probes, writes and metrics are not."""
    path = str(scope.get("path", ""))
    return (scope.get("method") in ("GET", "HEAD") and path.startswith("/v1/")
            and not path.startswith(NOT_READS))


class ReadGate:
    """Counts reads in the process (past `slots + backlog` the read is shed) and runs
    their blocking work on `slots` threads of their own, at background priority."""

    def __init__(self, slots: int, backlog: int,
                 on_shed: Callable[[], None] | None = None) -> None:
        self.on_shed = on_shed
        self.slots = max(1, slots)
        self.backlog = max(0, backlog)
        self._threads = ThreadPoolExecutor(self.slots, thread_name_prefix="memledger-read",
                                           initializer=run_in_background)
        self.in_flight = 0
        self.shed = 0
        #: (second, reads served, reads shed) of the last whole second and of this one
        self._last: tuple[int, int, int] = (-1, 0, 0)
        self._this: tuple[int, int, int] = (-1, 0, 0)
        self._told = SHED_RETRY_AFTER_S  # the Retry-After shed reads were last told

    def admit(self) -> bool:
        if self.in_flight >= self.slots + self.backlog:
            self.shed += 1
            self._count(0, 1)
            if self.on_shed is not None:
                self.on_shed()
            return False
        self.in_flight += 1
        return True

    def release(self) -> None:
        self.in_flight -= 1
        self._count(1, 0)

    def _count(self, served: int, shed: int, now: float | None = None) -> None:
        second = int(time.monotonic() if now is None else now)
        if second != self._this[0]:
            self._last = self._this if second == self._this[0] + 1 else (second - 1, 0, 0)
            self._this = (second, 0, 0)
        _, was_served, was_shed = self._this
        self._this = (second, was_served + served, was_shed + shed)

    def retry_after_s(self, now: float | None = None) -> int:
        """How long a shed read is told to wait: long enough that the shed clients come
        back at a quarter of the rate the node served reads in the last whole second
        (within 1-8 s). Each client shed in that second waits what it was told, so about
        shed × told of them are waiting at once (Little's law); told W ÷ (served ÷ 4)
        seconds, they return at served ÷ 4 a second. A flat second had 300 readers come
        back every second to be shed again, ~280 503s a second; demand ÷ served still
        settled at ~140 a second: answering them took the event loop and the cores from
        the reads served, the writes and the probes."""
        self._count(0, 0, now)
        _, served, shed = self._last
        waiting = shed * self._told
        wanted = -(-waiting * RETURNS_PER_SERVED // max(served, 1))
        self._told = max(SHED_RETRY_AFTER_S, min(SHED_RETRY_AFTER_MAX_S, wanted))
        return self._told

    async def run(self, func: Callable[..., T], *args: object) -> T:
        """Run blocking read work on the reads' own threads. A read whose request is
        cancelled (a timeout) finishes on its thread all the same; the threads bound
        how many run at once."""
        return await asyncio.get_running_loop().run_in_executor(
            self._threads, partial(func, *args))

    def close(self) -> None:
        """Let the threads go once the reads under way finish; queued ones are dropped."""
        self._threads.shutdown(wait=False, cancel_futures=True)


def shed_problem(gate: ReadGate) -> Problem:
    wait = gate.retry_after_s()
    problem = Problem(503, "overloaded", f"this node is serving {gate.in_flight} reads, its "
                      f"read capacity; retry in {wait} s (writes and /health are not "
                      "affected)", retry_after_s=wait)
    problem.headers["Retry-After"] = str(wait)
    return problem


class ReadGateMiddleware:
    """Sheds reads past the gate's bound before any routing, parsing or thread."""

    def __init__(self, app: ASGIApp, gate: ReadGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_read(scope):
            await self.app(scope, receive, send)
            return
        if not self.gate.admit():
            response = shed_problem(self.gate).response(scope.get("path"))
            await response(scope, receive, send)  # type: ignore[arg-type]
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.gate.release()
