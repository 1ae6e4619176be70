"""The snapshot half of ABCI: serve snapshots, and restore one trusting only the app hash.

Restore rules (docs/SNAPSHOTS.md):
- OfferSnapshot: only into an empty store, or one whose restore no block has committed
  on yet (CometBFT had not saved its state when the node stopped: it is replaced); the
  format must be ours, the metadata must be canonical and match what is advertised, and
  its app hash must be the trusted one that CometBFT's light client hands in.
- ApplySnapshotChunk (CometBFT applies chunks in order): a chunk whose SHA-256 is not the
  one in the metadata is refetched from another peer (RETRY, its sender rejected); a chunk
  that matches its hash but does not decode, or breaks key order, condemns the snapshot.
- After the last chunk, the restored records must hash to the trusted app hash, or the
  snapshot is rejected (REJECT_SNAPSHOT, its senders reported) and nothing of it remains.
- The commit sink (the SQL projection) is rebuilt from the restored records: through
  its restore feed, fed as each chunk is stored (the projection's is a child process,
  `projection/background.py`), committed only once the app hash matched; in-process
  after the check if the feed cannot start or fails.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from memledger.consensus import versions
from memledger.consensus.faults import RESTORE_KILL_POINT
from memledger.consensus.store.lmdb_base import MAX_KEY_LEN
from memledger.consensus.store.sinks import CommitSink, RestoreFeed, RestoreFeedError
from memledger.consensus.store.snapshots import (
    FORMAT,
    SnapshotError,
    SnapshotInfo,
    SnapshotStore,
    decode_chunk,
)
from memledger.consensus.store.state import AppHashMismatch, CanonicalStore
from memledger.consensus.versions import INITIAL_APP_VERSION
from memledger.protocol import records
from memledger.protocol.commitment import LAYOUTS
from memledger.protocol.pb import abci_pb2 as pb

log = logging.getLogger("memledger.statesync")

Offer = pb.ResponseOfferSnapshot
Apply = pb.ResponseApplySnapshotChunk


@dataclass
class _Restore:
    info: SnapshotInfo
    trusted_app_hash: bytes
    next_chunk: int = 0
    last_key: bytes = b""
    records: int = 0
    senders: list[str] = field(default_factory=list)
    builder: RestoreFeed | None = None


class StateSync:
    """ABCI snapshot methods for one store; `snapshots` is None on a node that serves none."""

    def __init__(self, store: CanonicalStore, sink: CommitSink,
                 snapshots: SnapshotStore | None,
                 on_restored: Callable[[], None] = lambda: None,
                 background_rebuild: bool = True,
                 checkpoint: Callable[[str, int], None] = lambda point, height: None
                 ) -> None:
        self.store = store
        self.checkpoint = checkpoint  # fault injection (FaultPlan.maybe_kill)
        self.sink = sink
        self.snapshots = snapshots
        self.on_restored = on_restored
        self.background_rebuild = background_rebuild
        self._restore: _Restore | None = None

    # ----------------------------------------------------------------- serving
    def list_snapshots(self) -> pb.ResponseListSnapshots:
        if self.snapshots is None:
            return pb.ResponseListSnapshots()
        return pb.ResponseListSnapshots(snapshots=[
            pb.Snapshot(height=s.height, format=s.format, chunks=s.chunks, hash=s.hash,
                        metadata=s.metadata())
            for s in self.snapshots.list()])

    def load_snapshot_chunk(self, req: pb.RequestLoadSnapshotChunk) -> bytes:
        if self.snapshots is None:
            return b""
        return self.snapshots.load_chunk(int(req.height), int(req.format), int(req.chunk))

    @property
    def rebuild_pid(self) -> int | None:
        """The background projection rebuild's process id, while one runs."""
        builder = None if self._restore is None else self._restore.builder
        return None if builder is None else builder.pid

    def close(self) -> None:
        """Stop a background projection rebuild (its transaction rolls back); a restore in
        progress is rolled back when the store is next opened."""
        if self._restore is not None:
            self._stop_builder(self._restore)

    # ----------------------------------------------------------------- restoring
    def offer_snapshot(self, req: pb.RequestOfferSnapshot) -> pb.ResponseOfferSnapshot:
        self._abandon()
        height = self.store.last_height
        if height != 0 and not self.store.restore_unconfirmed:
            log.warning("snapshot offered to a node that already has state: abort")
            return Offer(result=Offer.ABORT)
        snap = req.snapshot
        try:
            info = SnapshotInfo.parse(int(snap.height), int(snap.format), int(snap.chunks),
                                      bytes(snap.metadata))
        except SnapshotError as exc:
            log.warning("snapshot at height %d refused: %s", snap.height, exc)
            fmt_bad = int(snap.format) != FORMAT
            return Offer(result=Offer.REJECT_FORMAT if fmt_bad else Offer.REJECT)
        if info.hash != bytes(snap.hash) or info.app_hash != bytes(req.app_hash):
            log.warning("snapshot at height %d refused: its hash or app hash is not the "
                        "trusted one", snap.height)
            return Offer(result=Offer.REJECT)
        if height != 0:
            # Restored, but no block committed on it: CometBFT did not save its state (it
            # would not state-sync otherwise), so the node stopped in between. Redo it.
            log.warning("replacing the restore of height %d, never confirmed by a block "
                        "(the node stopped before CometBFT saved its state)", height)
            self.store.restore_abort()
        self.store.restore_begin()
        self._restore = _Restore(info, bytes(req.app_hash), builder=self._start_builder())
        log.info("restoring snapshot at height %d: %d chunks, %d records", info.height,
                 info.chunks, info.records)
        return Offer(result=Offer.ACCEPT)

    def apply_snapshot_chunk(self, req: pb.RequestApplySnapshotChunk
                             ) -> pb.ResponseApplySnapshotChunk:
        restore = self._restore
        if restore is None:
            return Apply(result=Apply.ABORT)
        index, chunk, sender = int(req.index), bytes(req.chunk), str(req.sender)
        if index < restore.next_chunk:
            return Apply(result=Apply.ACCEPT)  # already applied (a retried delivery)
        if index != restore.next_chunk or index >= restore.info.chunks:
            return Apply(result=Apply.RETRY_SNAPSHOT)
        if hashlib.sha256(chunk).digest() != restore.info.chunk_hashes[index]:
            log.warning("chunk %d from %r does not match its hash: refetching", index, sender)
            return Apply(result=Apply.RETRY, refetch_chunks=[index],
                         reject_senders=[sender] if sender else [])
        if sender and sender not in restore.senders:
            restore.senders.append(sender)
        try:
            items = decode_chunk(chunk)
            for key, _ in items:
                if not 1 <= len(key) <= MAX_KEY_LEN:  # the store could not hold it
                    raise SnapshotError(f"a key of {len(key)} bytes (1..{MAX_KEY_LEN})")
                if key <= restore.last_key:
                    raise SnapshotError("keys are not strictly ascending")
                restore.last_key = key
        except SnapshotError as exc:
            return self._reject(f"chunk {index} is malformed: {exc}")
        self.store.restore_chunk(items)
        if restore.builder is not None and items:
            try:
                restore.builder.advance(items[-1][0])
            except RestoreFeedError as exc:
                log.warning("%s: the projection will be rebuilt after the restore", exc)
                restore.builder = None
        restore.records += len(items)
        restore.next_chunk += 1
        if restore.next_chunk < restore.info.chunks:
            return Apply(result=Apply.ACCEPT)
        return self._finish(restore)

    def _finish(self, restore: _Restore) -> pb.ResponseApplySnapshotChunk:
        if restore.records != restore.info.records:
            return self._reject(f"snapshot holds {restore.records} records, metadata says "
                                f"{restore.info.records}")
        try:
            version = _app_version(self.store)
        except SnapshotError as exc:
            return self._reject(str(exc))
        try:
            layout = versions.hash_layout(version)
            self.store.restore_finish(restore.info.height, restore.trusted_app_hash, version,
                                      (layout, *(x for x in LAYOUTS if x != layout)))
        except AppHashMismatch as exc:
            return self._reject(str(exc))
        self._restore = None
        self.checkpoint(RESTORE_KILL_POINT, restore.info.height)
        count = self._finish_projection(restore)
        self.on_restored()
        log.info("restored height %d (app version %d): %d records, projection rebuilt (%d)",
                 restore.info.height, version, restore.records, count)
        return Apply(result=Apply.ACCEPT)

    @staticmethod
    def _stop_builder(restore: _Restore) -> None:
        if restore.builder is not None:
            restore.builder.abort()
            restore.builder = None

    def _start_builder(self) -> RestoreFeed | None:
        if not self.background_rebuild:
            return None
        try:
            return self.sink.restore_feed(self.store.path)
        except (OSError, RuntimeError) as exc:
            log.warning("no background projection rebuild (%r): rebuilding after the restore",
                        exc)
            return None

    def _finish_projection(self, restore: _Restore) -> int:
        """The projection of the restored (and verified) state; returns records read."""
        if restore.builder is not None:
            try:
                return restore.builder.finish(restore.info.height, restore.trusted_app_hash)
            except RestoreFeedError as exc:
                log.warning("%s: rebuilding the projection in-process", exc)
        return self.sink.rebuild_committed(self.store)  # restore_finish committed it

    def _reject(self, reason: str) -> pb.ResponseApplySnapshotChunk:
        restore = self._restore
        senders = [] if restore is None else list(restore.senders)
        log.warning("snapshot rejected: %s (senders %s)", reason, senders)
        self._abandon()
        return Apply(result=Apply.REJECT_SNAPSHOT, reject_senders=senders)

    def _abandon(self) -> None:
        """Drop a restore in progress: nothing of it remains in the store."""
        if self._restore is not None:
            self._stop_builder(self._restore)
            self._restore = None
            self.store.restore_abort()


def _app_version(store: CanonicalStore) -> int:
    """The restored chain's app version, from its own state. Read before that state is
    checked against the trusted app hash (the version picks the hash layout), so a
    record a peer made up is refused here (SnapshotError), never a crash."""
    raw = store.get(records.APP_VERSION)
    if raw is None:
        return INITIAL_APP_VERSION
    try:
        version = json.loads(raw)["version"]
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: deep JSON
        raise SnapshotError("its app version record is unreadable") from None
    if type(version) is not int or version < 1:
        raise SnapshotError(f"its app version record holds {version!r}")
    return version
