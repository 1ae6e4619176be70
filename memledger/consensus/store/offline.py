"""Store work outside of blocks: bulk loads, state-sync restores, tree recovery and the audit.

Loads and restores write in chunked transactions for speed, so neither is atomic: a marker in meta
makes a crash mid-fill detectable at the next open (a bulk load refuses to open, a restore
rolls back to empty).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import lmdb

from memledger.consensus.store.lmdb_base import (
    M_APP_HASH,
    M_APP_VERSION,
    M_HEIGHT,
    M_LAYOUT,
    M_LOADING,
    M_RESTORED,
    M_RESTORING,
    AppHashMismatch,
    CorruptStoreError,
    StoreError,
    check_record,
    layout_of,
    node_key,
    tree_from_hidx,
    u64,
)
from memledger.consensus.store.snapshot import Snapshot
from memledger.protocol.commitment import (
    TREE_SIZE,
    ZERO_HASH,
    MerkleTree,
    bucket_of,
    bucket_prefix,
    value_hash,
)


class StoreOffline:
    """Mixed into CanonicalStore: filling it outside of blocks, and auditing it."""

    _env: lmdb.Environment
    _data: Any
    _hidx: Any
    _tree_db: Any
    _meta: Any
    _tree: MerkleTree | None
    _layout: int
    readonly: bool
    _head: tuple[int, int] | None
    _unconfirmed: bool | None
    _gen: int
    _current: Any
    _reads: dict[bytes, bytes | None]

    def _require_writer(self) -> MerkleTree:
        raise NotImplementedError

    def _write_txn(self) -> lmdb.Transaction:
        """A write outside of a block's commit: the committed reads the writer keeps
        (CanonicalStore.get) may no longer hold, so they are dropped first."""
        self._reads.clear()
        return self._env.begin(write=True)

    def snapshot(self) -> AbstractContextManager[Snapshot]:
        raise NotImplementedError

    def bulk_load(self, items: Iterable[tuple[bytes, bytes]], *, chunk: int = 200_000,
                  layout: int = 1) -> bytes:
        """Fill an empty, never-committed store (genesis import, benchmarks); returns the root.

        Writes in chunked transactions for speed, so it is not atomic: a marker in meta makes
        any later open fail until the load completes. A later duplicate key overwrites.
        """
        self._begin_fill(M_LOADING, "bulk_load needs an empty, never-committed store")
        buf: list[tuple[bytes, bytes]] = []
        for key, value in items:
            check_record(key, value)
            buf.append((key, value))
            if len(buf) >= chunk:
                self._load_chunk(buf)
                buf = []
        if buf:
            self._load_chunk(buf)
        with self.snapshot() as snap:
            tree = tree_from_hidx(snap._txn, self._hidx, layout)
        with self._write_txn() as txn:
            self._write_full_tree(txn, tree, layout)
            txn.delete(M_LOADING, db=self._meta)
        self._tree, self._layout = tree, layout
        self._gen += 1
        self._current = None
        return tree.root

    # -- snapshot restore (state sync) -----------------------------------------------

    def restore_begin(self) -> None:
        """Start filling an empty, never-committed store from a snapshot.

        A marker makes a crash mid-restore roll back to empty at the next open.
        """
        self._begin_fill(M_RESTORING, "a snapshot can only be restored into an empty store")

    def restore_chunk(self, records: list[tuple[bytes, bytes]]) -> None:
        """Add one chunk of records (key order is checked by the caller)."""
        for key, value in records:
            check_record(key, value)
        self._load_chunk(records)

    def _begin_fill(self, marker: bytes, refusal: str) -> None:
        """Mark an empty, never-committed store as being filled outside of blocks."""
        self._require_writer()
        with self._write_txn() as txn:
            if txn.get(M_HEIGHT, db=self._meta) is not None or txn.stat(self._data)["entries"]:
                raise StoreError(refusal)
            txn.put(marker, b"1", db=self._meta)
        self._head = None

    def restore_finish(self, height: int, app_hash: bytes, app_version: int,
                       layouts: Sequence[int]) -> None:
        """Commit the restored state at `height` if, and only if, it hashes to `app_hash`
        under one of `layouts`, tried in order.

        More than one: a state saved at the height that activated a new app version was
        hashed under the version it ran under, so its own record names the next layout.
        Raises AppHashMismatch (the store is left as restored; call restore_abort()).
        The restore stays unconfirmed (`restore_unconfirmed`) until the next commit().
        """
        self._require_writer()
        roots = []
        with self.snapshot() as snap:
            for layout in layouts:
                tree = tree_from_hidx(snap._txn, self._hidx, layout)
                if tree.root == app_hash:
                    break
                roots.append(tree.root.hex())
            else:
                raise AppHashMismatch(f"restored state hashes to {', '.join(roots)}, "
                                      f"trusted app hash is {app_hash.hex()}")
        with self._write_txn() as txn:
            self._write_full_tree(txn, tree, layout)
            meta = self._meta
            txn.put(M_HEIGHT, u64(height), db=meta)
            txn.put(M_APP_HASH, bytes(app_hash), db=meta)
            txn.put(M_APP_VERSION, u64(app_version), db=meta)
            txn.delete(M_RESTORING, db=meta)
            txn.put(M_RESTORED, b"1", db=meta)
        self._tree, self._layout = tree, layout
        self._unconfirmed = True
        self._head = (height, app_version)
        self._gen += 1
        self._current = None

    @property
    def restore_unconfirmed(self) -> bool:
        """Whether this state came from a restore that no block has committed on top of.

        Only then may a new restore replace it: CometBFT saves its own state after the
        last chunk is applied, and a node stopped before that state-syncs again at its
        next start, with a store that already holds a height.
        """
        if self._unconfirmed is None:
            with self.snapshot() as snap:
                self._unconfirmed = snap._txn.get(M_RESTORED, db=self._meta) is not None
        return self._unconfirmed

    def restore_abort(self) -> None:
        """Drop everything a restore wrote (a finished but unconfirmed one too): the store
        is empty and never-committed again."""
        self._require_writer()
        self._wipe()
        self._unconfirmed = False
        self._tree, self._layout = MerkleTree.from_leaves({}), 1
        self._head = None
        self._gen += 1
        self._current = None

    def _wipe(self) -> None:
        with self._write_txn() as txn:
            for db in (self._data, self._hidx, self._tree_db):
                txn.drop(db, delete=False)
            for key in (M_HEIGHT, M_APP_HASH, M_APP_VERSION, M_RESTORING, M_RESTORED,
                        M_LAYOUT):
                txn.delete(key, db=self._meta)

    def _load_chunk(self, buf: list[tuple[bytes, bytes]]) -> None:
        hrows = sorted((bucket_prefix(bucket_of(k)) + k, value_hash(v)) for k, v in buf)
        with self._write_txn() as txn:
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
            tree = tree_from_hidx(txn, self._hidx, layout_of(txn, self._meta))
            stored = txn.get(node_key(1), db=self._tree_db) or ZERO_HASH
            expected = txn.get(M_APP_HASH, db=self._meta)
        if stored != tree.root or (expected is not None and expected != tree.root):
            raise CorruptStoreError("tree root disagrees with data")
        if self._tree is not None and self._tree.root != tree.root:
            raise CorruptStoreError("in-memory tree disagrees with data")

    # -- tree persistence and recovery ----------------------------------------------

    def _load_tree(self) -> MerkleTree:
        """Load persisted nodes; rebuild from hidx if missing or inconsistent."""
        with self.snapshot() as snap:
            txn = snap._txn
            self._layout = layout_of(txn, self._meta)
            expected = txn.get(M_APP_HASH, db=self._meta)
            has_entries = txn.stat(self._hidx)["entries"] > 0
            nodes: list[bytes] | None = [ZERO_HASH] * TREE_SIZE
            for k, v in txn.cursor(db=self._tree_db).iternext():
                idx = int.from_bytes(k, "big")
                if len(k) != 4 or len(v) != 32 or not 1 <= idx < TREE_SIZE or nodes is None:
                    nodes = None
                    break
                nodes[idx] = v
        if nodes is not None:
            tree = MerkleTree(nodes)
            if expected is not None:
                plausible = tree.root == expected
            else:
                plausible = (tree.root != ZERO_HASH) == has_entries
            if plausible and tree.is_consistent():
                return tree
        return self.rebuild_tree()

    def rebuild_tree(self) -> MerkleTree:
        """Recompute the whole tree from hidx and rewrite the tree db (O(n) recovery path).

        Raises CorruptStoreError if the result contradicts the committed app hash.
        """
        with self.snapshot() as snap:
            expected = snap._txn.get(M_APP_HASH, db=self._meta)
            tree = tree_from_hidx(snap._txn, self._hidx, self._layout)
        if expected is not None and tree.root != expected:
            raise CorruptStoreError(
                f"hidx root {tree.root.hex()} != committed app hash {expected.hex()}"
            )
        if not self.readonly:
            with self._write_txn() as txn:
                self._write_full_tree(txn, tree, self._layout)
            self._tree = tree
        return tree

    def _write_full_tree(self, txn: lmdb.Transaction, tree: MerkleTree, layout: int) -> None:
        txn.drop(self._tree_db, delete=False)
        cur = txn.cursor(db=self._tree_db)
        cur.putmulti([(node_key(i), h) for i, h in tree.nonzero_nodes()], append=True)
        txn.put(M_LAYOUT, u64(layout), db=self._meta)
