"""Canonical key/value state on LMDB, with the app-hash tree kept in step.

Why LMDB: one write transaction per block gives atomic, durable commits (data, hash index,
tree nodes and height advance together or not at all), and other processes (the REST API)
can read committed snapshots concurrently without blocking the writer.

Sub-databases (all keys/values are raw bytes):

- ``data``: key -> value, the canonical state.
- ``hidx``: bucket(2 bytes) || key -> SHA-256(value). A bucket is rehashed by a prefix scan
  of its ~n/65536 entries without reading values; proofs are served from it too.
- ``tree``: uint32be(heap index) -> 32-byte node, for every non-zero node of the commitment
  tree (see memledger/protocol/commitment.py). Only nodes changed by a block are rewritten.
  A writer loads
  it at open; if it is missing or inconsistent it is rebuilt from ``hidx``.
- ``meta``: ``height`` (u64be), ``app_hash`` (32 bytes), ``app_version`` (u64be),
  ``schema`` (u64be), ``hash_layout`` (u64be, the bucket-hash layout of the committed
  tree; absent means 1), and user entries under ``u/<name>``. Meta is NOT covered by the app
  hash: never let consensus output depend on a user meta entry.

Readers should open with ``readonly=True`` and keep ``lock=True`` (the default): LMDB's
reader table in ``lock.mdb`` is what stops the writer from recycling pages a reader's
snapshot still uses. ``lock=False`` is only safe when no writer runs at the same time.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import lmdb

from memledger.consensus.store.lmdb_base import (
    ALL_DBS,
    DEFAULT_MAP_SIZE,
    M_APP_HASH,
    M_APP_VERSION,
    M_HEIGHT,
    M_LAYOUT,
    M_LOADING,
    M_RESTORED,
    M_RESTORING,
    M_SCHEMA,
    MAX_KEY_LEN,
    SCHEMA_VERSION,
    U64_MAX,
    AppHashMismatch,
    CorruptStoreError,
    StaleOverlayError,
    StoreError,
    leaves_from_hidx,
    node_key,
    take_writer_lock,
    u64,
    write_rows,
)
from memledger.consensus.store.offline import StoreOffline
from memledger.consensus.store.overlay import BlockOverlay, Prepared
from memledger.consensus.store.snapshot import Snapshot
from memledger.protocol.commitment import (
    ZERO_HASH,
    MerkleTree,
    Proof,
    bucket_hash,
    bucket_of,
    bucket_prefix,
    value_hash,
)

log = logging.getLogger("memledger.store")

#: How many committed reads the writer keeps (CanonicalStore.get); past it, it starts over.
READ_MEMO_ENTRIES = 65_536
_UNREAD = object()

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


class CanonicalStore(StoreOffline):
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
        self.map_size = map_size
        self._before_commit = before_commit
        self._gen = 0
        self._current: BlockOverlay | None = None
        self._head: tuple[int, int] | None = None
        self._unconfirmed: bool | None = None  # restore_unconfirmed, once read
        self._tree: MerkleTree | None = None
        self._layout = 1
        self._lock_fd: int | None = None
        self._reads: dict[bytes, bytes | None] = {}
        if readonly:
            if not os.path.isdir(path):
                raise StoreError(f"{path}: no store to open read-only")
        else:
            os.makedirs(path, exist_ok=True)
            self._lock_fd = take_writer_lock(path)
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
                self.clear_dead_readers()
                self._tree = self._load_tree()  # also reads the committed layout
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
                dbs = [env.open_db(n, create=False) for n in ALL_DBS]
            else:
                with env.begin(write=True) as txn:
                    dbs = [env.open_db(n, txn=txn, create=True) for n in ALL_DBS]
                    schema = txn.get(M_SCHEMA, db=dbs[3])
                    if schema is None:
                        txn.put(M_SCHEMA, u64(SCHEMA_VERSION), db=dbs[3])
        except lmdb.NotFoundError as exc:
            raise StoreError(f"{self.path}: store not initialised") from exc
        self._data, self._hidx, self._tree_db, self._meta = dbs
        with env.begin() as txn:
            schema = txn.get(M_SCHEMA, db=self._meta)
            if schema is not None and int.from_bytes(schema, "big") != SCHEMA_VERSION:
                raise StoreError(f"unsupported store schema {int.from_bytes(schema, 'big')}")
            if txn.get(M_LOADING, db=self._meta) is not None:
                raise CorruptStoreError("bulk load did not complete; discard this store")
            interrupted = txn.get(M_RESTORING, db=self._meta) is not None
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

    def open_snapshot(self) -> Snapshot:
        """A read view kept open past one call (`Snapshot.close` ends it): the REST API
        keeps the previous height's, to prove at a height whose next header exists."""
        return Snapshot(self, self._env.begin())

    def get(self, key: bytes) -> bytes | None:
        """The committed value of key (None: absent).

        The writer keeps what it read (absences too), up to READ_MEMO_ENTRIES: only it
        moves the committed state, and commit() and every write outside a block bring
        the kept reads up to date, so they cannot go stale. A tx reads about fifteen keys
        (the params, its domain, its account) in CheckTx and again in its block, mostly
        the same ones. A read-only opener keeps nothing: another process commits.
        """
        reads = self._reads
        value = reads.get(key, _UNREAD)
        if value is not _UNREAD:
            return value  # type: ignore[return-value]
        with self._env.begin() as txn:
            found: bytes | None = txn.get(key, db=self._data)
        if not self.readonly:
            if len(reads) >= READ_MEMO_ENTRIES:
                reads.clear()
            reads[key] = found
        return found

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

    def clear_dead_readers(self) -> int:
        """Free the reader slots of processes that died inside a read transaction (a
        SIGKILLed `projection rebuild`, REST API or rebuild child); how many. LMDB keeps
        such a slot until someone checks, and while it stands no page freed after its
        snapshot can be reused: data.mdb grew every block until the map was full and the
        node halted, on a state of a few hundred KiB. A scan of the reader table and one
        kill(pid, 0) per slot: cheap enough for every Commit."""
        cleared = int(self._env.reader_check())
        if cleared:
            log.warning("cleared %d LMDB reader slot(s) left by dead processes", cleared)
        return cleared

    def commit(self, overlay: BlockOverlay, height: int, app_hash: bytes, app_version: int) -> None:
        """Atomically persist a block and advance to height.

        Raises AppHashMismatch (nothing written) if the overlay's root is not app_hash.
        Heights must strictly increase; the first commit may use any height >= 0.
        """
        tree = self._require_writer()
        self.clear_dead_readers()
        self._check_current(overlay)
        if type(height) is not int or not 0 <= height <= U64_MAX:
            raise ValueError("height must be an int in [0, 2^64)")
        if type(app_version) is not int or not 0 <= app_version <= U64_MAX:
            raise ValueError("app_version must be an int in [0, 2^64)")
        confirms = self.restore_unconfirmed  # a block on a restore: CometBFT has its state
        prep = overlay._prepare()
        if prep.root != app_hash:
            raise AppHashMismatch(
                f"recomputed root {prep.root.hex()} != asserted {bytes(app_hash).hex()}"
            )
        with self._env.begin(write=True) as txn:
            prev = Snapshot(self, txn)._height()
            if prev is not None and height <= prev:
                raise StoreError(f"height {height} not above committed height {prev}")
            write_rows(txn, self._data, prep.changes)
            write_rows(txn, self._hidx, [(k, None) for k in prep.hidx_dels])
            write_rows(txn, self._hidx, prep.hidx_puts)
            write_rows(
                txn,
                self._tree_db,
                [
                    (node_key(i), None if prep.nodes[i] == ZERO_HASH else prep.nodes[i])
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
            txn.put(M_HEIGHT, u64(height), db=meta)
            txn.put(M_APP_HASH, bytes(app_hash), db=meta)
            txn.put(M_APP_VERSION, u64(app_version), db=meta)
            if prep.layout != self._layout:
                txn.put(M_LAYOUT, u64(prep.layout), db=meta)
            if confirms:
                txn.delete(M_RESTORED, db=meta)
            if self._before_commit is not None:
                self._before_commit()
        # Durable from here on; only now may the in-memory tree, head and reads move.
        tree.apply(prep.nodes)
        reads = self._reads
        for key, value in prep.changes:
            if key in reads:
                reads[key] = value
        self._layout = prep.layout
        self._head = (height, app_version)
        self._unconfirmed = False
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

    def _prepare(self, writes: dict[bytes, bytes | None], layout: int | None = None
                 ) -> Prepared:
        """Effective changes, hash-index edits and tree nodes for a set of writes.

        Cost: one prefix scan of hidx per touched bucket plus O(touched * 16) node hashes;
        under a new layout, one scan and rehash of every bucket.
        """
        tree = self._require_writer()
        layout = self._layout if layout is None else layout
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
                if touched or layout != self._layout:
                    leaves[bucket] = bucket_hash(entries.items(), layout)
            if layout != self._layout:
                leaves.update(leaves_from_hidx(snap._txn, self._hidx, layout,
                                                skip=frozenset(by_bucket)))
        changes.sort()
        nodes = tree.plan(leaves)
        return Prepared(changes, hidx_puts, hidx_dels, nodes, tree.plan_root(nodes), layout)
