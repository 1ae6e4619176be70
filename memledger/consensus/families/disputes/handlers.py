"""Challenge, corroborate, reinstate: disputes over committed memories (DESIGN §4).

A challenge on a committed memory opens a round with a frozen electorate: the domain's
modify-grant holders and the memory's corroborators, minus the opener. With k eligible
corroborators in that electorate, k+1 distinct challengers deprecate the memory (k = 0
deprecates at once). Any electorate member may reinstate it while it is challenged.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from memledger.consensus import versions
from memledger.consensus.families.access.domains import (
    LEVELS,
    can_modify,
    is_shared,
    may_write,
    write_right_hint,
)
from memledger.consensus.families.context import TxBuffer, TxContext
from memledger.consensus.families.disputes import peer
from memledger.consensus.families.memory.record import MemoryRecord, load, set_status
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError
from memledger.protocol.limits import MAX_REASON_BYTES
from memledger.protocol.pb import tx_pb2


class Round(TypedDict):
    """One dispute round: its frozen electorate, its k, who challenged and why. A peer
    round (v10+, `kind` "peer": families/disputes/peer.py) has no k: its `ballot` of
    weighted voters decides it with `votes`."""

    opened_height: int
    opener: str
    electorate: list[str]  # sorted hex keys who may reinstate (peer: who may vote)
    k: NotRequired[int]  # eligible corroborators: k + 1 distinct challengers deprecate
    challengers: list[str]  # sorted
    reasons: dict[str, str]
    # None while open, then "deprecated" or "reinstated"; v10+ also "superseded", and for
    # peer rounds "kept" or "expired"
    outcome: str | None
    reinstated_by: NotRequired[str]
    kind: NotRequired[str]  # v10+: "peer"
    ballot: NotRequired[list[list[Any]]]  # peer: [hex, weight] pairs frozen at the opening
    votes: NotRequired[dict[str, list[Any]]]  # peer: voter -> [decision, height(, reason)]
    closed_height: NotRequired[int]  # v10+: when the round ended


class Disputes(TypedDict):
    """`chal/<id>`: every dispute round of one memory, oldest first."""

    rounds: list[Round]


def _disputes(ctx: TxContext, memory_id: str) -> Disputes:
    """The rounds of a memory that is (or was) challenged; its status says they exist."""
    found: Disputes | None = ctx.state.get_record(records.challenge_key(memory_id))
    if found is None:
        raise AssertionError(f"challenged memory {memory_id!r} has no dispute record")
    return found


def _memory(ctx: TxContext, memory_id: str) -> MemoryRecord:
    record = load(ctx.state, memory_id)
    if record is None:
        raise TxError(Code.MEMORY_NOT_FOUND, f"memory {memory_id[:128]!r} not found")
    return record


def may_challenge(state: TxBuffer, record: MemoryRecord, agent: bytes, height: int) -> bool:
    """Owner or modify-grant holder; in ownerless (shared, scoped) domains, the author."""
    domain = record["domain"]
    if can_modify(state, domain, agent, height):
        return True
    domain_record = state.get_record(records.domain_key(domain)) or {}
    ownerless = is_shared(state, domain) or domain_record.get("owner") is None
    return ownerless and record["author"] == agent.hex()


def _modify_holders(ctx: TxContext, record: MemoryRecord) -> list[str]:
    """Unexpired modify holders of the memory's domain, from the domain's grant index."""
    domain = ctx.state.get_record(records.domain_key(record["domain"])) or {}
    holders = []
    for grantee in sorted(domain.get("grantees", [])):
        grant = ctx.state.get_record(records.grant_key(record["domain"], bytes.fromhex(grantee)))
        if grant is None or LEVELS[grant["level"]] < LEVELS["modify"]:
            continue
        if grant["expires"] and ctx.block.height >= grant["expires"]:
            continue
        holders.append(grantee)
    return holders


def challenge(ctx: TxContext, msg: tx_pb2.MemoryChallenge) -> None:
    if len(msg.reason.encode()) > MAX_REASON_BYTES:
        raise TxError(Code.REASON_TOO_LONG)
    record = _memory(ctx, msg.memory_id)
    if versions.active("peer_disputes", ctx.block.app_version):
        if _peer_challenge(ctx, msg, record):
            return
    elif not may_challenge(ctx.state, record, ctx.signer, ctx.block.height):
        raise TxError(Code.CHALLENGE_DENIED)
    key = records.challenge_key(msg.memory_id)
    me = ctx.signer_hex
    height = ctx.block.height
    if record["status"] == records.STATUS_COMMITTED:
        corroborators = sorted(record.get("corroborators", []))
        electorate = sorted((set(_modify_holders(ctx, record)) | set(corroborators)) - {me})
        k = len([c for c in corroborators if c != me])
        stored: Disputes | None = ctx.state.get_record(key)
        rounds: Disputes = stored if stored is not None else {"rounds": []}
        round_: Round = {
            "opened_height": height, "opener": me, "electorate": electorate, "k": k,
            "challengers": [me], "reasons": {me: msg.reason}, "outcome": None,
        }
        rounds["rounds"].append(round_)
        set_status(record, records.STATUS_CHALLENGED, height)
        if k == 0:
            set_status(record, records.STATUS_DEPRECATED, height)
            round_["outcome"] = "deprecated"
    elif record["status"] == records.STATUS_CHALLENGED:
        rounds = _disputes(ctx, msg.memory_id)
        round_ = rounds["rounds"][-1]
        if me in round_["challengers"]:
            raise TxError(Code.ALREADY_CHALLENGED)
        round_["challengers"] = sorted([*round_["challengers"], me])
        round_["reasons"][me] = msg.reason
        if len(round_["challengers"]) >= round_["k"] + 1:
            set_status(record, records.STATUS_DEPRECATED, height)
            round_["outcome"] = "deprecated"
    else:
        raise TxError(Code.MEMORY_NOT_COMMITTED, f"memory is {record['status']}")
    ctx.state.put_record(key, rounds)
    ctx.state.put_record(records.memory_key(msg.memory_id), record)
    ctx.emit("challenge", id=msg.memory_id, challenger=me)
    ctx.emit("memory", id=msg.memory_id, status=record["status"])


def _peer_challenge(ctx: TxContext, msg: tx_pb2.MemoryChallenge,
                    record: MemoryRecord) -> bool:
    """v10+: handle the challenge as a peer dispute when it is one (True: done). It is one
    when the memory is in an open peer round (anyone joining it), or when the signer lacks
    the challenge right but may write the domain. Neither: CHALLENGE_DENIED, naming the
    right it needs and how to get it."""
    rounds: Disputes | None = ctx.state.get_record(records.challenge_key(msg.memory_id))
    last = rounds["rounds"][-1] if rounds else None
    joining = (record["status"] == records.STATUS_CHALLENGED and last is not None
               and peer.is_open_peer_round(last))
    if not joining and may_challenge(ctx.state, record, ctx.signer, ctx.block.height):
        return False
    domain = record["domain"]
    if not may_write(ctx.state, domain, ctx.signer, ctx.block.height):
        raise TxError(Code.CHALLENGE_DENIED,
                      f"{Code.CHALLENGE_DENIED.description}, or (from v10, as a peer dispute "
                      f"its electorate decides) any key with write access to domain "
                      f"{domain!r}; " + write_right_hint(ctx.state, domain))
    me = ctx.signer_hex
    if joining:
        assert rounds is not None and last is not None
        if me in last["challengers"]:
            raise TxError(Code.ALREADY_CHALLENGED)
        peer.count_challenge(ctx, None)
        last["challengers"] = sorted([*last["challengers"], me])
        last["reasons"][me] = msg.reason
    else:
        if record["status"] != records.STATUS_COMMITTED:
            raise TxError(Code.MEMORY_NOT_COMMITTED, f"memory is {record['status']}")
        peer.count_challenge(ctx, msg.memory_id)
        round_ = peer.open_round(ctx, record, msg.reason)
        rounds = rounds if rounds is not None else {"rounds": []}
        rounds["rounds"].append(round_)  # type: ignore[arg-type]
    ctx.state.put_record(records.challenge_key(msg.memory_id), rounds)
    ctx.state.put_record(records.memory_key(msg.memory_id), record)
    ctx.emit("challenge", id=msg.memory_id, challenger=me, kind=peer.PEER)
    ctx.emit("memory", id=msg.memory_id, status=record["status"])
    return True


def close_for_correction(state: TxBuffer, record: MemoryRecord, height: int) -> None:
    """v10+: a challenged memory's committed correction ends its open round (outcome
    `superseded`); the caller moves the memory to `superseded` and stores it."""
    key = records.challenge_key(record["id"])
    rounds: Disputes | None = state.get_record(key)
    if rounds is None or rounds["rounds"][-1]["outcome"] is not None:
        raise AssertionError(f"challenged memory {record['id']!r} has no open round")
    round_ = rounds["rounds"][-1]
    if round_.get("kind") == peer.PEER:
        peer.close_round(state, record, round_, "superseded", height)  # type: ignore[arg-type]
    else:
        round_["outcome"] = "superseded"
        round_["closed_height"] = height
    state.put_record(key, rounds)


def reinstate(ctx: TxContext, msg: tx_pb2.MemoryReinstate) -> None:
    record = _memory(ctx, msg.memory_id)
    if record["status"] != records.STATUS_CHALLENGED:
        raise TxError(Code.MEMORY_NOT_CHALLENGED, f"memory is {record['status']}")
    key = records.challenge_key(msg.memory_id)
    rounds = _disputes(ctx, msg.memory_id)
    round_ = rounds["rounds"][-1]
    if round_.get("kind") == peer.PEER:  # v10+: only its electorate's votes decide it
        raise TxError(Code.REINSTATE_DENIED, "a peer dispute is decided by the memory's "
                                             "electorate voting on it (MemoryVote: accept "
                                             "keeps it, reject deprecates it)")
    if ctx.signer_hex not in round_["electorate"]:
        raise TxError(Code.REINSTATE_DENIED)
    round_["outcome"] = "reinstated"
    round_["reinstated_by"] = ctx.signer_hex
    set_status(record, records.STATUS_COMMITTED, ctx.block.height)
    ctx.state.put_record(key, rounds)
    ctx.state.put_record(records.memory_key(msg.memory_id), record)
    ctx.emit("reinstate", id=msg.memory_id, by=ctx.signer_hex)
    ctx.emit("memory", id=msg.memory_id, status=record["status"])


def corroborate(ctx: TxContext, msg: tx_pb2.MemoryCorroborate) -> None:
    """One marker per agent, never by the author; the status does not change."""
    record = _memory(ctx, msg.memory_id)
    if record["author"] == ctx.signer_hex or ctx.signer_hex in (record.get("coauthors") or []):
        raise TxError(Code.CORROBORATE_BY_AUTHOR)
    allowed = (records.STATUS_COMMITTED,) if versions.active(
        "corroborate_requires_committed", ctx.block.app_version
    ) else (records.STATUS_COMMITTED, records.STATUS_PROPOSED)
    if record["status"] not in allowed:
        raise TxError(Code.MEMORY_NOT_COMMITTED, f"memory is {record['status']}")
    key = records.corroboration_key(msg.memory_id, ctx.signer)
    if ctx.state.get(key) is not None:
        raise TxError(Code.ALREADY_CORROBORATED)
    ctx.state.put_record(key, {"height": ctx.block.height})
    record["corroborators"] = sorted([*record.get("corroborators", []), ctx.signer_hex])
    ctx.state.put_record(records.memory_key(msg.memory_id), record)
    ctx.emit("corroborate", id=msg.memory_id, by=ctx.signer_hex)
