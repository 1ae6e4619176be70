"""What the node answers, as frozen dataclasses (receipts, memories, votes, status)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memledger.protocol.sealed import is_sealed
from memledger.sdk.errors import MemLedgerError

__all__ = ["Account", "Corroboration", "Memory", "MemoryPage", "Status", "TxReceipt",
           "Validator", "Vote", "known", "page_of"]

_T = TypeVar("_T")


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
    #: v10+: the memory this one corrects, the correction that replaced it, a correction
    #: awaiting its validators, and where an imported memory came from
    #: ({chain_id, height, memory_id, author})
    supersedes: str | None = None
    superseded_by: str | None = None
    pending_correction: str | None = None
    origin: dict[str, Any] | None = None
    #: v10+: the epoch of a private memory; `content` is then the plaintext when this
    #: client's key could open it, else the sealed envelope (`sealed`)
    epoch: int | None = None
    #: One memory's read (`get`) only: its chain of corrections, oldest first.
    corrections: list[str] | None = None
    #: Why it has its status (vote tally, dispute round, expiry, this node's voter's
    #: reason); derived by the node when read, so absent (None) on a verified read.
    status_reason: str | None = None
    #: Set only on a verified read: the height H whose app hash (header H+1) proved it.
    verified_height: int | None = None
    #: Set on ranked search hits (recall): the hit's score and the mode that ranked it.
    score: float | None = None
    mode: str | None = None

    @property
    def sealed(self) -> bool:
        """A private memory this client could not open: `content` is the envelope."""
        return bool(self.epoch) and self.content is not None and is_sealed(self.content)

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


def known(cls: type[_T], doc: Any) -> _T:
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


def page_of(doc: dict[str, Any]) -> MemoryPage:
    return MemoryPage([Memory.from_json(m) for m in doc["items"]], doc.get("next_cursor"))
