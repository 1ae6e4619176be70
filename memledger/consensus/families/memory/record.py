"""The memory record: its fields, how one is made, and how its status may move (DESIGN §4)."""

from __future__ import annotations

import hashlib
import re
from typing import Any, NotRequired, TypedDict

from memledger.consensus.families.access.domains import check_name
from memledger.consensus.families.context import TxBuffer, TxContext
from memledger.consensus.families.memory import quorum
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError
from memledger.protocol.limits import CONFIDENCE_SCALE, MAX_CONTENT_BYTES, MAX_TAG_BYTES, MAX_TAGS
from memledger.protocol.pb import tx_pb2

MEMORY_TYPES = ("fact", "observation", "inference", "task")
#: the ids co-commits derive (`cocommit.handlers.shared_id`); from v7 no plain submit
#: may take one
COCOMMIT_ID_PREFIX = "cc-"
class Ballot(TypedDict):
    """A pinned electorate, frozen at submit: later roster changes never move it."""

    scope: str
    revision: int
    members: list[list[Any]]  # JSON pairs [hex key, weight], sorted by key
    total: int


class MemoryRecord(TypedDict):
    """`mem/<id>` (canonical JSON; content lives under `memc/<id>`)."""

    id: str
    domain: str
    author: str
    type: str
    content_hash: str
    confidence_ppm: int
    tags: list[str]
    status: str
    submitted_height: int
    submitted_time_ns: int
    decided_height: int | None
    # voter hex -> [decision, height], or (v5+, when the vote gave one) [decision, height,
    # reason]
    votes: dict[str, list[Any]]
    ballot: Ballot | None
    history: list[list[Any]]  # JSON pairs [height, status], oldest first
    cocommit: str | None
    tx: str
    corroborators: NotRequired[list[str]]
    coauthors: NotRequired[list[str]]  # co-commits: the sorted coauthor keys
    expiry_from: NotRequired[int]  # v4+: the height the ballot's expiry clock started
    expired_height: NotRequired[int]  # v4+: set when the ballot expired
    supersedes: NotRequired[str]  # v10+: the memory this one corrects
    superseded_by: NotRequired[str]  # v10+: the committed correction that replaced it
    pending_correction: NotRequired[str]  # v10+: a correction of it awaiting its ballot
    origin: NotRequired[Origin]  # v10+: provenance of an imported memory
    epoch: NotRequired[int]  # v10+: a private memory's epoch (its content is sealed)


class Origin(TypedDict):
    """Where an imported memory came from (MemorySubmit.origin): kept, not verified."""

    chain_id: str
    height: int
    memory_id: str
    author: str


def load(state: TxBuffer, memory_id: str) -> MemoryRecord | None:
    record: MemoryRecord | None = state.get_record(records.memory_key(memory_id))
    return record


#: the wire decision -> the tally's name for it (memory and governance votes alike)
DECISIONS = {
    tx_pb2.DECISION_ACCEPT: quorum.ACCEPT,
    tx_pb2.DECISION_REJECT: quorum.REJECT,
    tx_pb2.DECISION_ABSTAIN: quorum.ABSTAIN,
}
TERMINAL_OR_DISPUTED = (
    records.STATUS_COMMITTED,
    records.STATUS_DEPRECATED,
    records.STATUS_CHALLENGED,
    records.STATUS_SUPERSEDED,  # v10+ only: no earlier record has it
)
_HEX_KEY = re.compile(r"[0-9a-f]{64}")


def validate_origin(origin: tx_pb2.Origin) -> Origin:
    """Shape only (v10+): the other chain is not consulted; the importer vouches for it."""
    check_name(origin.chain_id, Code.INVALID_ORIGIN, "origin chain id")
    check_name(origin.memory_id, Code.INVALID_ORIGIN, "origin memory id")
    if _HEX_KEY.fullmatch(origin.author) is None:
        raise TxError(Code.INVALID_ORIGIN, "origin author must be 64 lowercase hex digits")
    if origin.height < 1:
        raise TxError(Code.INVALID_ORIGIN, f"origin height {origin.height} is not positive")
    return {"chain_id": origin.chain_id, "height": origin.height,
            "memory_id": origin.memory_id, "author": origin.author}


def validate_fields(
    domain: str,
    memory_type: str,
    content: str,
    content_hash: bytes,
    confidence_ppm: int,
    tags: list[str],
) -> tuple[bytes, list[str]]:
    """Stateless checks shared by submit and co-commit; returns (content bytes, tags)."""
    check_name(domain, Code.INVALID_DOMAIN, "domain")
    if memory_type not in MEMORY_TYPES:
        raise TxError(Code.INVALID_MEMORY_TYPE, f"memory type {memory_type[:40]!r} unknown")
    data = content.encode()
    if not data:
        raise TxError(Code.EMPTY_CONTENT)
    if b"\x00" in data:
        # Text, not bytes: PostgreSQL TEXT cannot hold NUL, and no agent means one.
        raise TxError(Code.INVALID_CONTENT)
    if len(data) > MAX_CONTENT_BYTES:
        raise TxError(Code.CONTENT_TOO_LARGE, f"content is {len(data)} bytes")
    if hashlib.sha256(data).digest() != content_hash:
        raise TxError(Code.CONTENT_HASH_MISMATCH)
    if confidence_ppm > CONFIDENCE_SCALE:
        raise TxError(Code.INVALID_CONFIDENCE)
    if len(tags) > MAX_TAGS:
        raise TxError(Code.TOO_MANY_TAGS, f"{len(tags)} tags, limit {MAX_TAGS}")
    for tag in tags:
        if not tag or len(tag.encode()) > MAX_TAG_BYTES or "\x00" in tag:
            raise TxError(Code.INVALID_TAG, f"tag {tag[:40]!r} empty or too long")
    if len(set(tags)) != len(tags):
        raise TxError(Code.INVALID_TAG, "duplicate tags")
    return data, sorted(tags)


def new_record(
    ctx: TxContext,
    memory_id: str,
    domain: str,
    memory_type: str,
    content_hash: bytes,
    confidence_ppm: int,
    tags: list[str],
    status: str,
) -> MemoryRecord:
    """A fresh memory record (content is stored separately under memc/<id>)."""
    return {
        "id": memory_id,
        "domain": domain,
        "author": ctx.signer_hex,
        "type": memory_type,
        "content_hash": content_hash.hex(),
        "confidence_ppm": confidence_ppm,
        "tags": tags,
        "status": status,
        "submitted_height": ctx.block.height,
        "submitted_time_ns": ctx.block.time_ns,
        "decided_height": ctx.block.height if status != records.STATUS_PROPOSED else None,
        "votes": {},
        "ballot": None,
        "history": [[ctx.block.height, status]],
        "cocommit": None,
        "tx": ctx.tx_hash.hex(),
    }


def set_status(record: MemoryRecord, status: str, height: int) -> None:
    """Move a memory along the lifecycle table; anything else is a bug, not a tx error."""
    if (record["status"], status) not in records.TRANSITIONS:
        raise AssertionError(f"illegal transition {record['status']} -> {status}")
    record["status"] = status
    record["history"].append([height, status])
    if status in (records.STATUS_COMMITTED, records.STATUS_DEPRECATED):
        record["decided_height"] = height


