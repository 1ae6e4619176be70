"""Nonces and retries: when the client waits, re-sends the same bytes, or re-signs."""

from __future__ import annotations

import email.utils
import random
import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

import httpx

from memledger.protocol.codes import Code
from memledger.sdk.errors import MemLedgerError

__all__ = ["BACKLOG_FULL", "RESENT_ERRORS", "RESIGN_CODES", "RETRY_STATUSES", "NonceSource",
           "Resign", "Resigning", "RetryPolicy"]

#: Refusals of a tx's nonce alone: nothing was applied, so signing the same action again
#: with a fresh nonce is safe (one retry).
RESIGN_CODES = frozenset({Code.NONCE_REPLAYED, Code.NONCE_BELOW_WINDOW, Code.NONCE_PENDING})


class NonceSource:
    """Distinct, increasing nonces without asking the server: max(now_ns, last + 1).

    Under the v3 nonce window (docs/RULES.md) the chain accepts a signer's nonces in any
    order, so threads sharing one client (and one key) may submit concurrently: each tx
    gets its own nonce here, and whichever reaches a block first commits. Under v1-v2 a
    lower nonce committed after a higher one is refused, so concurrent writers lose txs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            self._last = max(time.time_ns(), self._last + 1)
            return self._last

    def at_least(self, committed: int) -> None:
        """Never hand out a nonce at or below one the chain already consumed."""
        with self._lock:
            self._last = max(self._last, committed)


#: Answers that mean "not now" rather than "no": the rate limit (429) and a node that is
#: briefly unable to serve (503: mempool full, cometbft or the projection unreachable).
RETRY_STATUSES = frozenset({429, 503})


#: Transport failures after which the same signed tx bytes are sent again (RetryPolicy.
#: resend_delay): the answer was lost or the request never left; not a timeout.
RESENT_ERRORS = (httpx.NetworkError, httpx.RemoteProtocolError, httpx.PoolTimeout,
                 httpx.ConnectTimeout)


#: The refusal that means "this signer's backlog is full": the same bytes pass once a block
#: has taken some of it, so it is waited out (up to `RetryPolicy.backlog_wait`).
BACKLOG_FULL = Code.SIGNER_BACKLOG_FULL.slug


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries of 429/503 answers, honouring `Retry-After` like HTTP clients do.

    Reads are safe to repeat, and so are submits: the client re-sends the *same signed
    bytes* (never re-signs on 429/503, nor when a connection fails before the answer: see
    `resend_delay`), and a tx is idempotent by its hash, so a copy that did get through
    is found by hash instead of being applied twice. The wait is the
    server's Retry-After when it gives one (spread: `spread_retry_after`), else `backoff *
    2**attempt` with jitter; both capped at `max_wait`. `retries=0` turns retrying off.

    A full signer backlog (`signer_backlog_full`) is back-pressure, not failure: the
    signer is writing faster than blocks take its txs, and the node broadcast nothing. It
    is retried, with jittered waits of at most `backlog_step`, until `backlog_wait`
    seconds have passed since the first send, so a burst of writes from one key flows at
    the chain's pace instead of failing. The client's own writes sign each retry with a
    fresh nonce (a tx that waited long would be old, close to the window's floor, when
    admitted); already-signed bytes (`broadcast`) are sent again as they are.
    """

    retries: int = 4
    backoff: float = 0.25
    max_wait: float = 30.0
    backlog_wait: float = 60.0
    backlog_step: float = 1.0

    def delay(self, resp: httpx.Response, attempt: int, elapsed: float = 0.0,
              wait_backlog: bool = True) -> float | None:
        """Seconds to wait before retry number `attempt + 1`, or None to stop here.

        `elapsed`: seconds since the first send of this request. `wait_backlog=False`
        leaves a full backlog to the caller (who re-signs).
        """
        if resp.status_code not in RETRY_STATUSES or self.retries <= 0:
            return None
        if _problem_name(resp) == BACKLOG_FULL:
            return self.backlog_delay(attempt, elapsed) if wait_backlog else None
        if attempt >= self.retries:
            return None
        advised = _retry_after(resp.headers.get("retry-after"))
        advised = self._backoff(attempt) if advised is None else spread_retry_after(advised)
        return max(0.0, min(self.max_wait, advised))

    def resend_delay(self, exc: httpx.HTTPError, attempt: int) -> float | None:
        """The wait before sending signed tx bytes again after `exc` lost the answer (a
        connection the pool closed under a busy client, a reset, a refused connect), or
        None to give up. The same bytes are idempotent by hash, so a copy that got
        through is found, not applied twice; a read or write timeout is not resent (the
        client's timeout bounds the wait)."""
        if not isinstance(exc, RESENT_ERRORS) or self.retries <= 0 or attempt >= self.retries:
            return None
        return max(0.0, min(self.max_wait, self._backoff(attempt)))

    def _backoff(self, attempt: int) -> float:
        return self.backoff * 2.0 ** attempt * (0.5 + random.random() / 2)

    def backlog_delay(self, attempt: int, elapsed: float) -> float | None:
        """The wait before trying a write refused for a full backlog again (None: give up)."""
        if self.retries <= 0 or elapsed >= self.backlog_wait:
            return None
        step = min(self.backlog_step, self.backoff * 2.0 ** min(attempt, 8))
        return min(step * (0.5 + random.random() / 2), self.backlog_wait - elapsed)


def spread_retry_after(seconds: float) -> float:
    """The wait for a Retry-After of `seconds`: that, plus up to half as long again at
    random. Clients a node turned away in the same instant were all told the same
    whole seconds; waiting exactly that, they came back in the same instant, to be
    turned away together again (300 readers shed in one burst returned as one burst of
    ~280 every few seconds, and the last of each waited 60-90 ms for its 503 behind the
    rest: BENCHMARKS.md §15, "Isolation on a seeded node")."""
    return seconds * (1.0 + random.random() / 2)


def _problem_name(resp: httpx.Response) -> str:
    """The `name` of a problem+json answer ("" for anything else)."""
    if "json" not in resp.headers.get("content-type", ""):
        return ""
    try:
        doc = resp.json()
    except ValueError:
        return ""
    return str(doc.get("name", "")) if isinstance(doc, dict) else ""


def _retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 section 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class Resign(NamedTuple):
    """What a refused write does next: pause, and first catch the nonce source up with
    the chain (`resync`) or not."""

    pause: float
    resync: bool


class Resigning:
    """One write's answer to refusals (no I/O here). Nothing was applied, so the write may
    be signed again with a fresh nonce: after a pause while its signer's backlog is full
    (until `RetryPolicy.backlog_wait`), or once after a refusal of its nonce alone."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.started = time.monotonic()
        self.waits = 0
        self.resynced = False

    def after(self, err: MemLedgerError) -> Resign | None:
        """The next step after `err`, or None to raise it."""
        if err.name == BACKLOG_FULL:
            pause = self.policy.backlog_delay(self.waits, time.monotonic() - self.started)
            if pause is None:
                return None
            self.waits += 1
            return Resign(pause, resync=False)
        if err.code in RESIGN_CODES and not self.resynced:
            self.resynced = True
            return Resign(0.0, resync=True)
        return None
