"""Decoded txs remembered by their exact bytes, so each tx passes the stateless gate once.

A tx is decoded and verified by CheckTx, again by every mempool RECHECK after each block,
and again in FinalizeBlock. The gate (`memledger.consensus.gate.envelope.decode_tx`) is a pure
function of the
bytes and the chain id, so its result can be reused: the map is keyed on the whole tx,
not a hash of it, and only successful decodes are kept (a rejected tx costs nothing to
reject again and must not pin memory). Bounded by count and by bytes.
"""

from __future__ import annotations

from collections import OrderedDict

from memledger.consensus.gate.envelope import SignedTx


class DecodedTxCache:
    """LRU map from raw tx bytes to its SignedTx."""

    def __init__(self, max_entries: int = 20_000, max_bytes: int = 64 << 20) -> None:
        self._entries: OrderedDict[bytes, SignedTx] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self.hits = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, raw: object) -> bool:
        return raw in self._entries

    def get(self, raw: bytes) -> SignedTx | None:
        signed = self._entries.get(raw)
        if signed is not None:
            self.hits += 1
            self._entries.move_to_end(raw)
        return signed

    def put(self, raw: bytes, signed: SignedTx) -> None:
        if raw in self._entries or len(raw) > self._max_bytes:
            return
        self._entries[raw] = signed
        self._bytes += len(raw)
        while len(self._entries) > self._max_entries or self._bytes > self._max_bytes:
            old, _ = self._entries.popitem(last=False)
            self._bytes -= len(old)
