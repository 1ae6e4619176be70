"""Rechecks answered from the last check: a tx whose state reads the block left alone.

Why: after every Commit CometBFT re-runs CheckTx on every tx left in the mempool. Most of
them were checked against the state one block earlier, and most of what that check read
(the signer's account, the memory id, the domain, the chain params) the block did not
write. For such a tx the handler's verdict cannot have changed; only the mempool view of
the signer's nonces can, so the recheck re-runs the nonce rule alone
(memledger.consensus.block.execute.recheck_nonce).

A recheck is advisory, like every CheckTx: nothing here reaches a block or the app hash.
What the skip can miss is a rule that turns on the block's height or time alone (a grant
that expired, a time window that closed); the block then refuses the tx with the same
code as always, since FinalizeBlock runs every tx in full.

Keyed by tx hash. An entry holds the committed height its check ran against, the app
version, and the state keys it read; it is good for that height and the next, so a recheck
that finds the block touched one of those keys (or a check that iterated a key range)
runs in full and records afresh.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass


@dataclass(slots=True)
class _Checked:
    height: int
    app_version: int
    reads: AbstractSet[bytes]


class RecheckMemo:
    """tx hash -> what its last full check read; bounded LRU."""

    def __init__(self, max_entries: int = 20_000) -> None:
        self._entries: OrderedDict[bytes, _Checked] = OrderedDict()
        self._max_entries = max_entries
        self._changed: frozenset[bytes] = frozenset()
        self._changed_height = -1
        self.skipped = 0

    def __len__(self) -> int:
        return len(self._entries)

    def remember(self, tx_hash: bytes, height: int, app_version: int,
                 reads: AbstractSet[bytes]) -> None:
        """A full check of this tx passed against committed `height`, reading `reads`
        (kept as given: the caller hands it over)."""
        entries = self._entries
        if tx_hash in entries:
            entries.move_to_end(tx_hash)
        entries[tx_hash] = _Checked(height, app_version, reads)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def forget(self, tx_hash: bytes) -> None:
        self._entries.pop(tx_hash, None)

    def committed(self, height: int, changed: Iterable[bytes]) -> None:
        """Block `height` committed, writing (or deleting) the keys `changed`."""
        self._changed = frozenset(changed)
        self._changed_height = height

    def clear(self) -> None:
        """State was replaced (state sync): no earlier check holds."""
        self._entries.clear()
        self._changed = frozenset()
        self._changed_height = -1

    def unchanged(self, tx_hash: bytes, height: int, app_version: int) -> bool:
        """True when this tx's last full check ran under the same version against
        `height`, or against `height - 1` and block `height` wrote none of the keys it
        read; the entry then stands for `height`."""
        entry = self._entries.get(tx_hash)
        if entry is None or entry.app_version != app_version:
            return False
        if entry.height != height and (
                entry.height != height - 1 or self._changed_height != height
                or not entry.reads.isdisjoint(self._changed)):
            return False
        entry.height = height
        self._entries.move_to_end(tx_hash)
        self.skipped += 1
        return True
