"""Decoded txs remembered by their exact bytes, so each tx passes the stateless gate once.

A tx is decoded and verified by CheckTx, again by every mempool RECHECK after each block,
and again in FinalizeBlock. The gate (`memledger.consensus.gate.envelope.decode_tx`) is a pure
function of the
bytes and the chain id, so its result can be reused under the same chain id: the map is
keyed on the whole tx, not a hash of it, each entry remembers the chain id it passed
under (a node's chain id changes once, when state sync restores a snapshot: a tx that
passed its empty chain id before must be judged again), and only successful decodes
are kept (a rejected tx costs nothing to reject again and must not pin memory). Bounded
by count and by bytes.
"""

from __future__ import annotations

from collections import OrderedDict

from memledger.consensus.gate.envelope import SignedTx


class DecodedTxCache:
    """LRU map from raw tx bytes to its SignedTx."""

    def __init__(self, max_entries: int = 20_000, max_bytes: int = 64 << 20) -> None:
        self._entries: OrderedDict[bytes, tuple[str, SignedTx]] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self.hits = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, raw: object) -> bool:
        return raw in self._entries

    def get(self, raw: bytes, chain_id: str | None = None) -> SignedTx | None:
        """The tx as it passed the gate under `chain_id` (None: under any, for what does
        not depend on it, such as its signer and nonce)."""
        entry = self._entries.get(raw)
        if entry is None or (chain_id is not None and entry[0] != chain_id):
            return None
        self.hits += 1
        self._entries.move_to_end(raw)
        return entry[1]

    def put(self, raw: bytes, signed: SignedTx, chain_id: str) -> None:
        if len(raw) > self._max_bytes:
            return
        if raw in self._entries:
            if self._entries[raw][0] == chain_id:
                return
            self._bytes -= len(raw)  # replaced: it passed again under another chain id
        self._entries[raw] = (chain_id, signed)
        self._bytes += len(raw)
        while len(self._entries) > self._max_entries or self._bytes > self._max_bytes:
            old, _ = self._entries.popitem(last=False)
            self._bytes -= len(old)
