"""MemorySubmit and MemoryVote: proposal and the weighted / scope-pinned quorum."""

from __future__ import annotations

import hashlib
from typing import Any

from memledger.consensus.block.context import TxContext
from memledger.consensus.codes import Code, TxError
from memledger.consensus.families.access.domains import authorize_write, check_name
from memledger.consensus.families.governance import validators
from memledger.consensus.families.memory import ballots, quorum
from memledger.consensus.limits import CONFIDENCE_SCALE, MAX_CONTENT_BYTES, MAX_TAG_BYTES, MAX_TAGS
from memledger.consensus.store import records
from memledger.consensus.wire._pb import tx_pb2

MEMORY_TYPES = ("fact", "observation", "inference", "task")
_DECISIONS = {
    tx_pb2.DECISION_ACCEPT: quorum.ACCEPT,
    tx_pb2.DECISION_REJECT: quorum.REJECT,
    tx_pb2.DECISION_ABSTAIN: quorum.ABSTAIN,
}
TERMINAL_OR_DISPUTED = (
    records.STATUS_COMMITTED,
    records.STATUS_DEPRECATED,
    records.STATUS_CHALLENGED,
)


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
) -> dict[str, Any]:
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


def set_status(record: dict[str, Any], status: str, height: int) -> None:
    """Move a memory along the lifecycle table; anything else is a bug, not a tx error."""
    if (record["status"], status) not in records.TRANSITIONS:
        raise AssertionError(f"illegal transition {record['status']} -> {status}")
    record["status"] = status
    record["history"].append([height, status])
    if status in (records.STATUS_COMMITTED, records.STATUS_DEPRECATED):
        record["decided_height"] = height


def submit(ctx: TxContext, msg: tx_pb2.MemorySubmit) -> None:
    """Propose a memory: validate everything, then write record, content and owner."""
    check_name(msg.memory_id, Code.INVALID_MEMORY_ID, "memory id")
    data, tags = validate_fields(
        msg.domain, msg.memory_type, msg.content, msg.content_hash, msg.confidence_ppm,
        list(msg.tags),
    )
    key = records.memory_key(msg.memory_id)
    existing = ctx.state.get_record(key)
    if existing is not None:
        if existing["status"] in TERMINAL_OR_DISPUTED:
            raise TxError(Code.MEMORY_TERMINAL, f"memory {msg.memory_id!r} is {existing['status']}")
        same = (
            existing["author"] == ctx.signer_hex
            and existing["domain"] == msg.domain
            and existing["type"] == msg.memory_type
            and existing["content_hash"] == msg.content_hash.hex()
            and existing["confidence_ppm"] == msg.confidence_ppm
            and existing["tags"] == tags
        )
        if not same:
            raise TxError(Code.MEMORY_ID_CONFLICT, f"memory {msg.memory_id!r} exists")
        ctx.emit("memory", id=msg.memory_id, status=existing["status"], duplicate="true")
        return
    scope = authorize_write(ctx.state, msg.domain, ctx.signer, ctx.block.height)
    record = new_record(
        ctx, msg.memory_id, msg.domain, msg.memory_type, msg.content_hash,
        msg.confidence_ppm, tags, records.STATUS_PROPOSED,
    )
    if scope is not None:
        members = [[m, int(w)] for m, w in scope["members"]]
        record["ballot"] = {
            "scope": scope["id"],
            "revision": scope["revision"],
            "members": members,
            "total": sum(w for _, w in members),
        }
        ballots.open_ballot(ctx.state, record["ballot"])
    ctx.state.put_record(key, record)
    ctx.state.put(records.content_key(msg.memory_id), data)
    ctx.emit("memory", id=msg.memory_id, status=records.STATUS_PROPOSED, domain=msg.domain)


def electorate(ctx: TxContext, record: dict[str, Any]) -> list[tuple[str, int]]:
    """Who decides this memory: its pinned ballot, else the current validator set."""
    if record["ballot"] is not None:
        return [(m, int(w)) for m, w in record["ballot"]["members"]]
    return validators.load(ctx.state)


def vote(ctx: TxContext, msg: tx_pb2.MemoryVote) -> None:
    """One vote per member per memory, only while proposed; decide on strict 2/3."""
    key = records.memory_key(msg.memory_id)
    record = ctx.state.get_record(key)
    if record is None:
        raise TxError(Code.MEMORY_NOT_FOUND, f"memory {msg.memory_id[:128]!r} not found")
    decision = _DECISIONS.get(msg.decision)
    if decision is None:
        raise TxError(Code.INVALID_DECISION)
    voters = electorate(ctx, record)
    if ctx.signer_hex not in {member for member, _ in voters}:
        if record["ballot"] is not None:
            raise TxError(Code.NOT_A_SCOPE_MEMBER)
        raise TxError(Code.NOT_A_VALIDATOR)
    if ctx.signer_hex in record["votes"]:
        raise TxError(Code.ALREADY_VOTED)
    if record["status"] != records.STATUS_PROPOSED:
        raise TxError(Code.MEMORY_NOT_PROPOSED, f"memory is {record['status']}")
    record["votes"][ctx.signer_hex] = [decision, ctx.block.height]
    result = quorum.tally({m: v[0] for m, v in record["votes"].items()}, voters)
    outcome = quorum.decide(result)
    if outcome is not None:
        set_status(record, outcome, ctx.block.height)
        if record["ballot"] is not None:
            ballots.close_ballot(ctx.state, record["ballot"])
    ctx.state.put_record(key, record)
    ctx.emit("vote", id=msg.memory_id, voter=ctx.signer_hex, decision=decision)
    ctx.emit("memory", id=msg.memory_id, status=record["status"])
