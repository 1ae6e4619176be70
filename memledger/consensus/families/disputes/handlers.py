"""Challenge, corroborate, reinstate: disputes over committed memories (DESIGN §4).

A challenge on a committed memory opens a round with a frozen electorate: the domain's
modify-grant holders and the memory's corroborators, minus the opener. With k eligible
corroborators in that electorate, k+1 distinct challengers deprecate the memory (k = 0
deprecates at once). Any electorate member may reinstate it while it is challenged.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from memledger.consensus import versions
from memledger.consensus.families.access.domains import LEVELS, can_modify, is_shared
from memledger.consensus.families.context import TxBuffer, TxContext
from memledger.consensus.families.memory.record import MemoryRecord, load, set_status
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError
from memledger.protocol.limits import MAX_REASON_BYTES
from memledger.protocol.pb import tx_pb2


class Round(TypedDict):
    """One dispute round: its frozen electorate, its k, who challenged and why."""

    opened_height: int
    opener: str
    electorate: list[str]  # sorted hex keys who may reinstate
    k: int  # eligible corroborators: k + 1 distinct challengers deprecate
    challengers: list[str]  # sorted
    reasons: dict[str, str]
    outcome: str | None  # None while open, then "deprecated" or "reinstated"
    reinstated_by: NotRequired[str]


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
    if not may_challenge(ctx.state, record, ctx.signer, ctx.block.height):
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


def reinstate(ctx: TxContext, msg: tx_pb2.MemoryReinstate) -> None:
    record = _memory(ctx, msg.memory_id)
    if record["status"] != records.STATUS_CHALLENGED:
        raise TxError(Code.MEMORY_NOT_CHALLENGED, f"memory is {record['status']}")
    key = records.challenge_key(msg.memory_id)
    rounds = _disputes(ctx, msg.memory_id)
    round_ = rounds["rounds"][-1]
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
