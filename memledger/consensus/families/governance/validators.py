"""The validator set as consensus state: one sorted record, integer powers."""

from __future__ import annotations

from memledger.consensus.families.context import TxBuffer
from memledger.protocol import records


def load(state: TxBuffer) -> list[tuple[str, int]]:
    """Current validators as (hex key, power), sorted by key."""
    record = state.get_record(records.VALIDATORS)
    if record is None:
        return []
    return [(str(member), int(power)) for member, power in record["validators"]]


def store(state: TxBuffer, members: list[tuple[str, int]]) -> None:
    """Persist the set, dropping zero-power entries and keeping key order."""
    kept = sorted((m, p) for m, p in members if p > 0)
    state.put_record(records.VALIDATORS, {"validators": [[m, p] for m, p in kept]})


def power_of(state: TxBuffer, member_hex: str) -> int:
    """Voting power of `member_hex`, 0 when not a validator."""
    for member, power in load(state):
        if member == member_hex:
            return power
    return 0
