"""Reads past their capacity are shed at once with 503 + Retry-After; writes and probes
are never counted against it."""

from __future__ import annotations

import asyncio
import time

import httpx
from fastapi import FastAPI

from memledger.api import problems
from memledger.api.readgate import ReadGate, ReadGateMiddleware, is_read


def _app(gate: ReadGate, release: asyncio.Event) -> FastAPI:
    app = FastAPI()
    problems.install(app)

    @app.get("/v1/memories")
    async def slow_read() -> dict[str, str]:
        await release.wait()
        return {"ok": "read"}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/txs")
    async def write() -> dict[str, str]:
        return {"ok": "write"}

    app.add_middleware(ReadGateMiddleware, gate=gate)
    return app


def test_reads_beyond_capacity_are_shed_fast_and_probes_and_writes_pass() -> None:
    async def go() -> None:
        gate = ReadGate(slots=2, backlog=1)
        release = asyncio.Event()
        transport = httpx.ASGITransport(app=_app(gate, release))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            held = [asyncio.create_task(client.get("/v1/memories")) for _ in range(3)]
            while gate.in_flight < 3:
                await asyncio.sleep(0.001)
            started = time.perf_counter()
            shed = await client.get("/v1/memories")
            took = time.perf_counter() - started
            assert shed.status_code == 503 and took < 0.05
            assert shed.headers["retry-after"] == "1"
            assert shed.headers["content-type"].startswith("application/problem+json")
            assert shed.json()["name"] == "overloaded"
            assert (await client.get("/health")).status_code == 200
            assert (await client.post("/v1/txs")).status_code == 200
            release.set()
            assert [r.status_code for r in await asyncio.gather(*held)] == [200] * 3
            assert gate.in_flight == 0 and gate.shed == 1
            assert (await client.get("/v1/memories")).status_code == 200
    asyncio.run(go())


def test_what_counts_as_a_read() -> None:
    def scope(method: str, path: str) -> dict[str, str]:
        return {"method": method, "path": path}
    assert is_read(scope("GET", "/v1/memories"))  # type: ignore[arg-type]
    assert is_read(scope("GET", "/v1/light"))  # type: ignore[arg-type]
    for method, path in (("POST", "/v1/memories"), ("GET", "/v1/txs/ab"), ("GET", "/health"),
                         ("GET", "/ready"), ("GET", "/v1/status"), ("GET", "/metrics")):
        assert not is_read(scope(method, path))  # type: ignore[arg-type]


def test_reads_run_on_their_own_threads_at_background_priority() -> None:
    """A read's blocking work yields the CPU to writes, Commit and cometbft, at most
    `slots` at once; the event loop's own priority is left alone."""
    import os
    import threading

    from memledger.priority import BACKGROUND_NICE

    def where() -> tuple[str, int]:
        time.sleep(0.05)
        return (threading.current_thread().name,
                os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    async def go() -> list[tuple[str, int]]:
        gate = ReadGate(slots=2, backlog=0)
        try:
            return list(await asyncio.gather(*(gate.run(where) for _ in range(4))))
        finally:
            gate.close()

    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = asyncio.run(go())
    assert all(name.startswith("memledger-read") for name, _ in seen)
    assert len({name for name, _ in seen}) == 2
    assert all(nice >= BACKGROUND_NICE for _, nice in seen)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine


def test_a_shed_read_is_told_to_wait_as_long_as_the_overload_needs() -> None:
    """Retry-After is what makes the shed clients (about shed × told of them wait at
    once) come back at a quarter of the rate the node served in the last whole second
    (1 s when nothing was shed, at most 8 s), instead of all at once every second."""
    gate = ReadGate(slots=1, backlog=0)
    assert gate.retry_after_s(now=100.0) == 1  # nothing measured yet

    def second(at: float, served: int, shed: int) -> None:
        for _ in range(served):
            gate._count(1, 0, now=at + 0.2)
        for _ in range(shed):
            gate._count(0, 1, now=at + 0.7)

    second(100, served=200, shed=300)  # 300 clients shed, told 1 s: 300 wait
    assert gate.retry_after_s(now=100.9) == 1  # the second is not over
    assert gate.retry_after_s(now=101.1) == 6  # 300 ÷ (200 ÷ 4)
    second(101, served=200, shed=50)  # told 6 s, they came back 50 a second
    assert gate.retry_after_s(now=102.1) == 6  # settled: 50 returns a second
    assert gate.retry_after_s(now=103.5) == 1  # a quiet second after it
    second(104, served=0, shed=5000)
    assert gate.retry_after_s(now=105.0) == 8  # shed everything, served nothing: capped
    gate.close()
