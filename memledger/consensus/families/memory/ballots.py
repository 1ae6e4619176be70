"""Index of open pinned ballots per member: who may not leave the validator set yet."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memledger.consensus.families.context import TxBuffer
from memledger.protocol import records

if TYPE_CHECKING:
    from memledger.consensus.families.memory.record import Ballot


def _key(member: str) -> bytes:
    return records.BALLOT + member.encode()


def open_ballot(state: TxBuffer, ballot: Ballot) -> None:
    for member, _ in ballot["members"]:
        record = state.get_record(_key(member)) or {"open": 0}
        state.put_record(_key(member), {"open": int(record["open"]) + 1})


def close_ballot(state: TxBuffer, ballot: Ballot) -> None:
    for member, _ in ballot["members"]:
        record = state.get_record(_key(member)) or {"open": 0}
        remaining = int(record["open"]) - 1
        if remaining > 0:
            state.put_record(_key(member), {"open": remaining})
        else:
            state.delete(_key(member))


def open_count(state: TxBuffer, member: str) -> int:
    record = state.get_record(_key(member))
    return 0 if record is None else int(record["open"])
