"""Canonical key/value state on LMDB, with the app-hash tree kept in step.

Why LMDB: one write transaction per block gives atomic, durable commits (data, hash index,
tree nodes and height advance together or not at all), and other processes (the REST API)
can read committed snapshots concurrently without blocking the writer.

Sub-databases (all keys/values are raw bytes):

- ``data``: key -> value, the canonical state.
- ``hidx``: bucket(2 bytes) || key -> SHA-256(value). A bucket is rehashed by a prefix scan
  of its ~n/65536 entries without reading values; proofs are served from it too.
- ``tree``: uint32be(heap index) -> 32-byte node, for every non-zero node of the commitment
  tree (see memledger/consensus/store/commitment.py). Only nodes changed by a block are rewritten.
  A writer loads
  it at open; if it is missing or inconsistent it is rebuilt from ``hidx``.
- ``meta``: ``height`` (u64be), ``app_hash`` (32 bytes), ``app_version`` (u64be),
  ``schema`` (u64be), and user entries under ``u/<name>``. Meta is NOT covered by the app
  hash: never let consensus output depend on a user meta entry.

Readers should open with ``readonly=True`` and keep ``lock=True`` (the default): LMDB's
reader table in ``lock.mdb`` is what stops the writer from recycling pages a reader's
snapshot still uses. ``lock=False`` is only safe when no writer runs at the same time.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import lmdb

from memledger.consensus.store.commitment import (
    NUM_BUCKETS,
    TREE_SIZE,
    ZERO_HASH,
    MerkleTree,
    Proof,
    bucket_hash,
    bucket_of,
    bucket_prefix,
    value_hash,
)

__all__ = [
    "DEFAULT_MAP_SIZE",
    "MAX_KEY_LEN",
    "AppHashMismatch",
    "BlockOverlay",
    "CanonicalStore",
    "CorruptStoreError",
    "Snapshot",
    "StaleOverlayError",
    "StoreError",
]

DEFAULT_MAP_SIZE = 64 << 30
#: LMDB's default key limit is 511 bytes and hidx keys carry a 2-byte bucket prefix.
MAX_KEY_LEN = 509
SCHEMA_VERSION = 1
_U64_MAX = (1 << 64) - 1

_DB_DATA = b"data"
_DB_HIDX = b"hidx"
_DB_TREE = b"tree"
_DB_META = b"meta"
_M_HEIGHT = b"height"
_M_APP_HASH = b"app_hash"
_M_APP_VERSION = b"app_version"
_M_SCHEMA = b"schema"
_M_LOADING = b"loading"
_M_RESTORING = b"restoring"
_M_USER = b"u/"
_WRITER_LOCK = "writer.lock"


class StoreError(Exception):
    """Misuse of the store or a state it cannot proceed from."""


class AppHashMismatch(StoreError):
    """The root recomputed at commit differs from the app hash the caller asserted."""


class StaleOverlayError(StoreError):
    """The overlay was discarded by a newer begin_block(), already committed, or outdated."""


class CorruptStoreError(StoreError):
    """On-disk state contradicts itself (e.g. data does not hash to the committed root)."""


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _node_key(index: int) -> bytes:
    return index.to_bytes(4, "big")


def _user_meta_key(name: str) -> bytes:
    if not isinstance(name, str) or not name:
        raise ValueError("meta name must be a non-empty str")
    return _M_USER + name.encode("utf-8")


def _check_key(key: bytes) -> None:
    if type(key) is not bytes:
        raise TypeError("keys must be bytes")
    if not 1 <= len(key) <= MAX_KEY_LEN:
        raise ValueError(f"key length must be 1..{MAX_KEY_LEN}, got {len(key)}")


def _check_record(key: bytes, value: bytes) -> None:
    _check_key(key)
    if type(value) is not bytes:
        raise TypeError("values must be bytes")


@dataclass(frozen=True, slots=True)
class _Prepared:
    """Everything a block's commit writes, computed once against a fixed committed base."""

    changes: list[tuple[bytes, bytes | None]]
    hidx_puts: list[tuple[bytes, bytes]]
    hidx_dels: list[bytes]
    nodes: dict[int, bytes]
    root: bytes


class Snapshot:
    """Consistent view of committed state inside one LMDB read transaction."""

    def __init__(self, store: CanonicalStore, txn: lmdb.Transaction) -> None:
        self._s = store
        self._txn = txn

    def get(self, key: bytes) -> bytes | None:
        return self._txn.get(key, db=self._s._data)

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs whose key starts with prefix, ascending by key bytes."""
        cur = self._txn.cursor(db=self._s._data)
        if not cur.set_range(prefix):
            return
        for k, v in cur.iternext():
            if not k.startswith(prefix):
                return
            yield k, v

    def _height(self) -> int | None:
        raw = self._txn.get(_M_HEIGHT, db=self._s._meta)
        return None if raw is None else int.from_bytes(raw, "big")

    @property
    def last_height(self) -> int:
        """Last committed height; 0 before the first commit."""
        h = self._height()
        return 0 if h is None else h

    @property
    def last_app_hash(self) -> bytes:
        """App hash of the last commit; before any commit, the root of the stored state."""
        raw = self._txn.get(_M_APP_HASH, db=self._s._meta)
        if raw is not None:
            return raw
        root = self._txn.get(_node_key(1), db=self._s._tree_db)
        return ZERO_HASH if root is None else root

    @property
    def app_version(self) -> int:
        raw = self._txn.get(_M_APP_VERSION, db=self._s._meta)
        return 0 if raw is None else int.from_bytes(raw, "big")

    def get_meta(self, name: str) -> bytes | None:
        return self._txn.get(_user_meta_key(name), db=self._s._meta)

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
            node = self._txn.get(_node_key(i ^ 1), db=tree_db)
            sibs.append(ZERO_HASH if node is None else node)
            i >>= 1
        return Proof(bucket, tuple(self.bucket_entries(bucket)), tuple(sibs))


class BlockOverlay:
    """Uncommitted writes of one block, layered over the committed state.

    Only the overlay most recently returned by ``begin_block()`` can be committed, and only
    once; starting a new block discards it (FinalizeBlock may be re-run for a height).
    """

    def __init__(self, store: CanonicalStore, generation: int) -> None:
        self._store = store
        self._gen = generation
        self._writes: dict[bytes, bytes | None] = {}
        self._meta: dict[bytes, bytes | None] = {}
        self._prepared: _Prepared | None = None
        self.committed = False

    def get(self, key: bytes) -> bytes | None:
        """Value as this block sees it: its own writes first (deletes shadow), then committed."""
        writes = self._writes
        if key in writes:
            return writes[key]
        return self._store.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        _check_key(key)
        if type(value) is not bytes:
            raise TypeError("values must be bytes")
        self._mutable()
        self._writes[key] = value
        self._prepared = None

    def delete(self, key: bytes) -> None:
        _check_key(key)
        self._mutable()
        self._writes[key] = None
        self._prepared = None

    def set_meta(self, name: str, value: bytes | None) -> None:
        """Stage a user meta entry (None deletes it), written atomically with the block."""
        if value is not None and type(value) is not bytes:
            raise TypeError("meta values must be bytes")
        self._mutable()
        self._meta[_user_meta_key(name)] = value

    def get_meta(self, name: str) -> bytes | None:
        key = _user_meta_key(name)
        if key in self._meta:
            return self._meta[key]
        return self._store.get_meta(name)

    def changes(self) -> list[tuple[bytes, bytes | None]]:
        """Effective changes sorted by key; value None means delete.

        No-ops are dropped: deleting a key absent from committed state, and putting a value
        whose SHA-256 equals the committed one. The result is what commit() writes.
        """
        return list(self._prepare().changes)

    def app_hash(self) -> bytes:
        """Root the state will have once this block commits; committed state is untouched."""
        return self._prepare().root

    def _mutable(self) -> None:
        if self.committed:
            raise StaleOverlayError("overlay already committed")

    def _prepare(self) -> _Prepared:
        if self.committed and self._prepared is not None:
            return self._prepared  # changes()/app_hash() stay readable after commit
        self._store._check_current(self)
        if self._prepared is None:
            self._prepared = self._store._prepare(self._writes)
        return self._prepared


class CanonicalStore:
    """The canonical state: committed reads, per-block overlays, atomic block commits.

    ``before_commit`` is a test hook run inside the commit's write transaction just before
    LMDB commits it; raising from it aborts the transaction with nothing advanced.
    """

    def __init__(
        self,
        path: str,
        map_size: int = DEFAULT_MAP_SIZE,
        readonly: bool = False,
        *,
        lock: bool = True,
        before_commit: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.readonly = readonly
        self._before_commit = before_commit
        self._gen = 0
        self._current: BlockOverlay | None = None
        self._head: tuple[int, int] | None = None
        self._tree: MerkleTree | None = None
        self._lock_fd: int | None = None
        if readonly:
            if not os.path.isdir(path):
                raise StoreError(f"{path}: no store to open read-only")
        else:
            os.makedirs(path, exist_ok=True)
            self._lock_fd = _take_writer_lock(path)
        try:
            self._env = lmdb.open(
                path,
                map_size=map_size,
                subdir=True,
                readonly=readonly,
                lock=lock if readonly else True,
                max_dbs=4,
                sync=True,
                metasync=True,
            )
            self._open_dbs()
            if not readonly:
                self._tree = self._load_tree()
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------

    def _open_dbs(self) -> None:
        env = self._env
        try:
            if self.readonly:
                # No explicit txn: py-lmdb then commits the read txn that opens each handle,
                # which LMDB requires for the handle to outlive it.
                dbs = [env.open_db(n, create=False) for n in _ALL_DBS]
            else:
                with env.begin(write=True) as txn:
                    dbs = [env.open_db(n, txn=txn, create=True) for n in _ALL_DBS]
                    schema = txn.get(_M_SCHEMA, db=dbs[3])
                    if schema is None:
                        txn.put(_M_SCHEMA, _u64(SCHEMA_VERSION), db=dbs[3])
        except lmdb.NotFoundError as exc:
            raise StoreError(f"{self.path}: store not initialised") from exc
        self._data, self._hidx, self._tree_db, self._meta = dbs
        with env.begin() as txn:
            schema = txn.get(_M_SCHEMA, db=self._meta)
            if schema is not None and int.from_bytes(schema, "big") != SCHEMA_VERSION:
                raise StoreError(f"unsupported store schema {int.from_bytes(schema, 'big')}")
            if txn.get(_M_LOADING, db=self._meta) is not None:
                raise CorruptStoreError("bulk load did not complete; discard this store")
            interrupted = txn.get(_M_RESTORING, db=self._meta) is not None
        if interrupted and not self.readonly:
            self._wipe()  # a snapshot restore died half-way: back to empty

    def set_before_commit(self, hook: Callable[[], None] | None) -> None:
        """Replace the test hook run inside the next commits' write transaction."""
        self._before_commit = hook

    def close(self) -> None:
        env = getattr(self, "_env", None)
        if env is not None:
            env.close()
            self._env = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> CanonicalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- committed reads -------------------------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        """One consistent read view (e.g. value + height + proof for an API response)."""
        with self._env.begin() as txn:
            yield Snapshot(self, txn)

    def get(self, key: bytes) -> bytes | None:
        with self._env.begin() as txn:
            return txn.get(key, db=self._data)

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Committed (key, value) pairs under prefix, ascending; holds one read txn."""
        with self.snapshot() as snap:
            yield from snap.iter_prefix(prefix)

    def _committed_head(self) -> tuple[int, int]:
        """(last height, app version); the writer keeps them in memory.

        CheckTx asks for both on every call. Only this process can commit (the writer
        lock), so its copy, refreshed by commit(), cannot go stale; read-only openers
        always read LMDB because another process is moving the head.
        """
        head = self._head
        if head is None:
            with self.snapshot() as snap:
                head = (snap.last_height, snap.app_version)
            if not self.readonly:
                self._head = head
        return head

    @property
    def last_height(self) -> int:
        return self._committed_head()[0]

    @property
    def last_app_hash(self) -> bytes:
        with self.snapshot() as snap:
            return snap.last_app_hash

    @property
    def app_version(self) -> int:
        return self._committed_head()[1]

    def get_meta(self, name: str) -> bytes | None:
        with self.snapshot() as snap:
            return snap.get_meta(name)

    def prove(self, key: bytes) -> Proof:
        """Proof for key against last_app_hash (use snapshot() to read both consistently)."""
        with self.snapshot() as snap:
            return snap.prove(key)

    # -- blocks ----------------------------------------------------------------------

    def begin_block(self) -> BlockOverlay:
        """Start a block; any earlier uncommitted overlay is discarded."""
        self._require_writer()
        self._current = BlockOverlay(self, self._gen)
        return self._current

    def commit(self, overlay: BlockOverlay, height: int, app_hash: bytes, app_version: int) -> None:
        """Atomically persist a block and advance to height.

        Raises AppHashMismatch (nothing written) if the overlay's root is not app_hash.
        Heights must strictly increase; the first commit may use any height >= 0.
        """
        tree = self._require_writer()
        self._check_current(overlay)
        if type(height) is not int or not 0 <= height <= _U64_MAX:
            raise ValueError("height must be an int in [0, 2^64)")
        if type(app_version) is not int or not 0 <= app_version <= _U64_MAX:
            raise ValueError("app_version must be an int in [0, 2^64)")
        prep = overlay._prepare()
        if prep.root != app_hash:
            raise AppHashMismatch(
                f"recomputed root {prep.root.hex()} != asserted {bytes(app_hash).hex()}"
            )
        with self._env.begin(write=True) as txn:
            prev = Snapshot(self, txn)._height()
            if prev is not None and height <= prev:
                raise StoreError(f"height {height} not above committed height {prev}")
            _write_rows(txn, self._data, prep.changes)
            _write_rows(txn, self._hidx, [(k, None) for k in prep.hidx_dels])
            _write_rows(txn, self._hidx, prep.hidx_puts)
            _write_rows(
                txn,
                self._tree_db,
                [
                    (_node_key(i), None if prep.nodes[i] == ZERO_HASH else prep.nodes[i])
                    for i in sorted(prep.nodes)
                ],
            )
            meta = self._meta
            for mkey in sorted(overlay._meta):
                mval = overlay._meta[mkey]
                if mval is None:
                    txn.delete(mkey, db=meta)
                else:
                    txn.put(mkey, mval, db=meta)
            txn.put(_M_HEIGHT, _u64(height), db=meta)
            txn.put(_M_APP_HASH, bytes(app_hash), db=meta)
            txn.put(_M_APP_VERSION, _u64(app_version), db=meta)
            if self._before_commit is not None:
                self._before_commit()
        # Durable from here on; only now may the in-memory tree and head move.
        tree.apply(prep.nodes)
        self._head = (height, app_version)
        self._gen += 1
        overlay.committed = True
        self._current = None

    def _require_writer(self) -> MerkleTree:
        if self.readonly or self._tree is None:
            raise StoreError("store is read-only")
        return self._tree

    def _check_current(self, overlay: BlockOverlay) -> None:
        if overlay.committed:
            raise StaleOverlayError("overlay already committed")
        if overlay is not self._current or overlay._gen != self._gen:
            raise StaleOverlayError("overlay was discarded by a newer begin_block()")

    def _prepare(self, writes: dict[bytes, bytes | None]) -> _Prepared:
        """Effective changes, hash-index edits and tree nodes for a set of writes.

        Cost: one prefix scan of hidx per touched bucket plus O(touched * 16) node hashes.
        """
        tree = self._require_writer()
        by_bucket: dict[int, list[tuple[bytes, bytes | None]]] = {}
        for key in sorted(writes):
            by_bucket.setdefault(bucket_of(key), []).append((key, writes[key]))
        changes: list[tuple[bytes, bytes | None]] = []
        hidx_puts: list[tuple[bytes, bytes]] = []
        hidx_dels: list[bytes] = []
        leaves: dict[int, bytes] = {}
        with self.snapshot() as snap:
            cursor = snap._txn.cursor(db=self._hidx)
            for bucket in sorted(by_bucket):
                pfx = bucket_prefix(bucket)
                entries = dict(snap.bucket_entries(bucket, cursor))
                touched = False
                for key, value in by_bucket[bucket]:
                    old = entries.get(key)
                    if value is None:
                        if old is None:
                            continue
                        del entries[key]
                        hidx_dels.append(pfx + key)
                    else:
                        vh = value_hash(value)
                        if old == vh:
                            continue
                        entries[key] = vh
                        hidx_puts.append((pfx + key, vh))
                    changes.append((key, value))
                    touched = True
                if touched:
                    leaves[bucket] = bucket_hash(entries.items())
        changes.sort()
        nodes = tree.plan(leaves)
        return _Prepared(changes, hidx_puts, hidx_dels, nodes, tree.plan_root(nodes))

    # -- tree persistence and recovery ----------------------------------------------

    def _load_tree(self) -> MerkleTree:
        """Load persisted nodes; rebuild from hidx if missing or inconsistent."""
        with self.snapshot() as snap:
            txn = snap._txn
            expected = txn.get(_M_APP_HASH, db=self._meta)
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
            expected = snap._txn.get(_M_APP_HASH, db=self._meta)
            tree = _tree_from_hidx(snap._txn, self._hidx)
        if expected is not None and tree.root != expected:
            raise CorruptStoreError(
                f"hidx root {tree.root.hex()} != committed app hash {expected.hex()}"
            )
        if not self.readonly:
            with self._env.begin(write=True) as txn:
                self._write_full_tree(txn, tree)
            self._tree = tree
        return tree

    def _write_full_tree(self, txn: lmdb.Transaction, tree: MerkleTree) -> None:
        txn.drop(self._tree_db, delete=False)
        cur = txn.cursor(db=self._tree_db)
        cur.putmulti([(_node_key(i), h) for i, h in tree.nonzero_nodes()], append=True)

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
            if Snapshot(self, txn)._height() is not None or txn.stat(self._data)["entries"]:
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


_ALL_DBS = (_DB_DATA, _DB_HIDX, _DB_TREE, _DB_META)


def _write_rows(txn: lmdb.Transaction, db: Any, rows: Iterable[tuple[bytes, bytes | None]]) -> None:
    """Apply puts (one C-level putmulti, ~2x faster than a put loop) and deletes (None)."""
    puts: list[tuple[bytes, bytes]] = []
    for key, value in rows:
        if value is None:
            txn.delete(key, db=db)
        else:
            puts.append((key, value))
    if puts:
        added, _ = txn.cursor(db=db).putmulti(puts)
        if added != len(puts):
            raise StoreError(f"LMDB stored {added} of {len(puts)} rows")


def _tree_from_hidx(txn: lmdb.Transaction, hidx: Any) -> MerkleTree:
    """Stream hidx in (bucket, key) order and hash each bucket: the from-scratch tree."""
    leaves: dict[int, bytes] = {}
    cur_pfx: bytes | None = None
    entries: list[tuple[bytes, bytes]] = []
    for k, v in txn.cursor(db=hidx).iternext():
        pfx = k[:2]
        if pfx != cur_pfx:
            if cur_pfx is not None:
                leaves[int.from_bytes(cur_pfx, "big")] = bucket_hash(entries)
            cur_pfx = pfx
            entries = []
        entries.append((k[2:], v))
    if cur_pfx is not None:
        leaves[int.from_bytes(cur_pfx, "big")] = bucket_hash(entries)
    return MerkleTree.from_leaves(leaves)


def _take_writer_lock(path: str) -> int:
    """Exclusive flock so two writers (processes or stores) never share one directory."""
    fd = os.open(os.path.join(path, _WRITER_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"{path}: another writer holds the store") from exc
    return fd
