"""Store work outside of blocks: bulk loads, state-sync restores and the full audit.

Loads and restores write in chunked transactions for speed, so neither is atomic: a marker in meta
makes a crash mid-fill detectable at the next open (a bulk load refuses to open, a restore
rolls back to empty).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

import lmdb

from memledger.consensus.store.commitment import (
    ZERO_HASH,
    MerkleTree,
    bucket_of,
    bucket_prefix,
    value_hash,
)
from memledger.consensus.store.lmdb_base import (
    _M_APP_HASH,
    _M_APP_VERSION,
    _M_HEIGHT,
    _M_LOADING,
    _M_RESTORING,
    AppHashMismatch,
    CorruptStoreError,
    StoreError,
    _check_record,
    _node_key,
    _tree_from_hidx,
    _u64,
)
from memledger.consensus.store.snapshot import Snapshot


class StoreOffline:
    """Mixed into CanonicalStore: filling it outside of blocks, and auditing it."""

    _env: lmdb.Environment
    _data: Any
    _hidx: Any
    _tree_db: Any
    _meta: Any
    _tree: MerkleTree | None
    _head: tuple[int, int] | None
    _gen: int
    _current: Any

    def _require_writer(self) -> MerkleTree:
        raise NotImplementedError

    def _write_full_tree(self, txn: lmdb.Transaction, tree: MerkleTree) -> None:
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager[Snapshot]:
        raise NotImplementedError

    def bulk_load(self, items: Iterable[tuple[bytes, bytes]], *, chunk: int = 200_000) -> bytes:
        """Fill an empty, never-committed store (genesis import, benchmarks); returns the root.

        Writes in chunked transactions for speed, so it is not atomic: a marker in meta makes
        any later open fail until the load completes. A later duplicate key overwrites.
        """
        self._begin_fill(_M_LOADING, "bulk_load needs an empty, never-committed store")
        buf: list[tuple[bytes, bytes]] = []
        for key, value in items:
            _check_record(key, value)
            buf.append((key, value))
            if len(buf) >= chunk:
                self._load_chunk(buf)
                buf = []
        if buf:
            self._load_chunk(buf)
        with self.snapshot() as snap:
            tree = _tree_from_hidx(snap._txn, self._hidx)
        with self._env.begin(write=True) as txn:
            self._write_full_tree(txn, tree)
            txn.delete(_M_LOADING, db=self._meta)
        self._tree = tree
        self._gen += 1
        self._current = None
        return tree.root

    # -- snapshot restore (state sync) -----------------------------------------------

    def restore_begin(self) -> None:
        """Start filling an empty, never-committed store from a snapshot.

        A marker makes a crash mid-restore roll back to empty at the next open.
        """
        self._begin_fill(_M_RESTORING, "a snapshot can only be restored into an empty store")

    def restore_chunk(self, records: list[tuple[bytes, bytes]]) -> None:
        """Add one chunk of records (key order is checked by the caller)."""
        for key, value in records:
            _check_record(key, value)
        self._load_chunk(records)

    def _begin_fill(self, marker: bytes, refusal: str) -> None:
        """Mark an empty, never-committed store as being filled outside of blocks."""
        self._require_writer()
        with self._env.begin(write=True) as txn:
            if txn.get(_M_HEIGHT, db=self._meta) is not None or txn.stat(self._data)["entries"]:
                raise StoreError(refusal)
            txn.put(marker, b"1", db=self._meta)
        self._head = None

    def restore_finish(self, height: int, app_hash: bytes, app_version: int) -> None:
        """Commit the restored state at `height` if, and only if, it hashes to `app_hash`.

        Raises AppHashMismatch (the store is left as restored; call restore_abort()).
        """
        self._require_writer()
        with self.snapshot() as snap:
            tree = _tree_from_hidx(snap._txn, self._hidx)
        if tree.root != app_hash:
            raise AppHashMismatch(f"restored state hashes to {tree.root.hex()}, "
                                  f"trusted app hash is {app_hash.hex()}")
        with self._env.begin(write=True) as txn:
            self._write_full_tree(txn, tree)
            meta = self._meta
            txn.put(_M_HEIGHT, _u64(height), db=meta)
            txn.put(_M_APP_HASH, bytes(app_hash), db=meta)
            txn.put(_M_APP_VERSION, _u64(app_version), db=meta)
            txn.delete(_M_RESTORING, db=meta)
        self._tree = tree
        self._head = (height, app_version)
        self._gen += 1
        self._current = None

    def restore_abort(self) -> None:
        """Drop everything a restore wrote: the store is empty and never-committed again."""
        self._require_writer()
        self._wipe()
        self._tree = MerkleTree.from_leaves({})
        self._head = None
        self._gen += 1
        self._current = None

    def _wipe(self) -> None:
        with self._env.begin(write=True) as txn:
            for db in (self._data, self._hidx, self._tree_db):
                txn.drop(db, delete=False)
            for key in (_M_HEIGHT, _M_APP_HASH, _M_APP_VERSION, _M_RESTORING):
                txn.delete(key, db=self._meta)

    def _load_chunk(self, buf: list[tuple[bytes, bytes]]) -> None:
        hrows = sorted((bucket_prefix(bucket_of(k)) + k, value_hash(v)) for k, v in buf)
        with self._env.begin(write=True) as txn:
            txn.cursor(db=self._data).putmulti(sorted(buf))
            txn.cursor(db=self._hidx).putmulti(hrows)

    def check_integrity(self) -> None:
        """Full O(n) audit: data, hidx, tree and meta agree; raises CorruptStoreError if not."""
        with self.snapshot() as snap:
            txn = snap._txn
            n = 0
            for key, value in txn.cursor(db=self._data).iternext():
                hkey = bucket_prefix(bucket_of(key)) + key
                if txn.get(hkey, db=self._hidx) != value_hash(value):
                    raise CorruptStoreError(f"hidx entry missing or wrong for {key!r}")
                n += 1
            if txn.stat(self._hidx)["entries"] != n:
                raise CorruptStoreError("hidx has entries with no data")
            tree = _tree_from_hidx(txn, self._hidx)
            stored = txn.get(_node_key(1), db=self._tree_db) or ZERO_HASH
            expected = txn.get(_M_APP_HASH, db=self._meta)
        if stored != tree.root or (expected is not None and expected != tree.root):
            raise CorruptStoreError("tree root disagrees with data")
        if self._tree is not None and self._tree.root != tree.root:
            raise CorruptStoreError("in-memory tree disagrees with data")
