"""Peer disputes (v10+, rule "peer_disputes"): anyone who may write a domain may dispute.

Before v10 only the domain's owner and modify holders (and, in ownerless domains, the
author) could challenge, so nobody could flag a wrong fact in `general`. From v10 any key
that may write the memory's domain and holds no such right opens a *peer* round instead:
the memory becomes `challenged` and the memory's own electorate (its pinned ballot, else
the validator set), frozen at the opening, decides it with MemoryVote: strict 2/3 of the
weight rejecting deprecates it; 2/3 accepting, or everyone having voted without a 2/3
rejection, returns it to `committed`. Undecided after `ballot_expiry` blocks, it returns
to `committed` (outcome `expired`), so a challenge alone cannot hide a memory for long.

Against spam: one challenge per key per round (ALREADY_CHALLENGED), at most
`peer_challenges_per_block` peer challenges per key per block and `peer_disputes_open`
rounds a key opened still open (PEER_CHALLENGE_LIMIT). The index
`pexp/<opened, 20 digits>\\0<memory id>` holds the open peer rounds in expiry order,
`pchl/<key>` the open rounds each key opened and `pchl/~block` the current block's counts.
"""

from __future__ import annotations

from typing import Any, TypedDict

from memledger.consensus import params as chain_params
from memledger.consensus.families.context import TxBuffer, TxContext
from memledger.consensus.families.governance import validators
from memledger.consensus.families.memory import quorum
from memledger.consensus.families.memory.record import MemoryRecord, set_status
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError

Events = list[tuple[str, list[tuple[str, str]]]]
PEER = "peer"
KEPT = "kept"
EXPIRED = "expired"
DEPRECATED = "deprecated"


class Challenger(TypedDict):
    """`pchl/<hex>`: the peer rounds a key opened that are still open (deleted when none)."""

    open: list[str]  # memory ids, sorted


class BlockCounts(TypedDict):
    """`pchl/~block`: peer challenges per key in block `height` (one record, replaced by
    the first peer challenge of a later block, so it never grows past one block's)."""

    height: int
    counts: dict[str, int]


BLOCK_COUNTS_KEY = records.PEER_CHALLENGER + b"~block"  # "~" is in no hex key


def index_key(opened: int, memory_id: str) -> bytes:
    return records.PEER_EXPIRY + f"{opened:020d}".encode() + records.SEP + memory_id.encode()


def is_open_peer_round(round_: Any) -> bool:
    return bool(round_.get("kind") == PEER and round_.get("outcome") is None)


def _challenger(state: TxBuffer, agent: bytes) -> Challenger:
    found: Challenger | None = state.get_record(records.peer_challenger_key(agent))
    return found if found is not None else {"open": []}


def count_challenge(ctx: TxContext, opening: str | None) -> None:
    """Charge one peer challenge to the signer (and the round it opens, if `opening`);
    PEER_CHALLENGE_LIMIT past either bound. Writes the counts: call once all else passed."""
    height, me = ctx.block.height, ctx.signer_hex
    block: BlockCounts | None = ctx.state.get_record(BLOCK_COUNTS_KEY)
    if block is None or block["height"] != height:
        block = {"height": height, "counts": {}}
    in_block = int(block["counts"].get(me, 0))
    per_block = int(chain_params.value(ctx.state, "peer_challenges_per_block"))
    if in_block >= per_block:
        raise TxError(Code.PEER_CHALLENGE_LIMIT,
                      f"{in_block} peer challenges by this key in this block already "
                      f"(peer_challenges_per_block = {per_block}); try in a later block")
    if opening is not None:
        mine = _challenger(ctx.state, ctx.signer)
        most = int(chain_params.value(ctx.state, "peer_disputes_open"))
        if len(mine["open"]) >= most:
            raise TxError(Code.PEER_CHALLENGE_LIMIT,
                          f"this key holds {len(mine['open'])} open peer disputes "
                          f"(peer_disputes_open = {most}); wait for one to be decided")
        mine["open"] = sorted([*mine["open"], opening])
        ctx.state.put_record(records.peer_challenger_key(ctx.signer), mine)
    block["counts"][me] = in_block + 1
    ctx.state.put_record(BLOCK_COUNTS_KEY, block)


def open_round(ctx: TxContext, record: MemoryRecord, reason: str) -> dict[str, Any]:
    """The new peer round of a committed memory (the caller stores it and the record)."""
    if record["ballot"] is not None:
        ballot = [[m, int(w)] for m, w in record["ballot"]["members"]]
    else:
        ballot = [[m, int(w)] for m, w in validators.load(ctx.state)]
    me, height = ctx.signer_hex, ctx.block.height
    set_status(record, records.STATUS_CHALLENGED, height)
    ctx.state.put_record(index_key(height, record["id"]), {})
    return {"opened_height": height, "opener": me, "kind": PEER,
            "electorate": sorted(m for m, _ in ballot), "ballot": ballot,
            "challengers": [me], "reasons": {me: reason}, "votes": {}, "outcome": None}


def close_round(state: TxBuffer, record: MemoryRecord, round_: dict[str, Any],
                outcome: str, height: int) -> None:
    """End an open peer round with `outcome` (the caller moves the memory's status and
    stores both records): drop its expiry entry and free the opener's open slot."""
    round_["outcome"] = outcome
    round_["closed_height"] = height
    state.delete(index_key(int(round_["opened_height"]), record["id"]))
    opener = bytes.fromhex(str(round_["opener"]))
    mine = _challenger(state, opener)
    mine["open"] = [m for m in mine["open"] if m != record["id"]]
    key = records.peer_challenger_key(opener)
    if mine["open"]:
        state.put_record(key, mine)
    else:
        state.delete(key)


def vote(ctx: TxContext, record: MemoryRecord, round_: dict[str, Any], decision: str,
         reason: str) -> None:
    """A MemoryVote on a memory in an open peer round (the caller stores the records)."""
    voters = [(m, int(w)) for m, w in round_["ballot"]]
    me = ctx.signer_hex
    if me not in {m for m, _ in voters}:
        if record["ballot"] is not None:
            raise TxError(Code.NOT_A_SCOPE_MEMBER)
        raise TxError(Code.NOT_A_VALIDATOR, "not among the validators frozen when this "
                                            "peer dispute opened")
    if me in round_["votes"]:
        raise TxError(Code.ALREADY_VOTED, "already voted in this peer dispute")
    entry: list[Any] = [decision, ctx.block.height]
    if reason:
        entry.append(reason)
    round_["votes"][me] = entry
    result = quorum.tally({m: v[0] for m, v in round_["votes"].items()}, voters)
    height = ctx.block.height
    if quorum.has_supermajority(result.reject, result.total):
        close_round(ctx.state, record, round_, DEPRECATED, height)
        set_status(record, records.STATUS_DEPRECATED, height)
    elif quorum.has_supermajority(result.accept, result.total) or result.all_voted:
        close_round(ctx.state, record, round_, KEPT, height)
        set_status(record, records.STATUS_COMMITTED, height)


def expire_due(state: TxBuffer, height: int, events: Events) -> None:
    """Return to `committed`, in index order, every peer round open `ballot_expiry`
    blocks without a decision."""
    bound = height - int(chain_params.value(state, "ballot_expiry"))
    due: list[str] = []
    for key, _ in state.iter_prefix(records.PEER_EXPIRY):
        opened, memory_id = records.split_compound(key, records.PEER_EXPIRY)
        if int(opened) > bound:
            break
        due.append(memory_id)
    for memory_id in due:
        memory_key = records.memory_key(memory_id)
        record: MemoryRecord | None = state.get_record(memory_key)
        disputes = state.get_record(records.challenge_key(memory_id))
        if record is None or disputes is None or not is_open_peer_round(disputes["rounds"][-1]):
            raise AssertionError(f"peer expiry index names {memory_id!r}, not in a peer round")
        close_round(state, record, disputes["rounds"][-1], EXPIRED, height)
        set_status(record, records.STATUS_COMMITTED, height)
        state.put_record(records.challenge_key(memory_id), disputes)
        state.put_record(memory_key, record)
        events.append(("memory", [("id", memory_id), ("status", records.STATUS_COMMITTED),
                                  ("reason", "peer_dispute_expired")]))
