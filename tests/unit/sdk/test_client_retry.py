"""The SDK retries 429/503 a bounded number of times, honouring Retry-After, on reads and
on submits, re-sending the same signed bytes (never re-signing) — in both clients."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memledger.sdk import (
    AsyncClient,
    Client,
    MemLedgerConnectionError,
    MemLedgerError,
    RetryPolicy,
)
from tests.support.chain import seeded_key

KEY = seeded_key("retry-agent")
CHAIN = "retry-chain"
STATUS = {"chain_id": CHAIN, "moniker": "m", "height": 3, "app_hash": "", "app_version": 3,
          "software_version": "", "latest_block_time": "", "catching_up": False,
          "projection_height": 3}


def _problem(status: int, name: str, headers: dict[str, str] | None = None,
             **extra: Any) -> httpx.Response:
    return httpx.Response(status, headers=headers, json={
        "type": f"urn:memledger:problem:{name}", "title": name, "status": status,
        "detail": name, "name": name, **extra})


def _limited(retry_after: str = "2") -> httpx.Response:
    return _problem(429, "rate_limited", {"Retry-After": retry_after})


class Script:
    """A MockTransport handler answering from a queue, recording what was sent."""

    def __init__(self, *answers: httpx.Response | Callable[[httpx.Request], httpx.Response]
                 ) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        return answer(request) if callable(answer) else answer

    def bodies(self, path: str) -> list[bytes]:
        return [r.content for r in self.requests if r.url.path == path]


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the waits instead of sleeping (both clients)."""
    waits: list[float] = []

    async def fake_async_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(time, "sleep", waits.append)
    monkeypatch.setattr(asyncio, "sleep", fake_async_sleep)
    return waits


def _committed(request: httpx.Request) -> httpx.Response:
    tx = json.loads(request.content)["tx"]
    digest = hashlib.sha256(base64.b64decode(tx)).hexdigest()
    return httpx.Response(200, json={"status": "committed", "hash": digest, "code": 0,
                                     "height": 7, "memory_id": "m-1"})


def _sync(script: Script, **kw: Any) -> Client:
    return Client("http://node", key=KEY, chain_id=CHAIN,
                           transport=httpx.MockTransport(script), **kw)


def _async(script: Script, **kw: Any) -> AsyncClient:
    return AsyncClient("http://node", key=KEY, chain_id=CHAIN,
                                transport=httpx.MockTransport(script), **kw)


def _spread(slept: list[float], advised: list[float]) -> bool:
    """Each wait is its Retry-After plus up to half again (clients turned away together
    do not all come back together)."""
    return len(slept) == len(advised) and all(a <= s <= 1.5 * a
                                              for s, a in zip(slept, advised, strict=True))


def test_a_retry_after_is_spread_over_half_as_long_again() -> None:
    waits = [RetryPolicy().delay(_limited("2"), 0) for _ in range(200)]
    assert all(w is not None and 2.0 <= w <= 3.0 for w in waits)
    assert max(w for w in waits if w is not None) - min(w for w in waits if w is not None) > 0.3


def test_read_honours_retry_after(slept: list[float]) -> None:
    script = Script(_limited("2"), _problem(503, "projection_unavailable"),
                    httpx.Response(200, json=STATUS))
    with _sync(script, retry=RetryPolicy(backoff=0.5)) as ml:
        assert ml.status().height == 3
    assert len(script.requests) == 3
    assert _spread(slept[:1], [2.0])  # the server's Retry-After, spread
    assert 0.25 <= slept[1] <= 1.0  # no Retry-After: backoff * 2**1 with jitter in [0.5, 1]


def test_retries_are_bounded_then_the_problem_is_raised(slept: list[float]) -> None:
    script = Script(*[_limited("1") for _ in range(4)])
    with _sync(script, retry=RetryPolicy(retries=3)) as ml, \
            pytest.raises(MemLedgerError) as info:
        ml.status()
    assert info.value.status == 429 and info.value.name == "rate_limited"
    assert len(script.requests) == 4 and _spread(slept, [1.0, 1.0, 1.0])


def test_retry_after_is_capped_and_retries_can_be_off(slept: list[float]) -> None:
    script = Script(_limited("3600"), httpx.Response(200, json=STATUS))
    with _sync(script, retry=RetryPolicy(max_wait=5)) as ml:
        ml.status()
    assert slept == [5.0]
    script = Script(_limited())
    with _sync(script, retry=RetryPolicy(retries=0)) as ml, pytest.raises(MemLedgerError):
        ml.status()
    assert len(script.requests) == 1


def test_other_errors_are_not_retried(slept: list[float]) -> None:
    script = Script(_problem(404, "not_found"))
    with _sync(script) as ml, pytest.raises(MemLedgerError):
        ml.get_memory("nope")
    assert len(script.requests) == 1 and slept == []


def test_submit_resends_the_same_signed_bytes(slept: list[float]) -> None:
    script = Script(_limited("1"), _problem(503, "mempool_full", {"Retry-After": "1"}),
                    _committed)
    with _sync(script) as ml:
        receipt = ml.submit("m-1", "the same bytes every time")
    assert receipt.committed and receipt.memory_id == "m-1"
    sent = script.bodies("/v1/memories")
    assert len(sent) == 3 and len(set(sent)) == 1  # not re-signed: one nonce, one hash
    assert _spread(slept, [1.0, 1.0])


def test_a_copy_that_got_through_is_found_by_hash(slept: list[float]) -> None:
    """503 after the bytes reached the node: the retry is refused for its (used) nonce,
    and the client answers with the committed copy instead of signing the action again."""
    def lookup(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"status": "committed", "hash": request.url.path[-64:],
                                         "code": 0, "height": 9})

    replayed = _problem(409, "nonce_replayed", code=10)
    script = Script(_problem(503, "cometbft_unavailable"), replayed, lookup)
    with _sync(script, retry=RetryPolicy(backoff=0)) as ml:
        receipt = ml.vote("m-1")
    assert receipt.committed and receipt.height == 9
    posted = script.bodies("/v1/txs")
    assert len(posted) == 2 and posted[0] == posted[1]
    digest = hashlib.sha256(base64.b64decode(json.loads(posted[0])["tx"]))
    assert script.requests[-1].url.path == f"/v1/txs/{digest.hexdigest()}"


def test_async_client_retries_reads_and_submits(slept: list[float]) -> None:
    read = Script(_limited("2"), httpx.Response(200, json=STATUS))
    write = Script(_limited("1"), _committed)

    async def run() -> None:
        async with _async(read) as ml:
            assert (await ml.status()).chain_id == CHAIN
        async with _async(write) as ml:
            assert (await ml.submit("m-1", "async bytes")).committed

    asyncio.run(run())
    assert len(read.requests) == 2 and _spread(slept, [2.0, 1.0])
    sent = write.bodies("/v1/memories")
    assert len(sent) == 2 and sent[0] == sent[1]


def test_async_retries_are_bounded(slept: list[float]) -> None:
    script = Script(*[_limited("1") for _ in range(3)])

    async def run() -> None:
        async with _async(script, retry=RetryPolicy(retries=2)) as ml:
            await ml.validators()

    with pytest.raises(MemLedgerError) as info:
        asyncio.run(run())
    assert info.value.status == 429 and len(script.requests) == 3


def test_retry_after_as_http_date() -> None:
    resp = httpx.Response(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert RetryPolicy().delay(resp, 0) == 0.0  # a date in the past: retry now
    assert RetryPolicy().delay(httpx.Response(500), 0) is None


def _backlog_full() -> httpx.Response:
    return _problem(429, "signer_backlog_full", code=15)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A clock the client's sleeps advance (both clients), recording each wait."""
    now = [1000.0]
    waits: list[float] = []

    def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds

    async def fake_async_sleep(seconds: float) -> None:
        fake_sleep(seconds)

    monkeypatch.setattr(time, "sleep", fake_sleep)
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(asyncio, "sleep", fake_async_sleep)
    return waits


def test_a_full_signer_backlog_is_waited_out(clock: list[float]) -> None:
    """Back-pressure, not failure: past the 4 ordinary retries, in short jittered waits.
    The client's own writes are signed afresh each time (nothing was broadcast); bytes
    given to `broadcast` are sent again as they are."""
    script = Script(*[_backlog_full() for _ in range(9)], _committed)
    with _sync(script) as ml:
        receipt = ml.submit("m-1", "sent until the backlog has room")
    assert receipt.committed
    sent = script.bodies("/v1/memories")
    assert len(sent) == 10 and len(set(sent)) == 10  # a fresh nonce every time
    assert all(0 < wait <= 1.0 for wait in clock) and max(clock) > 0.5
    signed = sent[0]
    script = Script(*[_backlog_full() for _ in range(6)], _committed)
    with _sync(script) as ml:
        assert ml.broadcast(base64.b64decode(json.loads(signed)["tx"])).committed
    assert set(script.bodies("/v1/txs")) == {signed}


def test_a_backlog_that_never_drains_fails_after_backlog_wait(clock: list[float]) -> None:
    script = Script(*[_backlog_full() for _ in range(40)])
    policy = RetryPolicy(backlog_wait=5.0)

    async def run() -> None:
        async with _async(script, retry=policy) as ml:
            await ml.submit("m-1", "never admitted", wait="sync")

    with pytest.raises(MemLedgerError) as info:
        asyncio.run(run())
    assert info.value.status == 429 and info.value.name == "signer_backlog_full"
    assert sum(clock) == pytest.approx(5.0) and len(script.requests) == len(clock) + 1
    script = Script(_backlog_full())
    with _sync(script, retry=RetryPolicy(retries=0)) as ml, pytest.raises(MemLedgerError):
        ml.submit("m-1", "retrying is off", wait="sync")
    assert len(script.requests) == 1


def _written(content: str, tags: list[str], author: str) -> dict[str, Any]:
    """The memory an earlier attempt of the same submit wrote, since decided."""
    return {"id": "m-same", "domain": "general", "author": author, "type": "fact",
            "content": content, "content_hash": hashlib.sha256(content.encode()).hexdigest(),
            "confidence_ppm": 900_000, "tags": tags, "status": "committed",
            "submitted_height": 5, "submitted_time_ns": 1, "decided_height": 6,
            "tx": "ab" * 32}


def test_a_retried_submit_of_a_decided_write_returns_its_receipt(slept: list[float]) -> None:
    me = bytes(KEY.verify_key).hex()

    def terminal(_: httpx.Request) -> httpx.Response:
        return _problem(409, "memory_terminal", code=38)

    def same(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=_written("the same words", ["a", "b"], me))

    def other(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=_written("other words", ["a", "b"], me))

    with _sync(Script(terminal, same)) as ml:
        receipt = ml.submit("m-same", "the same words", tags=["b", "a"])
    assert receipt.included and receipt.hash == "ab" * 32
    assert (receipt.height, receipt.memory_status) == (5, "committed")
    with _sync(Script(terminal, other)) as ml, pytest.raises(MemLedgerError) as refused:
        ml.submit("m-same", "the same words", tags=["a", "b"])
    assert refused.value.name == "memory_terminal"

    async def run() -> Any:
        async with _async(Script(terminal, same)) as aml:
            return await aml.submit("m-same", "the same words", tags=["a", "b"])
    assert asyncio.run(run()).memory_status == "committed"


def _lost(request: httpx.Request) -> httpx.Response:
    """A connection that failed under the request (as httpcore's EBADF race at pool
    exhaustion does when >100 threads share one client): the answer is lost."""
    raise httpx.ReadError("[Errno 9] Bad file descriptor", request=request)


def test_a_lost_answer_resends_the_same_bytes(slept: list[float]) -> None:
    script = Script(_lost, _lost, _committed)
    with _sync(script) as ml:
        receipt = ml.submit("m-1", "sent again after a lost answer")
    assert receipt.committed and receipt.memory_id == "m-1"
    sent = script.bodies("/v1/memories")
    assert len(sent) == 3 and len(set(sent)) == 1  # never re-signed
    assert len(slept) == 2


def test_a_lost_answer_whose_copy_landed_is_found_by_hash(slept: list[float]) -> None:
    """The first copy was applied before its connection failed: the resent copy is
    refused for its used nonce, and the client answers with the landed one."""
    def lookup(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"status": "included", "hash": request.url.path[-64:],
                                         "code": 0, "height": 11})

    script = Script(_lost, _problem(409, "nonce_replayed", code=10), lookup)
    with _sync(script) as ml:
        receipt = ml.vote("m-1")
    assert receipt.included and receipt.height == 11
    posted = script.bodies("/v1/txs")
    assert len(posted) == 2 and posted[0] == posted[1]


def test_resending_after_lost_answers_is_bounded_in_both_clients(slept: list[float]) -> None:
    script = Script(*[_lost] * 3)
    with _sync(script, retry=RetryPolicy(retries=2)) as ml, \
            pytest.raises(MemLedgerConnectionError):
        ml.submit("m-1", "never answered")
    sent = script.bodies("/v1/memories")
    assert len(sent) == 3 and len(set(sent)) == 1
    ascript = Script(_lost, _committed)

    async def run() -> Any:
        async with _async(ascript) as aml:
            return await aml.submit("m-1", "async, sent again")

    assert asyncio.run(run()).committed
    asent = ascript.bodies("/v1/memories")
    assert len(asent) == 2 and asent[0] == asent[1]


def test_reads_and_timeouts_are_not_resent(slept: list[float]) -> None:
    reads = Script(_lost)
    with _sync(reads) as ml, pytest.raises(MemLedgerConnectionError):
        ml.status()
    assert len(reads.requests) == 1

    def timed_out(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    writes = Script(timed_out)
    with _sync(writes) as ml, pytest.raises(MemLedgerConnectionError):
        ml.submit("m-1", "the client's timeout bounds the wait")
    assert len(writes.requests) == 1 and slept == []
