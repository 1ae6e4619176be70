"""A consistent read view of committed state inside one LMDB read transaction."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import lmdb

from memledger.consensus.store.lmdb_base import (
    M_APP_HASH,
    M_APP_VERSION,
    M_HEIGHT,
    layout_of,
    node_key,
    user_meta_key,
)
from memledger.protocol.commitment import (
    NUM_BUCKETS,
    ZERO_HASH,
    Proof,
    bucket_of,
    bucket_prefix,
)

if TYPE_CHECKING:
    from memledger.consensus.store.state import CanonicalStore


class Snapshot:
    """Consistent view of committed state inside one LMDB read transaction."""

    def __init__(self, store: CanonicalStore, txn: lmdb.Transaction) -> None:
        self._s = store
        self._txn = txn

    def close(self) -> None:
        """End a view opened with `CanonicalStore.open_snapshot`."""
        self._txn.abort()

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._txn.get(key, db=self._s._data)
        return value

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs whose key starts with prefix, ascending by key bytes."""
        cur = self._txn.cursor(db=self._s._data)
        if not cur.set_range(prefix):
            return
        for k, v in cur.iternext():
            if not k.startswith(prefix):
                return
            yield k, v

    def iter_range(self, after: bytes | None, upto: bytes | None
                   ) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs with `after` < key <= `upto`, ascending (None: unbounded)."""
        cur = self._txn.cursor(db=self._s._data)
        if not cur.set_range(after or b""):
            return
        for k, v in cur.iternext():
            if upto is not None and k > upto:
                return
            if after is None or k > after:
                yield k, v

    def _height(self) -> int | None:
        raw = self._txn.get(M_HEIGHT, db=self._s._meta)
        return None if raw is None else int.from_bytes(raw, "big")

    @property
    def last_height(self) -> int:
        """Last committed height; 0 before the first commit."""
        h = self._height()
        return 0 if h is None else h

    @property
    def last_app_hash(self) -> bytes:
        """App hash of the last commit; before any commit, the root of the stored state."""
        raw: bytes | None = self._txn.get(M_APP_HASH, db=self._s._meta)
        if raw is not None:
            return raw
        root = self._txn.get(node_key(1), db=self._s._tree_db)
        return ZERO_HASH if root is None else root

    @property
    def app_version(self) -> int:
        raw = self._txn.get(M_APP_VERSION, db=self._s._meta)
        return 0 if raw is None else int.from_bytes(raw, "big")

    def get_meta(self, name: str) -> bytes | None:
        value: bytes | None = self._txn.get(user_meta_key(name), db=self._s._meta)
        return value

    def bucket_entries(
        self, bucket: int, cursor: lmdb.Cursor | None = None
    ) -> list[tuple[bytes, bytes]]:
        """(key, value_hash) of one bucket, ascending by key, from the hash index."""
        pfx = bucket_prefix(bucket)
        cur = self._txn.cursor(db=self._s._hidx) if cursor is None else cursor
        out: list[tuple[bytes, bytes]] = []
        if cur.set_range(pfx):
            for k, v in cur.iternext():
                if k[:2] != pfx:
                    break
                out.append((k[2:], v))
        return out

    def prove(self, key: bytes) -> Proof:
        """Inclusion (or absence) proof for key against this snapshot's last_app_hash."""
        bucket = bucket_of(key)
        tree_db = self._s._tree_db
        sibs = []
        i = NUM_BUCKETS + bucket
        while i > 1:
            node = self._txn.get(node_key(i ^ 1), db=tree_db)
            sibs.append(ZERO_HASH if node is None else node)
            i >>= 1
        layout = layout_of(self._txn, self._s._meta)
        return Proof(bucket, tuple(self.bucket_entries(bucket)), tuple(sibs), layout)
