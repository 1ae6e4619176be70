"""Python SDK for a memledger node's REST API: sign locally, submit, read back.

    from memledger.sdk.client import MemLedgerClient
    from memledger.sdk.keys import Agent

    with MemLedgerClient("http://127.0.0.1:26680", key=Agent.generate()) as ml:
        ml.submit("note-1", "the build cache lives in .cache/", tags=["infra"])
        for memory in ml.search("build cache"):
            print(memory.id, memory.status)

Keys never leave the process: every transaction is built and signed here and sent as
bytes. Nonces are `max(time_ns, last + 1)` under a lock, so concurrent calls and process
restarts never reuse one without a server round trip (the protocol allows gaps).
Failures raise `MemLedgerError` carrying the server's problem (numeric `code`, `name`);
429 and 503 answers are first retried with backoff, honouring Retry-After (`RetryPolicy`);
a signer whose backlog is full waits for the chain instead of failing.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import email.utils
import hashlib
import json
import numbers
import random
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, TypeVar
from urllib.parse import quote

import httpx
from nacl.signing import SigningKey

from memledger.protocol.codes import Code
from memledger.protocol.limits import MAX_CONTENT_BYTES
from memledger.sdk.keys import Agent
from memledger.sdk.light.client import TrustRoot
from memledger.sdk.light.errors import ProofError, TrustError, VerificationError
from memledger.sdk.light.provider import Provider, RestProvider, RpcProvider
from memledger.sdk.light.reads import ReadVerifier
from memledger.sdk.txbuilder import (
    DECISIONS,
    LEVELS,
    TxBuilder,
    confidence_to_ppm,
    sign_cocommit,
)
from memledger.sdk.txbuilder import cocommit_core as _cocommit_core

__all__ = [
    "Account", "AsyncMemLedgerClient", "Corroboration", "MemLedgerClient",
    "MemLedgerConnectionError", "MemLedgerError", "Memory", "MemoryPage", "RetryPolicy",
    "Status", "TxReceipt", "Validator", "Vote", "VerificationError", "cocommit_core",
    "derive_memory_id", "sign_cocommit",
]

DEFAULT_URL = "http://127.0.0.1:26680"
MakeTx = Callable[[TxBuilder, int], bytes]
_T = TypeVar("_T")


# ----------------------------------------------------------------------------- errors
#: the problem a node without an embedder answers a search by meaning with
RECALL_UNAVAILABLE = "recall_unavailable"


class MemLedgerError(Exception):
    """A problem reported by the node (or no answer at all, see the subclass).

    `code`/`name` are the ledger result code and its slug for rejected transactions
    (e.g. 8 / "bad_signature"); for other problems `code` is None and `name` is the
    problem slug (e.g. "not_found", "invalid_request").
    """

    def __init__(self, message: str, *, status: int = 0, code: int | None = None,
                 name: str = "", title: str = "", detail: str = "",
                 problem: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.name = name
        self.title = title
        self.detail = detail
        self.problem = problem or {}

    @classmethod
    def from_response(cls, resp: httpx.Response) -> MemLedgerError:
        try:
            doc = resp.json()
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            text = resp.text.strip()[:200] or resp.reason_phrase
            return cls(f"HTTP {resp.status_code}: {text}", status=resp.status_code,
                       name=f"http_{resp.status_code}", detail=text)
        code = doc.get("code")
        name = str(doc.get("name") or doc.get("title") or f"http_{resp.status_code}")
        detail = str(doc.get("detail") or doc.get("title") or "")
        label = f"{name} (code {code})" if isinstance(code, int) else name
        return cls(f"{label}: {detail}", status=resp.status_code,
                   code=code if isinstance(code, int) else None, name=name,
                   title=str(doc.get("title", "")), detail=detail, problem=doc)


class MemLedgerConnectionError(MemLedgerError):
    """The node could not be reached (nothing is known about the request's effect)."""


class ProvenAbsent(MemLedgerError):
    """A verified read's 404 that the chain proves: no such memory at `verified_height`.
    Like a found memory's, the height may be old (a node picks the state it proves
    from): compare it with what you expect where freshness matters."""

    def __init__(self, not_found: MemLedgerError, verified_height: int) -> None:
        super().__init__(f"{not_found} (proven absent at height {verified_height})",
                         status=not_found.status, code=not_found.code, name=not_found.name,
                         title=not_found.title, detail=not_found.detail,
                         problem=not_found.problem)
        self.verified_height = verified_height


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class TxReceipt:
    """What the node knows about a transaction. `status` is one of submitted, accepted,
    included (in a block, code 0), rejected (only from `tx()` lookups) or unknown (poll
    `wait_tx`).

    A tx is *included*; a memory is *committed* only when validators accept it:
    `memory_status` is what the block made of the memory the tx is about (a submit's
    memory is `proposed`; `wait_decided` waits for the validators).
    """

    status: str
    hash: str
    code: int | None = None
    name: str | None = None
    log: str = ""
    height: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    memory_id: str | None = None
    memory_status: str | None = None

    @property
    def included(self) -> bool:
        """In a block with code 0 ("committed" is what nodes before 0.2 called it)."""
        return self.status in ("included", "committed")

    @property
    def committed(self) -> bool:
        """Deprecated name of `included`: the *tx* is in a block; the memory may still be
        `proposed` (see `memory_status`)."""
        return self.included

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TxReceipt:
        events = list(doc.get("events") or [])
        memory_id = doc.get("memory_id") or next(
            (e["attributes"]["id"] for e in events
             if e.get("type") in ("cocommit", "memory") and "id" in e.get("attributes", {})),
            None)
        memory_status = doc.get("memory_status") or next(
            (e["attributes"].get("status") for e in reversed(events)
             if e.get("type") == "memory" and "status" in e.get("attributes", {})), None)
        return cls(status=doc["status"], hash=doc["hash"], code=doc.get("code"),
                   name=doc.get("name"), log=doc.get("log") or "", height=doc.get("height"),
                   events=events, memory_id=memory_id, memory_status=memory_status)


@dataclass(frozen=True)
class Memory:
    id: str
    domain: str
    author: str
    type: str
    content: str | None
    content_hash: str
    confidence_ppm: int
    tags: list[str]
    status: str
    submitted_height: int
    submitted_time_ns: int
    decided_height: int | None
    scope: str | None = None
    cocommit: str | None = None
    tx: str = ""
    history: list[list[Any]] = field(default_factory=list)
    ballot: dict[str, Any] | None = None
    corroborators: list[str] = field(default_factory=list)
    coauthors: list[str] | None = None
    #: Why it has its status (vote tally, dispute round, expiry, this node's voter's
    #: reason); derived by the node when read, so absent (None) on a verified read.
    status_reason: str | None = None
    #: Set only on a verified read: the height H whose app hash (header H+1) proved it.
    verified_height: int | None = None
    #: Set on ranked search hits (recall): the hit's score and the mode that ranked it.
    score: float | None = None
    mode: str | None = None

    @property
    def confidence(self) -> float:
        return self.confidence_ppm / 1_000_000

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Memory:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in doc.items() if k in names})


@dataclass(frozen=True)
class MemoryPage:
    items: list[Memory]
    next_cursor: str | None


@dataclass(frozen=True)
class Vote:
    voter: str
    decision: str
    height: int
    reason: str | None = None  # as the voter gave it on chain (app version 5+)


@dataclass(frozen=True)
class Corroboration:
    agent: str
    height: int


@dataclass(frozen=True)
class Account:
    public_key: str
    last_nonce: int
    next_nonce: int
    height: int
    source: str = "app"


@dataclass(frozen=True)
class Validator:
    public_key: str
    address: str
    power: int


@dataclass(frozen=True)
class Status:
    chain_id: str
    moniker: str
    height: int
    app_hash: str
    app_version: int
    software_version: str
    latest_block_time: str
    catching_up: bool
    projection_height: int

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Status:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in doc.items() if k in names})


# ----------------------------------------------------------------------------- helpers
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
    server's Retry-After when it gives one, else `backoff * 2**attempt` with jitter; both
    capped at `max_wait`. `retries=0` turns retrying off.

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
        if advised is None:
            advised = self._backoff(attempt)
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
        return self.backoff * 2 ** attempt * (0.5 + random.random() / 2)

    def backlog_delay(self, attempt: int, elapsed: float) -> float | None:
        """The wait before trying a write refused for a full backlog again (None: give up)."""
        if self.retries <= 0 or elapsed >= self.backlog_wait:
            return None
        step = min(self.backlog_step, self.backoff * 2 ** min(attempt, 8))
        return min(step * (0.5 + random.random() / 2), self.backlog_wait - elapsed)


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


def check_content_size(content: str) -> None:
    """Refuse content the ledger would refuse, before signing, naming its size and the
    limit (sent anyway, a huge content would be refused as an oversized request body)."""
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > MAX_CONTENT_BYTES:
        raise MemLedgerError(
            f"content_too_large (code {int(Code.CONTENT_TOO_LARGE)}): content is {size} "
            f"bytes ({size / 1024:.0f} KiB); a memory's content is at most "
            f"{MAX_CONTENT_BYTES} bytes ({MAX_CONTENT_BYTES >> 10} KiB)",
            code=int(Code.CONTENT_TOO_LARGE), name="content_too_large",
            detail=f"content is {size} bytes; the limit is {MAX_CONTENT_BYTES} bytes")


def check_content(content: str) -> None:
    """Refuse content that cannot be sent, before signing: text UTF-8 cannot carry (a lone
    surrogate, e.g. from command-line bytes that are not UTF-8; it failed deep in the
    encoder as a UnicodeEncodeError) or too large (check_content_size)."""
    if not isinstance(content, str):
        _invalid("invalid_content", f"content must be a str, got {type(content).__name__}")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as exc:
        _invalid("invalid_content", f"content holds a lone surrogate "
                                    f"U+{ord(content[exc.start]):04X} at character {exc.start} "
                                    "(counting from 0), which is not text: UTF-8 cannot carry it")
    check_content_size(content)


def _checked_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """The tags as a tuple of strings: a str given for tags would be taken as its letters
    ("abc" as a, b, c)."""
    if isinstance(tags, (str, bytes)):
        _invalid("invalid_tags", f"tags must be a list of tags, got the {type(tags).__name__} "
                                 f"{tags!r} (write tags=[{tags!r}])")
    if not isinstance(tags, Iterable):  # None or 7 was a bare TypeError
        _invalid("invalid_tags", f"tags must be a list of tags, got {tags!r}")
    out = tuple(tags)
    odd = next((t for t in out if not isinstance(t, str)), None)
    if odd is not None:
        _invalid("invalid_tags", f"each tag must be a str, got {odd!r}")
    return out


def _confidence_ppm(confidence: float) -> int:
    """A confidence given as a fraction from 0 to 1 (0.9: 90%), in the ledger's parts per
    million. Anything else is refused: an int above 1 silently meant parts per million (2
    was 0.0002%), and 1.5 was signed only to be refused by the ledger."""
    if (isinstance(confidence, bool) or not isinstance(confidence, numbers.Real)
            or not 0 <= confidence <= 1):
        _invalid("invalid_confidence", "confidence is a fraction from 0 to 1 (0.9 means 90%), "
                                       f"got {confidence!r}")
    return confidence_to_ppm(float(confidence))


def cocommit_core(chain_id: str, content: str, coauthors: Sequence[bytes], *,
                  tags: Sequence[str] = (), **fields: Any) -> bytes:
    """The co-commit core every coauthor signs (`memledger.sdk.txbuilder.cocommit_core`),
    refusing before anything is signed what `submit` refuses: content that is not text or
    too large, and a str for tags (it was signed as its letters: tags="infra" committed a
    co-commit tagged a, f, i, n, r)."""
    check_content(content)
    return _cocommit_core(chain_id, content, coauthors, tags=_checked_tags(tags), **fields)


def _one_of(name: str, value: str, choices: dict[str, Any]) -> str:
    """`value` if it is one of `choices` (a vote's decision, a grant's level), else
    MemLedgerError `invalid_<name>` naming them (it was a bare KeyError from the builder)."""
    if not isinstance(value, str) or value not in choices:
        _invalid(f"invalid_{name}", f"{name} must be one of {'|'.join(choices)}, got {value!r}")
    return value


def _invalid(name: str, detail: str) -> NoReturn:
    raise MemLedgerError(f"{name}: {detail}", name=name, detail=detail)


def derive_memory_id(author_hex: str, domain: str, content: str) -> str:
    """A stable id for (author, domain, content), so a retried submit is idempotent."""
    digest = hashlib.sha256(f"{author_hex}\0{domain}\0{content}".encode()).hexdigest()
    return f"m-{digest[:32]}"


def _signing_key(key: Agent | SigningKey | None) -> SigningKey | None:
    if key is None or isinstance(key, SigningKey):
        return key
    return key.signing_key


def _memory_params(
    *, domain: str | None, status: str | None, type: str | None, author: str | None,  # noqa: A002
    tags: Sequence[str], include_disputed: bool, q: str | None, limit: int,
    cursor: str | None, mode: str | None = None,
) -> dict[str, Any]:
    params: dict[str, Any] = {"limit": limit}
    for name, value in (("domain", domain), ("status", status), ("type", type),
                        ("author", author), ("q", q), ("cursor", cursor), ("mode", mode)):
        if value is not None:
            params[name] = value
    tags = _checked_tags(tags)  # a str would be sent as its letters, matching nothing
    if tags:
        params["tag"] = list(tags)
    if include_disputed:
        params["include_disputed"] = "true"
    return params


def _most(max_items: int | None, limit: int | None) -> int | None:
    """The most items a listing yields: `limit` is `max_items` by recall's name (passed on
    to the page request, it collided with the page size: a TypeError)."""
    if limit is None:
        return max_items
    return limit if max_items is None else min(max_items, limit)


def _page(doc: dict[str, Any]) -> MemoryPage:
    return MemoryPage([Memory.from_json(m) for m in doc["items"]], doc.get("next_cursor"))


class _Resign(NamedTuple):
    """What a refused write does next: pause, and first catch the nonce source up with
    the chain (`resync`) or not."""

    pause: float
    resync: bool


class _Resigning:
    """One write's answer to refusals (no I/O here). Nothing was applied, so the write may
    be signed again with a fresh nonce: after a pause while its signer's backlog is full
    (until `RetryPolicy.backlog_wait`), or once after a refusal of its nonce alone."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.started = time.monotonic()
        self.waits = 0
        self.resynced = False

    def after(self, err: MemLedgerError) -> _Resign | None:
        """The next step after `err`, or None to raise it."""
        if err.name == BACKLOG_FULL:
            pause = self.policy.backlog_delay(self.waits, time.monotonic() - self.started)
            if pause is None:
                return None
            self.waits += 1
            return _Resign(pause, resync=False)
        if err.code in RESIGN_CODES and not self.resynced:
            self.resynced = True
            return _Resign(0.0, resync=True)
        return None


class _Core:
    """State and request shapes shared by the sync and async clients (no I/O here)."""

    def __init__(self, base_url: str, key: Agent | SigningKey | None, chain_id: str | None,
                 nonces: NonceSource | None = None, retry: RetryPolicy | None = None,
                 trust: TrustRoot | None = None, trust_store: Path | None = None,
                 light_rpc: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = _signing_key(key)
        self._chain_id = chain_id
        self._nonces = NonceSource() if nonces is None else nonces
        self._retry = RetryPolicy() if retry is None else retry
        # Verified reads (`verify=True`) trust `trust` (genesis or a pinned header). Light
        # blocks come from this node's `/v1/light` pass-through unless `light_rpc` names
        # a CometBFT RPC endpoint; either way they are verified, not trusted.
        # `trust_store` keeps verified headers on disk between runs.
        self._trust = (trust, trust_store, light_rpc)
        self._verifier_obj: ReadVerifier | None = None

    def _verifier(self) -> ReadVerifier:
        root, store, rpc_url = self._trust
        if root is None:
            raise TrustError("no_root", "verified reads need a trust root: pass "
                                        "trust=GenesisRoot(...) or PinnedRoot(...)")
        if self._verifier_obj is None:
            provider: Provider = (RpcProvider(rpc_url) if rpc_url
                                  else RestProvider(self.base_url))
            self._verifier_obj = ReadVerifier(root, provider, store_path=store)
        return self._verifier_obj

    def _record_value(self, kind: str, ident: str, doc: Any) -> tuple[Any, int]:
        path = RECORD_KINDS.get(kind)
        if path is None:
            raise ValueError(f"unknown record kind {kind!r}")
        record = doc.get("record") if isinstance(doc, dict) else None
        raw, height = self._verifier().record(record, path, ident.encode())
        if raw is None:
            return None, height
        return (raw.decode() if kind == "content" else json.loads(raw)), height

    def _absent(self, memory_id: str, proof: Any) -> int:
        """A 404 stands only if the chain proves the memory absent (else ProofError);
        returns the height it is proven absent at."""
        record = proof.get("record") if isinstance(proof, dict) else None
        value, height = self._verifier().record(record, "/memory", memory_id.encode())
        if value is not None:
            raise ProofError("served_differs", f"memory {memory_id!r} was answered 'not found' "
                                               f"but is committed at height {height}")
        return height

    def _verified(self, memory_id: str, served: dict[str, Any] | None,
                  proof: Any) -> Memory:
        """Memory as proven; raises VerificationError (see memledger.sdk.light.errors)."""
        doc = self._verifier().memory(memory_id, served, proof)
        return Memory.from_json(doc)

    @property
    def public_key(self) -> str | None:
        return None if self._key is None else bytes(self._key.verify_key).hex()

    def _require_key(self) -> SigningKey:
        if self._key is None:
            raise MemLedgerError("this client has no signing key (pass key=...)",
                                 name="no_key")
        return self._key

    @staticmethod
    def _tx_json(tx: bytes) -> dict[str, str]:
        return {"tx": base64.b64encode(tx).decode()}

    def _submit_maker(self, memory_id: str | None, content: str, domain: str, type: str,  # noqa: A002
                      confidence: float | int, tags: Sequence[str]
                      ) -> tuple[str, MakeTx, dict[str, Any]]:
        """The memory id, the tx maker, and the fields the memory will hold (to know an
        earlier attempt's memory as this same write)."""
        check_content(content)
        if memory_id is not None and not isinstance(memory_id, str):  # 7: a bare TypeError
            _invalid("invalid_memory_id", f"memory_id must be a str or None, got {memory_id!r}")
        tags = _checked_tags(tags)
        ppm = _confidence_ppm(confidence)
        mid = memory_id or derive_memory_id(self.public_key or "", domain, content)

        def make(b: TxBuilder, nonce: int) -> bytes:
            return b.submit(nonce, mid, content, domain=domain, memory_type=type,
                            confidence_ppm=ppm, tags=tags)

        fields = {"author": self.public_key, "domain": domain, "type": type,
                  "content_hash": hashlib.sha256(content.encode()).hexdigest(),
                  "confidence_ppm": ppm, "tags": sorted(tags)}
        return mid, make, fields

    @staticmethod
    def _earlier_write(refused: MemLedgerError, memory: Memory | None,
                       fields: dict[str, Any]) -> TxReceipt:
        """A submit refused as `memory_terminal` whose memory is this very write (same
        author, content and fields: an earlier attempt whose answer was lost, decided
        since) succeeded: the receipt of the tx that wrote it. Anything else: `refused`."""
        if memory is None or any(getattr(memory, k) != v for k, v in fields.items()):
            raise refused
        return TxReceipt(status="included", hash=memory.tx, code=0, name="ok",
                         log="already written by this key (an earlier attempt); "
                             f"the memory is {memory.status}",
                         height=memory.submitted_height, memory_id=memory.id,
                         memory_status=memory.status)

    @staticmethod
    def _tx_hash(tx: bytes) -> str:
        return hashlib.sha256(tx).hexdigest()

    @staticmethod
    def _raise_for(resp: httpx.Response) -> Any:
        # a 3xx too: redirects are not followed, and its empty body is no answer to parse
        if resp.status_code >= 300:
            raise MemLedgerError.from_response(resp)
        if resp.headers.get("content-type", "").startswith("application/json"):
            return resp.json()
        return resp.text


#: Pause before the one re-read after a served-vs-proven difference (a Commit in flight).
SERVED_RETRY_S = 0.3

#: Record kinds of GET /v1/proofs/{kind} -> the ABCI query path whose key rule applies.
RECORD_KINDS = {"memory": "/memory", "content": "/content", "account": "/account",
                "domain": "/domain", "scope": "/scope", "proposal": "/proposal",
                "cocommit": "/cocommit", "validators": "/validators"}


def _served(doc: dict[str, Any], memory_id: str) -> dict[str, Any]:
    """The memory a proven read served, without its proof."""
    return {k: v for k, v in _the_memory(doc, memory_id).items() if k != "proof"}


def _the_memory(doc: dict[str, Any], memory_id: str) -> dict[str, Any]:
    """`doc` if it is the memory asked for; a clear error if the node answered for
    something else (never a memory with another id, or a crash on a vote list)."""
    if isinstance(doc, dict) and doc.get("id") == memory_id:
        return doc
    detail = f"the node did not answer with memory {memory_id!r}"
    raise MemLedgerError(detail, name="unexpected_response", detail=detail)


def _memory_doc(memory: Memory) -> dict[str, Any]:
    """A Memory back in the API's JSON shape, to compare with the proven record."""
    names = [n for n in Memory.__dataclass_fields__
             if n not in ("verified_height", "score", "mode")]
    return {n: getattr(memory, n) for n in names}


def _q(ident: str) -> str:
    """Percent-encode an id as one URL path segment. A '/' is sent as %2F (the server
    decodes it back): left as it is, an id such as "a/../b" would be cleaned to "b" by
    the HTTP client, and the node asked for another memory. For the same reason an id
    that is all "." or ".." is sent as %2E / %2E%2E: as a literal dot segment the HTTP
    client would drop it (and "..", the segment before it) from the path."""
    if ident in (".", ".."):
        return ident.replace(".", "%2E")
    return quote(ident, safe=":@")


_TX_HASH = re.compile(r"[0-9a-fA-F]{64}")


def _tx_path(tx_hash: str) -> str:
    """The path of one tx outcome, for a hash checked first: "" would ask for /v1/txs/
    (a redirect, no outcome) and "../status" for another route altogether."""
    if not isinstance(tx_hash, str) or _TX_HASH.fullmatch(tx_hash) is None:
        detail = f"{tx_hash!r} is not a tx hash (64 hex digits, the SHA-256 of the tx)"
        raise MemLedgerError(f"invalid_tx_hash: {detail}", name="invalid_tx_hash",
                             detail=detail)
    return f"/v1/txs/{tx_hash}"


_PUBLIC_KEY = re.compile(r"[0-9a-fA-F]{64}")


def _account_path(public_key: str) -> str:
    """The path of one account, for a key checked first: put in the path as it is,
    "../status" would ask for another route (and its answer crash Account)."""
    if not isinstance(public_key, str) or _PUBLIC_KEY.fullmatch(public_key) is None:
        detail = f"{public_key!r} is not a public key (64 hex digits, an Ed25519 key)"
        raise MemLedgerError(f"invalid_public_key: {detail}", name="invalid_public_key",
                             detail=detail)
    return f"/v1/accounts/{public_key}"


def _known(cls: type[_T], doc: Any) -> _T:
    """Dataclass `cls` from the fields of `doc` it knows: a field a newer node adds is
    left out (like Memory.from_json), and a document that is not one is a clear error."""
    names = cls.__dataclass_fields__  # type: ignore[attr-defined]
    try:
        return cls(**{k: v for k, v in doc.items() if k in names})
    except (AttributeError, TypeError):
        detail = f"the node answered {_shown(doc)} where a {cls.__name__} was expected"
        raise MemLedgerError(f"unexpected_response: {detail}", name="unexpected_response",
                             detail=detail) from None


def _shown(doc: Any) -> str:
    text = json.dumps(doc, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _grantee_bytes(grantee: bytes | str) -> bytes:
    """A grantee's public key: 32 bytes, or 64 hex digits (else MemLedgerError, where
    "zz" raised a bare ValueError)."""
    if isinstance(grantee, bytes) and len(grantee) == 32:
        return grantee
    if isinstance(grantee, str) and _PUBLIC_KEY.fullmatch(grantee) is not None:
        return bytes.fromhex(grantee)
    _invalid("invalid_public_key", f"grantee {grantee!r} is not a public key (64 hex digits "
                                   "or 32 bytes, an Ed25519 key)")


def _decision_timeout(message: str) -> MemLedgerError:
    return MemLedgerError(f"decision_timeout: {message} (still proposed: its validators "
                          "have not reached a quorum yet)", name="decision_timeout",
                          detail=message)


def _connection_error(base_url: str, exc: httpx.HTTPError) -> MemLedgerConnectionError:
    return MemLedgerConnectionError(f"cannot reach {base_url}: {type(exc).__name__}: {exc}",
                                    name="connection_error")


# ----------------------------------------------------------------------------- sync
class MemLedgerClient(_Core):
    """Blocking client; safe to share between threads.

    Clients for one key (e.g. one per node) should share a `NonceSource` (`nonces=`), so
    that no two of them can hand out the same nonce.
    """

    def __init__(self, base_url: str = DEFAULT_URL, key: Agent | SigningKey | None = None,
                 chain_id: str | None = None, *, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None,
                 nonces: NonceSource | None = None, retry: RetryPolicy | None = None,
                 trust: TrustRoot | None = None, trust_store: Path | None = None,
                 light_rpc: str | None = None) -> None:
        super().__init__(base_url, key, chain_id, nonces, retry, trust, trust_store, light_rpc)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self._chain_lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemLedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, wait_backlog: bool = True, resend: bool = False,
              **kwargs: Any) -> tuple[httpx.Response, int]:
        """The answer after retrying 429/503 per the policy (and, with `resend`, a lost
        answer: see RetryPolicy.resend_delay), and how often it was sent."""
        attempt, started = 0, time.monotonic()
        while True:
            try:
                resp = self._http.request(method, path, **kwargs)
            except httpx.HTTPError as exc:
                lost = self._retry.resend_delay(exc, attempt) if resend else None
                if lost is None:
                    raise _connection_error(self.base_url, exc) from None
                time.sleep(lost)
                attempt += 1
                continue
            delay = self._retry.delay(resp, attempt, time.monotonic() - started, wait_backlog)
            if delay is None:
                return resp, attempt + 1
            time.sleep(delay)
            attempt += 1

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        resp, _ = self._call(method, path, **kwargs)
        return self._raise_for(resp)

    def _post_tx(self, path: str, tx: bytes, wait: str, wait_backlog: bool = True) -> Any:
        """POST signed bytes (the same bytes on every retry, after a 429/503 or a lost
        answer). If a retried copy is then refused for its nonce, an earlier copy got
        through: answer with it, found by hash."""
        resp, sent = self._call("POST", path, wait_backlog, resend=True,
                                params={"wait": wait}, json=self._tx_json(tx))
        try:
            return self._raise_for(resp)
        except MemLedgerError as err:
            if sent > 1 and err.code in RESIGN_CODES:
                found = self._landed(self._tx_hash(tx))
                if found is not None:
                    return found
            raise

    def _landed(self, tx_hash: str) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = self._request("GET", f"/v1/txs/{tx_hash}")
        except MemLedgerError:
            return None
        return doc if doc.get("status") in ("included", "committed") else None

    @property
    def chain_id(self) -> str:
        """Given at construction, else discovered once from /v1/status."""
        with self._chain_lock:
            if self._chain_id is None:
                self._chain_id = self.status().chain_id
            return self._chain_id

    # --- writes -----------------------------------------------------------------
    def _send(self, path: str, make: MakeTx, wait: str, memory_id: str | None = None) -> TxReceipt:
        key = self._require_key()
        builder = TxBuilder(key, self.chain_id)
        refusals = _Resigning(self._retry)
        while True:
            tx = make(builder, self._nonces.next())
            try:
                doc = self._post_tx(path, tx, wait, wait_backlog=False)
            except MemLedgerError as err:
                step = refusals.after(err)
                if step is None:
                    raise
                if step.resync:
                    self._nonces.at_least(self.account().last_nonce)
                if step.pause:
                    time.sleep(step.pause)
                continue
            return TxReceipt.from_json({**doc, "memory_id": doc.get("memory_id") or memory_id})

    def broadcast(self, tx: bytes, wait: str = "commit") -> TxReceipt:
        """Send already-signed tx bytes."""
        return TxReceipt.from_json(self._post_tx("/v1/txs", tx, wait))

    def submit(self, memory_id: str | None, content: str, *, domain: str = "general",
               type: str = "fact", confidence: float | int = 0.9,  # noqa: A002
               tags: Sequence[str] = (), wait: str = "commit",
               decide_timeout: float = 30.0) -> TxReceipt:
        """Propose a memory. `wait="commit"` returns once its tx is in a block (the memory
        is then `proposed`); `wait="decided"` also waits up to `decide_timeout` seconds for
        the validators' decision: `memory_status` is then `committed` or `deprecated`, or
        still `proposed` if they have not decided by then.

        `confidence` is a fraction from 0 to 1 (0.9 means 90%) and `tags` a list of
        strings; other values (an int above 1, a str for tags) are refused before signing,
        as is content that is not text (MemLedgerError)."""
        mid, make, fields = self._submit_maker(memory_id, content, domain, type, confidence,
                                               tags)
        try:
            receipt = self._send("/v1/memories", make, "commit" if wait == "decided" else wait,
                                 mid)
        except MemLedgerError as refused:
            if refused.code != Code.MEMORY_TERMINAL:
                raise
            return self._earlier_write(refused, self._memory_or_none(mid), fields)
        if wait != "decided" or not receipt.included:
            return receipt
        try:
            status = self.wait_decided(mid, decide_timeout).status
        except MemLedgerError as err:
            if err.name != "decision_timeout":
                raise
            status = "proposed"  # included, not decided yet: the receipt says so
        return dataclasses.replace(receipt, memory_status=status)

    def vote(self, memory_id: str, decision: str = "accept", *, reason: str = "",
             wait: str = "commit") -> TxReceipt:
        """Vote on a proposed memory; `reason` is kept on chain with the vote (app version
        5+; an older chain refuses a vote that gives one)."""
        _one_of("decision", decision, DECISIONS)
        return self._send("/v1/txs", lambda b, n: b.vote(n, memory_id, decision, reason), wait,
                          memory_id)

    def challenge(self, memory_id: str, reason: str = "", *, wait: str = "commit") -> TxReceipt:
        return self._send("/v1/txs", lambda b, n: b.challenge(n, memory_id, reason), wait,
                          memory_id)

    def corroborate(self, memory_id: str, *, wait: str = "commit") -> TxReceipt:
        return self._send("/v1/txs", lambda b, n: b.corroborate(n, memory_id), wait, memory_id)

    def reinstate(self, memory_id: str, *, wait: str = "commit") -> TxReceipt:
        return self._send("/v1/txs", lambda b, n: b.reinstate(n, memory_id), wait, memory_id)

    def grant(self, domain: str, grantee: bytes | str, level: str = "write", *,
              expires_height: int = 0, wait: str = "commit") -> TxReceipt:
        pk = _grantee_bytes(grantee)
        _one_of("level", level, LEVELS)
        return self._send("/v1/txs", lambda b, n: b.grant(n, domain, pk, level, expires_height),
                          wait)

    def revoke(self, domain: str, grantee: bytes | str, *, wait: str = "commit") -> TxReceipt:
        pk = _grantee_bytes(grantee)
        return self._send("/v1/txs", lambda b, n: b.revoke(n, domain, pk), wait)

    def cocommit(self, core: bytes, signatures: Sequence[tuple[bytes, bytes]], *,
                 wait: str = "commit") -> TxReceipt:
        """Submit a co-commit: `core` from `cocommit_core`, one signature per coauthor."""
        ordered = sorted(signatures)
        return self._send("/v1/txs", lambda b, n: b.cocommit(n, core, ordered), wait)

    # --- reads ------------------------------------------------------------------
    def status(self) -> Status:
        return Status.from_json(self._request("GET", "/v1/status"))

    def ready(self) -> dict[str, Any]:
        doc: dict[str, Any] = self._request("GET", "/ready")
        return doc

    def get_memory(self, memory_id: str) -> Memory:
        return Memory.from_json(_the_memory(
            self._request("GET", f"/v1/memories/{_q(memory_id)}"), memory_id))

    def _memory_or_none(self, memory_id: str) -> Memory | None:
        try:
            return self.get_memory(memory_id)
        except MemLedgerError:
            return None

    def get(self, memory_id: str, *, verify: bool = False) -> Memory:
        """One memory; with `verify`, only if its record and content prove against a
        light-client-verified app hash and match what the node served (else
        VerificationError saying which check failed)."""
        if not verify:
            return self.get_memory(memory_id)
        try:
            doc = self._request("GET", f"/v1/memories/{_q(memory_id)}", params={"prove": "true"})
        except MemLedgerError as exc:
            if exc.status != 404:
                raise
            # A node could hide a record behind a 404: ask for the proof of absence.
            proof = self._request("GET", "/v1/proofs/memory", params={"id": memory_id})
            raise ProvenAbsent(exc, self._absent(memory_id, proof)) from None
        try:
            return self._verified(memory_id, _served(doc, memory_id), doc.get("proof"))
        except ProofError as exc:
            if exc.reason != "served_differs":
                raise
        # The node's projection is flushed just before its store at Commit: a read in
        # that window differs honestly. Ask once more; a second difference stands.
        time.sleep(SERVED_RETRY_S)
        doc = self._request("GET", f"/v1/memories/{_q(memory_id)}", params={"prove": "true"})
        return self._verified(memory_id, _served(doc, memory_id), doc.get("proof"))

    def verified_record(self, kind: str, ident: str = "") -> tuple[Any, int]:
        """One canonical record checked against the chain: (value, height H).

        `kind` is memory, content, account (hex key), domain, scope, proposal, cocommit
        or validators. The value is the decoded JSON record (text for content), or None when
        the chain proves it absent.
        """
        doc = self._request("GET", f"/v1/proofs/{_q(kind)}", params={"id": ident})
        return self._record_value(kind, ident, doc)

    def verify_memory(self, memory: Memory) -> Memory:
        """Check a memory obtained from any read (e.g. a search hit) against the chain."""
        doc = self._request("GET", f"/v1/memories/{_q(memory.id)}", params={"prove": "true"})
        return self._verified(memory.id, _memory_doc(memory), doc.get("proof"))

    def memory_page(self, *, domain: str | None = None, status: str | None = None,
                    type: str | None = None, author: str | None = None,  # noqa: A002
                    tags: Sequence[str] = (), include_disputed: bool = False,
                    q: str | None = None, limit: int = 100,
                    cursor: str | None = None, mode: str | None = None) -> MemoryPage:
        params = _memory_params(domain=domain, status=status, type=type, author=author,
                                tags=tags, include_disputed=include_disputed, q=q,
                                limit=limit, cursor=cursor, mode=mode)
        return _page(self._request("GET", "/v1/memories", params=params))

    def list_memories(self, *, page_size: int = 100, max_items: int | None = None,
                      limit: int | None = None, **filters: Any) -> Iterator[Memory]:
        """Every matching memory, fetching cursor pages lazily; at most `max_items`, or
        `limit` (as `recall` and `memledger search --limit` take it)."""
        max_items = _most(max_items, limit)
        cursor: str | None = None
        seen = 0
        while True:
            page = self.memory_page(limit=page_size, cursor=cursor, **filters)
            for memory in page.items:
                if max_items is not None and seen >= max_items:
                    return
                seen += 1
                yield memory
            if page.next_cursor is None or (max_items is not None and seen >= max_items):
                return  # no page more than needed
            cursor = page.next_cursor

    def search(self, q: str, *, verify: bool = False, **filters: Any) -> Iterator[Memory]:
        """Full-text search (all words must match), newest blocks last.

        With `verify`, every returned memory is checked against the chain (raising on the
        first that fails); that the list is complete is NOT proven.
        """
        hits = self.list_memories(q=q, mode="words", **filters)
        return (self.verify_memory(m) for m in hits) if verify else hits

    def recall(self, q: str, *, mode: str | None = None, limit: int = 10,
               verify: bool = False, **filters: Any) -> list[Memory]:
        """The `limit` best memories for `q`, ranked: by meaning and words fused
        (`hybrid`, the node's default when it has an embedder), by meaning alone
        (`semantic`) or by words alone (`text`, all words must match). Each hit carries
        `score` and `mode`. Filters (domain, status, type, author, tags,
        include_disputed) apply before the top-k cut. With `verify`, each hit is checked
        against the chain; that the ranking is complete is NOT proven.

        Without `mode`, a node with no embedder ranks by words (`text`): left to its
        default, it would list every match unranked, oldest first."""
        try:
            page = self.memory_page(q=q, mode=mode or "hybrid", limit=limit, **filters)
        except MemLedgerError as err:
            if mode is not None or err.name != RECALL_UNAVAILABLE:
                raise
            page = self.memory_page(q=q, mode="text", limit=limit, **filters)
        hits = page.items
        return [self._rescored(self.verify_memory(m), m) for m in hits] if verify else hits

    @staticmethod
    def _rescored(verified: Memory, hit: Memory) -> Memory:
        return replace(verified, score=hit.score, mode=hit.mode)

    def votes(self, memory_id: str) -> list[Vote]:
        doc = self._request("GET", f"/v1/memories/{_q(memory_id)}/votes")
        return [_known(Vote, v) for v in doc["votes"]]

    def challenges(self, memory_id: str) -> list[dict[str, Any]]:
        return list(self._request("GET", f"/v1/memories/{_q(memory_id)}/challenges")["challenges"])

    def corroborations(self, memory_id: str) -> list[Corroboration]:
        doc = self._request("GET", f"/v1/memories/{_q(memory_id)}/corroborations")
        return [_known(Corroboration, c) for c in doc["corroborations"]]

    def get_cocommit(self, cocommit_id: str) -> dict[str, Any]:
        return dict(self._request("GET", f"/v1/cocommits/{_q(cocommit_id)}")["record"])

    def account(self, public_key: str | None = None) -> Account:
        key = public_key or self.public_key
        if key is None:
            raise MemLedgerError("no public key given and the client has no key", name="no_key")
        return _known(Account, self._request("GET", _account_path(key)))

    def validators(self) -> list[Validator]:
        return [_known(Validator, v)
                for v in self._request("GET", "/v1/validators")["validators"]]

    def proposals(self) -> list[dict[str, Any]]:
        """Every governance proposal, by id, following the cursor pages."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 500}
        while True:
            doc = self._request("GET", "/v1/proposals", params=params)
            items.extend(doc["items"])
            if doc.get("next_cursor") is None:
                return items
            params = {"limit": 500, "cursor": doc["next_cursor"]}

    def tx(self, tx_hash: str) -> TxReceipt:
        return TxReceipt.from_json(self._request("GET", _tx_path(tx_hash)))

    def wait_tx(self, tx_hash: str, timeout: float = 30.0, poll: float = 0.25) -> TxReceipt:
        """Poll until a block holds the tx; raises the last 404 problem on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.tx(tx_hash)
            except MemLedgerError as err:
                if err.status != 404 or time.monotonic() >= deadline:
                    raise
            time.sleep(poll)

    def wait_decided(self, memory_id: str, timeout: float = 30.0,
                     poll: float = 0.25) -> Memory:
        """Poll until validators decided the memory (any status but `proposed`) and return
        it, with `status_reason`; MemLedgerError `decision_timeout` if still proposed."""
        from memledger.sdk.waiting import wait_until

        def decided() -> Memory | None:
            memory = self.get_memory(memory_id)
            return memory if memory.status != "proposed" else None

        return wait_until(decided, timeout, poll, what=f"a decision on memory {memory_id!r}",
                          error=_decision_timeout)


# ----------------------------------------------------------------------------- async
class AsyncMemLedgerClient(_Core):
    """asyncio client with the same methods as `MemLedgerClient` (awaitable)."""

    def __init__(self, base_url: str = DEFAULT_URL, key: Agent | SigningKey | None = None,
                 chain_id: str | None = None, *, timeout: float = 60.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 nonces: NonceSource | None = None, retry: RetryPolicy | None = None,
                 trust: TrustRoot | None = None, trust_store: Path | None = None,
                 light_rpc: str | None = None) -> None:
        super().__init__(base_url, key, chain_id, nonces, retry, trust, trust_store, light_rpc)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout,
                                       transport=transport)
        self._chain_lock: asyncio.Lock | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemLedgerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, wait_backlog: bool = True,
                    resend: bool = False, **kwargs: Any) -> tuple[httpx.Response, int]:
        attempt, started = 0, time.monotonic()
        while True:
            try:
                resp = await self._http.request(method, path, **kwargs)
            except httpx.HTTPError as exc:
                lost = self._retry.resend_delay(exc, attempt) if resend else None
                if lost is None:
                    raise _connection_error(self.base_url, exc) from None
                await asyncio.sleep(lost)
                attempt += 1
                continue
            delay = self._retry.delay(resp, attempt, time.monotonic() - started, wait_backlog)
            if delay is None:
                return resp, attempt + 1
            await asyncio.sleep(delay)
            attempt += 1

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        resp, _ = await self._call(method, path, **kwargs)
        return self._raise_for(resp)

    async def _post_tx(self, path: str, tx: bytes, wait: str, wait_backlog: bool = True) -> Any:
        resp, sent = await self._call("POST", path, wait_backlog, resend=True,
                                      params={"wait": wait}, json=self._tx_json(tx))
        try:
            return self._raise_for(resp)
        except MemLedgerError as err:
            if sent > 1 and err.code in RESIGN_CODES:
                found = await self._landed(self._tx_hash(tx))
                if found is not None:
                    return found
            raise

    async def _landed(self, tx_hash: str) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = await self._request("GET", f"/v1/txs/{tx_hash}")
        except MemLedgerError:
            return None
        return doc if doc.get("status") in ("included", "committed") else None

    async def chain_id(self) -> str:
        if self._chain_lock is None:
            self._chain_lock = asyncio.Lock()
        async with self._chain_lock:
            if self._chain_id is None:
                self._chain_id = (await self.status()).chain_id
            return self._chain_id

    async def _send(self, path: str, make: MakeTx, wait: str,
                    memory_id: str | None = None) -> TxReceipt:
        key = self._require_key()
        builder = TxBuilder(key, await self.chain_id())
        refusals = _Resigning(self._retry)
        while True:
            tx = make(builder, self._nonces.next())
            try:
                doc = await self._post_tx(path, tx, wait, wait_backlog=False)
            except MemLedgerError as err:
                step = refusals.after(err)
                if step is None:
                    raise
                if step.resync:
                    self._nonces.at_least((await self.account()).last_nonce)
                if step.pause:
                    await asyncio.sleep(step.pause)
                continue
            return TxReceipt.from_json({**doc, "memory_id": doc.get("memory_id") or memory_id})

    async def broadcast(self, tx: bytes, wait: str = "commit") -> TxReceipt:
        """Send already-signed tx bytes."""
        return TxReceipt.from_json(await self._post_tx("/v1/txs", tx, wait))

    async def submit(self, memory_id: str | None, content: str, *, domain: str = "general",
                     type: str = "fact", confidence: float | int = 0.9,  # noqa: A002
                     tags: Sequence[str] = (), wait: str = "commit",
                     decide_timeout: float = 30.0) -> TxReceipt:
        """As `MemLedgerClient.submit` (also `wait="decided"`)."""
        mid, make, fields = self._submit_maker(memory_id, content, domain, type, confidence,
                                               tags)
        try:
            receipt = await self._send("/v1/memories", make,
                                       "commit" if wait == "decided" else wait, mid)
        except MemLedgerError as refused:
            if refused.code != Code.MEMORY_TERMINAL:
                raise
            return self._earlier_write(refused, await self._memory_or_none(mid), fields)
        if wait != "decided" or not receipt.included:
            return receipt
        try:
            status = (await self.wait_decided(mid, decide_timeout)).status
        except MemLedgerError as err:
            if err.name != "decision_timeout":
                raise
            status = "proposed"
        return dataclasses.replace(receipt, memory_status=status)

    async def vote(self, memory_id: str, decision: str = "accept", *, reason: str = "",
                   wait: str = "commit") -> TxReceipt:
        _one_of("decision", decision, DECISIONS)
        return await self._send("/v1/txs", lambda b, n: b.vote(n, memory_id, decision, reason),
                                wait, memory_id)

    async def challenge(self, memory_id: str, reason: str = "", *,
                        wait: str = "commit") -> TxReceipt:
        return await self._send("/v1/txs", lambda b, n: b.challenge(n, memory_id, reason), wait,
                                memory_id)

    async def corroborate(self, memory_id: str, *, wait: str = "commit") -> TxReceipt:
        return await self._send("/v1/txs", lambda b, n: b.corroborate(n, memory_id), wait,
                                memory_id)

    async def reinstate(self, memory_id: str, *, wait: str = "commit") -> TxReceipt:
        return await self._send("/v1/txs", lambda b, n: b.reinstate(n, memory_id), wait,
                                memory_id)

    async def grant(self, domain: str, grantee: bytes | str, level: str = "write", *,
                    expires_height: int = 0, wait: str = "commit") -> TxReceipt:
        pk = _grantee_bytes(grantee)
        _one_of("level", level, LEVELS)
        return await self._send(
            "/v1/txs", lambda b, n: b.grant(n, domain, pk, level, expires_height), wait)

    async def revoke(self, domain: str, grantee: bytes | str, *,
                     wait: str = "commit") -> TxReceipt:
        pk = _grantee_bytes(grantee)
        return await self._send("/v1/txs", lambda b, n: b.revoke(n, domain, pk), wait)

    async def cocommit(self, core: bytes, signatures: Sequence[tuple[bytes, bytes]], *,
                       wait: str = "commit") -> TxReceipt:
        ordered = sorted(signatures)
        return await self._send("/v1/txs", lambda b, n: b.cocommit(n, core, ordered), wait)

    async def status(self) -> Status:
        return Status.from_json(await self._request("GET", "/v1/status"))

    async def ready(self) -> dict[str, Any]:
        doc: dict[str, Any] = await self._request("GET", "/ready")
        return doc

    async def get_memory(self, memory_id: str) -> Memory:
        return Memory.from_json(_the_memory(
            await self._request("GET", f"/v1/memories/{_q(memory_id)}"), memory_id))

    async def _memory_or_none(self, memory_id: str) -> Memory | None:
        try:
            return await self.get_memory(memory_id)
        except MemLedgerError:
            return None

    async def get(self, memory_id: str, *, verify: bool = False) -> Memory:
        """As `MemLedgerClient.get`; verification runs in a worker thread."""
        if not verify:
            return await self.get_memory(memory_id)
        try:
            doc = await self._request("GET", f"/v1/memories/{_q(memory_id)}",
                                      params={"prove": "true"})
        except MemLedgerError as exc:
            if exc.status != 404:
                raise
            proof = await self._request("GET", "/v1/proofs/memory", params={"id": memory_id})
            height = await asyncio.to_thread(self._absent, memory_id, proof)
            raise ProvenAbsent(exc, height) from None
        try:
            return await asyncio.to_thread(self._verified, memory_id, _served(doc, memory_id),
                                           doc.get("proof"))
        except ProofError as exc:
            if exc.reason != "served_differs":
                raise
        await asyncio.sleep(SERVED_RETRY_S)  # see MemLedgerClient.get
        doc = await self._request("GET", f"/v1/memories/{_q(memory_id)}",
                                  params={"prove": "true"})
        return await asyncio.to_thread(self._verified, memory_id, _served(doc, memory_id),
                                       doc.get("proof"))

    async def verified_record(self, kind: str, ident: str = "") -> tuple[Any, int]:
        doc = await self._request("GET", f"/v1/proofs/{_q(kind)}", params={"id": ident})
        return await asyncio.to_thread(self._record_value, kind, ident, doc)

    async def verify_memory(self, memory: Memory) -> Memory:
        doc = await self._request("GET", f"/v1/memories/{_q(memory.id)}",
                                  params={"prove": "true"})
        return await asyncio.to_thread(self._verified, memory.id, _memory_doc(memory),
                                       doc.get("proof"))

    async def memory_page(self, *, domain: str | None = None, status: str | None = None,
                          type: str | None = None, author: str | None = None,  # noqa: A002
                          tags: Sequence[str] = (), include_disputed: bool = False,
                          q: str | None = None, limit: int = 100,
                          cursor: str | None = None, mode: str | None = None) -> MemoryPage:
        params = _memory_params(domain=domain, status=status, type=type, author=author,
                                tags=tags, include_disputed=include_disputed, q=q,
                                limit=limit, cursor=cursor, mode=mode)
        return _page(await self._request("GET", "/v1/memories", params=params))

    async def list_memories(self, *, page_size: int = 100, max_items: int | None = None,
                            limit: int | None = None, **filters: Any) -> AsyncIterator[Memory]:
        max_items = _most(max_items, limit)
        cursor: str | None = None
        seen = 0
        while True:
            page = await self.memory_page(limit=page_size, cursor=cursor, **filters)
            for memory in page.items:
                if max_items is not None and seen >= max_items:
                    return
                seen += 1
                yield memory
            if page.next_cursor is None or (max_items is not None and seen >= max_items):
                return  # no page more than needed
            cursor = page.next_cursor

    def search(self, q: str, *, verify: bool = False, **filters: Any) -> AsyncIterator[Memory]:
        hits = self.list_memories(q=q, mode="words", **filters)
        return self._verify_each(hits) if verify else hits

    async def recall(self, q: str, *, mode: str | None = None, limit: int = 10,
                     verify: bool = False, **filters: Any) -> list[Memory]:
        """As MemLedgerClient.recall."""
        try:
            page = await self.memory_page(q=q, mode=mode or "hybrid", limit=limit, **filters)
        except MemLedgerError as err:
            if mode is not None or err.name != RECALL_UNAVAILABLE:
                raise
            page = await self.memory_page(q=q, mode="text", limit=limit, **filters)
        if not verify:
            return page.items
        return [replace(await self.verify_memory(m), score=m.score, mode=m.mode)
                for m in page.items]

    async def _verify_each(self, hits: AsyncIterator[Memory]) -> AsyncIterator[Memory]:
        async for memory in hits:
            yield await self.verify_memory(memory)

    async def votes(self, memory_id: str) -> list[Vote]:
        doc = await self._request("GET", f"/v1/memories/{_q(memory_id)}/votes")
        return [_known(Vote, v) for v in doc["votes"]]

    async def challenges(self, memory_id: str) -> list[dict[str, Any]]:
        doc = await self._request("GET", f"/v1/memories/{_q(memory_id)}/challenges")
        return list(doc["challenges"])

    async def corroborations(self, memory_id: str) -> list[Corroboration]:
        doc = await self._request("GET", f"/v1/memories/{_q(memory_id)}/corroborations")
        return [_known(Corroboration, c) for c in doc["corroborations"]]

    async def get_cocommit(self, cocommit_id: str) -> dict[str, Any]:
        return dict((await self._request("GET", f"/v1/cocommits/{_q(cocommit_id)}"))["record"])

    async def account(self, public_key: str | None = None) -> Account:
        key = public_key or self.public_key
        if key is None:
            raise MemLedgerError("no public key given and the client has no key", name="no_key")
        return _known(Account, await self._request("GET", _account_path(key)))

    async def validators(self) -> list[Validator]:
        doc = await self._request("GET", "/v1/validators")
        return [_known(Validator, v) for v in doc["validators"]]

    async def proposals(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 500}
        while True:
            doc = await self._request("GET", "/v1/proposals", params=params)
            items.extend(doc["items"])
            if doc.get("next_cursor") is None:
                return items
            params = {"limit": 500, "cursor": doc["next_cursor"]}

    async def tx(self, tx_hash: str) -> TxReceipt:
        return TxReceipt.from_json(await self._request("GET", _tx_path(tx_hash)))

    async def wait_tx(self, tx_hash: str, timeout: float = 30.0, poll: float = 0.25) -> TxReceipt:
        """Poll until a block holds the tx; raises the last 404 problem on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return await self.tx(tx_hash)
            except MemLedgerError as err:
                if err.status != 404 or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(poll)

    async def wait_decided(self, memory_id: str, timeout: float = 30.0,
                           poll: float = 0.25) -> Memory:
        """As `MemLedgerClient.wait_decided`."""
        deadline = time.monotonic() + timeout
        while True:
            memory = await self.get_memory(memory_id)
            if memory.status != "proposed":
                return memory
            if time.monotonic() >= deadline:
                raise _decision_timeout(f"timed out after {timeout:g}s waiting for a decision "
                                        f"on memory {memory_id!r}")
            await asyncio.sleep(poll)
