"""The fixed points of a block around its txs: what runs before the first and after the last.

Before the txs: validator-set changes whose effective height has come. After them, in
this order: governance (tallies, executions, upgrade activation), then the removal of
validators CometBFT reports as misbehaving (v10+), then memory-ballot expiry (v4+), then
peer-dispute expiry (v10+), then, in the block that activates an upgrade, the one-time
migrations of the rules it turns on. Each step runs in key/id
order over one buffer, so every validator writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memledger.consensus import versions
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.families.disputes import peer
from memledger.consensus.families.governance import proposals
from memledger.consensus.families.governance.kinds import BlockEffects
from memledger.consensus.families.governance.misbehaviour import punish
from memledger.consensus.families.memory import expiry

#: rule -> what its activation block does once, after that block's other end-of-block work
MIGRATIONS: dict[str, Callable[[TxBuffer, int], None]] = {
    "ballot_expiry": expiry.start_all_clocks,
}


def begin_block(state: TxBuffer, height: int) -> None:
    proposals.begin_block(state, height)


def end_block(state: TxBuffer, height: int, app_version: int,
              misbehaviour: Sequence[tuple[int, bytes]] = ()) -> BlockEffects:
    """``misbehaviour``: CometBFT's reports of this block, (type, validator address)."""
    effects = proposals.end_block(state, height, app_version)
    if misbehaviour and versions.active("evict_misbehaving", app_version):
        punish(state, height, misbehaviour, effects)
    if versions.active("ballot_expiry", app_version):
        expiry.expire_due(state, height, effects.events)
    if versions.active("peer_disputes", app_version):
        peer.expire_due(state, height, effects.events)
    new_version = effects.new_app_version
    if new_version is not None:
        for rule, migrate in MIGRATIONS.items():
            if not versions.active(rule, app_version) and versions.active(rule, new_version):
                migrate(state, height)
    return effects
