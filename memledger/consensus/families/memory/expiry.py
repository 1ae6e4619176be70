"""Ballot expiry (v4+, rule "ballot_expiry"): no memory stays `proposed` forever.

A ballot opens when its memory is proposed (or, for ballots already open when v4
activates, at the activation height). At the end of every block, each ballot opened at
or before `height - ballot_expiry` that is still undecided expires: the memory becomes
`deprecated` with `expired_height` recorded, and a pinned ballot releases its members.

The index `bexp/<opened height, 20 digits>\\0<memory id>` holds exactly the open ballots
in the order they expire, so the end-of-block scan stops at the first one not yet due:
O(expiring) per block, whatever the number of open ballots.
"""

from __future__ import annotations

from memledger.consensus import params as chain_params
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.families.memory import ballots, corrections
from memledger.consensus.families.memory.record import MemoryRecord, set_status
from memledger.consensus.store import codec
from memledger.protocol import records

Events = list[tuple[str, list[tuple[str, str]]]]


def index_key(opened: int, memory_id: str) -> bytes:
    return records.BALLOT_EXPIRY + f"{opened:020d}".encode() + records.SEP + memory_id.encode()


def start_clock(state: TxBuffer, record: MemoryRecord, opened: int) -> None:
    """Open the expiry clock of a proposed memory (the caller writes the record)."""
    record["expiry_from"] = opened
    state.put_record(index_key(opened, record["id"]), {})


def stop_clock(state: TxBuffer, record: MemoryRecord) -> None:
    """The ballot was decided: drop it from the index (records from before v4 have none)."""
    opened = record.get("expiry_from")
    if opened is not None:
        state.delete(index_key(int(opened), record["id"]))


def expire_due(state: TxBuffer, height: int, events: Events) -> None:
    """Expire, in index order, every open ballot whose window has run out at `height`."""
    bound = height - int(chain_params.value(state, "ballot_expiry"))
    due: list[tuple[bytes, str]] = []
    for key, _ in state.iter_prefix(records.BALLOT_EXPIRY):
        opened, memory_id = records.split_compound(key, records.BALLOT_EXPIRY)
        if int(opened) > bound:
            break
        due.append((key, memory_id))
    for key, memory_id in due:
        state.delete(key)
        memory_key = records.memory_key(memory_id)
        record: MemoryRecord | None = state.get_record(memory_key)
        if record is None or record["status"] != records.STATUS_PROPOSED:
            raise AssertionError(f"expiry index names {memory_id!r}, which is not proposed")
        set_status(record, records.STATUS_DEPRECATED, height)
        record["expired_height"] = height
        if record["ballot"] is not None:
            ballots.close_ballot(state, record["ballot"])
        state.put_record(memory_key, record)
        events.append(("memory", [("id", memory_id), ("status", records.STATUS_DEPRECATED),
                                  ("reason", "ballot_expired")]))
        corrections.settle(state, record, height, _no_round, events)  # v10+: frees its target


def _no_round(state: TxBuffer, record: MemoryRecord, height: int) -> None:
    raise AssertionError("an expired correction supersedes nothing")


def start_all_clocks(state: TxBuffer, height: int) -> None:
    """At the v4 activation: every memory still proposed gets a clock from this height.

    One pass over the memory records, once in a chain's life (the upgrade's block).
    """
    opened: list[tuple[bytes, MemoryRecord]] = []
    for key, raw in state.iter_prefix(records.MEMORY):
        record: MemoryRecord = codec.decode(raw)
        if record["status"] == records.STATUS_PROPOSED and "expiry_from" not in record:
            opened.append((key, record))
    for key, record in opened:
        start_clock(state, record, height)
        state.put_record(key, record)
