"""App version 10: a validator CometBFT reports as misbehaving loses its place.

CometBFT commits evidence (a validator that signed two different votes at one height and
round, or took part in a light-client attack) and reports it in FinalizeBlock's
`misbehavior`. From v10 the chain itself removes that validator: the same pending change
a governance removal makes (power 0, effective at H+2, VALIDATOR_DELAY), with the same
safety limits: never the last validator, never 1/3 or more of the power in one step
(then it stays, and the event says so, for governance to decide). docs/RULES.md,
"Misbehaviour".
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from memledger.consensus.families.context import TxBuffer
from memledger.consensus.families.governance.kinds import (
    VALIDATOR_DELAY,
    BlockEffects,
    effective_set,
)
from memledger.protocol import records

#: CometBFT's MisbehaviorType numbers
KINDS = {1: "duplicate_vote", 2: "light_client_attack"}


def address_of(member_hex: str) -> bytes:
    """CometBFT's validator address: the first 20 bytes of sha256(ed25519 key)."""
    return hashlib.sha256(bytes.fromhex(member_hex)).digest()[:20]


def punish(state: TxBuffer, height: int, reports: Sequence[tuple[int, bytes]],
           effects: BlockEffects) -> None:
    """Remove each reported validator (``reports``: (type, address) in CometBFT's order)."""
    for kind, address in reports:
        current = effective_set(state)
        by_address = {address_of(m): m for m in sorted(current)}
        member = by_address.get(bytes(address))
        attrs = [("address", bytes(address).hex().upper()),
                 ("kind", KINDS.get(kind, "unknown"))]
        if member is None:  # already removed (or pending removal), or never a validator
            effects.events.append(("misbehaviour", [*attrs, ("action", "none")]))
            continue
        total, power = sum(current.values()), current[member]
        if len(current) == 1 or 3 * power >= total:
            effects.events.append(("misbehaviour", [*attrs, ("validator", member),
                                                    ("action", "kept")]))
            continue
        pending = state.get_record(records.VALSET_PENDING) or {"pending": []}
        pending["pending"].append([height + VALIDATOR_DELAY, member, 0])
        state.put_record(records.VALSET_PENDING, pending)
        effects.validator_updates.append((bytes.fromhex(member), 0))
        effects.events.append(("misbehaviour", [*attrs, ("validator", member),
                                                ("action", "removed")]))
