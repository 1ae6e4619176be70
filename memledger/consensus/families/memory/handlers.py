"""MemorySubmit and MemoryVote: proposal and the weighted / scope-pinned quorum."""

from __future__ import annotations

from typing import Any

from memledger.consensus import versions
from memledger.consensus.families.access import private
from memledger.consensus.families.access.domains import authorize_write, check_name
from memledger.consensus.families.context import TxContext
from memledger.consensus.families.disputes import handlers as disputes
from memledger.consensus.families.disputes import peer
from memledger.consensus.families.governance import validators
from memledger.consensus.families.memory import ballots, corrections, expiry, quorum
from memledger.consensus.families.memory.record import (
    COCOMMIT_ID_PREFIX,
    DECISIONS,
    TERMINAL_OR_DISPUTED,
    Ballot,
    MemoryRecord,
    Origin,
    new_record,
    set_status,
    validate_fields,
    validate_origin,
)
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError
from memledger.protocol.limits import MAX_REASON_BYTES
from memledger.protocol.pb import tx_pb2


def submit(ctx: TxContext, msg: tx_pb2.MemorySubmit) -> None:
    """Propose a memory: validate everything, then write record, content and owner."""
    check_name(msg.memory_id, Code.INVALID_MEMORY_ID, "memory id")
    if (versions.active("cocommit_ids_reserved", ctx.block.app_version)
            and msg.memory_id.startswith(COCOMMIT_ID_PREFIX)):
        raise TxError(Code.INVALID_MEMORY_ID, f"memory ids starting {COCOMMIT_ID_PREFIX!r} "
                                              "are co-commits' (MemoryCoCommit)")
    data, tags = validate_fields(
        msg.domain, msg.memory_type, msg.content, msg.content_hash, msg.confidence_ppm,
        list(msg.tags),
    )
    # v10+ fields (the gate refuses them below v10: versions.FIELDS)
    origin: Origin | None = validate_origin(msg.origin) if msg.HasField("origin") else None
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
            and existing.get("supersedes") == (msg.supersedes or None)
            and existing.get("origin") == origin
        )
        if not same:
            raise TxError(Code.MEMORY_ID_CONFLICT, f"memory {msg.memory_id!r} exists")
        ctx.emit("memory", id=msg.memory_id, status=existing["status"], duplicate="true")
        return
    target = None
    if msg.supersedes:
        target = corrections.check_target(ctx.state, msg.supersedes, msg.domain, ctx.signer,
                                          ctx.block.height)
    scope = authorize_write(ctx.state, msg.domain, ctx.signer, ctx.block.height,
                            ctx.block.app_version)
    epoch = 0
    if versions.active("private_domains", ctx.block.app_version):
        epoch = private.check_submit(ctx.state, msg.domain, msg, tags)
    record = new_record(
        ctx, msg.memory_id, msg.domain, msg.memory_type, msg.content_hash,
        msg.confidence_ppm, tags, records.STATUS_PROPOSED,
    )
    if origin is not None:
        record["origin"] = origin
    if epoch:  # only private memories carry it: other records hash as before
        record["epoch"] = epoch
    if target is not None:
        record["supersedes"] = target["id"]
        target["pending_correction"] = msg.memory_id
        ctx.state.put_record(records.memory_key(target["id"]), target)
    if scope is not None:
        members = [[m, int(w)] for m, w in scope["members"]]
        ballot: Ballot = {
            "scope": scope["id"],
            "revision": scope["revision"],
            "members": members,
            "total": sum(w for _, w in members),
        }
        record["ballot"] = ballot
        ballots.open_ballot(ctx.state, ballot)
    if versions.active("ballot_expiry", ctx.block.app_version):
        expiry.start_clock(ctx.state, record, ctx.block.height)
    ctx.state.put_record(key, record)
    ctx.state.put(records.content_key(msg.memory_id), data)
    if target is not None:
        ctx.emit("memory", id=msg.memory_id, status=records.STATUS_PROPOSED,
                 domain=msg.domain, supersedes=target["id"])
        return
    ctx.emit("memory", id=msg.memory_id, status=records.STATUS_PROPOSED, domain=msg.domain)


def electorate(ctx: TxContext, record: MemoryRecord) -> list[tuple[str, int]]:
    """Who decides this memory: its pinned ballot, else the current validator set."""
    if record["ballot"] is not None:
        return [(m, int(w)) for m, w in record["ballot"]["members"]]
    return validators.load(ctx.state)


def vote(ctx: TxContext, msg: tx_pb2.MemoryVote) -> None:
    """One vote per member per memory, only while proposed; decide on strict 2/3.

    v5+: the vote may carry its reason, kept with it in the record. (Under earlier
    versions the envelope gate refuses a vote that sets one: versions.FIELDS.)"""
    if len(msg.reason.encode()) > MAX_REASON_BYTES:
        raise TxError(Code.VOTE_REASON_TOO_LONG,
                      f"reason is {len(msg.reason.encode())} bytes, limit {MAX_REASON_BYTES}")
    key = records.memory_key(msg.memory_id)
    record = ctx.state.get_record(key)
    if record is None:
        raise TxError(Code.MEMORY_NOT_FOUND, f"memory {msg.memory_id[:128]!r} not found")
    decision = DECISIONS.get(msg.decision)
    if decision is None:
        raise TxError(Code.INVALID_DECISION)
    if (versions.active("peer_disputes", ctx.block.app_version)
            and record["status"] == records.STATUS_CHALLENGED):
        rounds = ctx.state.get_record(records.challenge_key(msg.memory_id))
        if rounds is not None and peer.is_open_peer_round(rounds["rounds"][-1]):
            peer.vote(ctx, record, rounds["rounds"][-1], decision, msg.reason)
            ctx.state.put_record(records.challenge_key(msg.memory_id), rounds)
            ctx.state.put_record(key, record)
            ctx.emit("vote", id=msg.memory_id, voter=ctx.signer_hex, decision=decision,
                     dispute=peer.PEER)
            ctx.emit("memory", id=msg.memory_id, status=record["status"])
            return
    voters = electorate(ctx, record)
    if ctx.signer_hex not in {member for member, _ in voters}:
        if record["ballot"] is not None:
            raise TxError(Code.NOT_A_SCOPE_MEMBER)
        raise TxError(Code.NOT_A_VALIDATOR)
    if ctx.signer_hex in record["votes"]:
        raise TxError(Code.ALREADY_VOTED)
    if record["status"] != records.STATUS_PROPOSED:
        raise TxError(Code.MEMORY_NOT_PROPOSED, f"memory is {record['status']}")
    entry: list[Any] = [decision, ctx.block.height]
    if msg.reason:  # a vote without one keeps the pre-v5 shape: old records hash the same
        entry.append(msg.reason)
    record["votes"][ctx.signer_hex] = entry
    result = quorum.tally({m: v[0] for m, v in record["votes"].items()}, voters)
    outcome = quorum.decide(result)
    settled: list[tuple[str, list[tuple[str, str]]]] = []
    if outcome is not None:
        set_status(record, outcome, ctx.block.height)
        if record["ballot"] is not None:
            ballots.close_ballot(ctx.state, record["ballot"])
        expiry.stop_clock(ctx.state, record)
        corrections.settle(ctx.state, record, ctx.block.height,
                           disputes.close_for_correction, settled)
    ctx.state.put_record(key, record)
    ctx.emit("vote", id=msg.memory_id, voter=ctx.signer_hex, decision=decision)
    ctx.emit("memory", id=msg.memory_id, status=record["status"])
    ctx.events.extend(settled)
