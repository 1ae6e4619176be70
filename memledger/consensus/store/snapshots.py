"""State sync snapshots: the canonical records in key order, in chunks (docs/SNAPSHOTS.md).

A snapshot is a pure function of the committed state at its height, so every honest node
that snapshots a height produces the same bytes and the same snapshot hash, and CometBFT
can fetch one snapshot's chunks from several peers. Only canonical state is serialised;
everything derived (the SQL projection) is rebuilt after a restore.

Chunk (format 1): records `uvarint(len(key)) ‖ key ‖ uvarint(len(value)) ‖ value`, keys
strictly ascending across the whole snapshot; a chunk is closed before the record that
would take it past CHUNK_BYTES (a larger record gets a chunk of its own).
Metadata: canonical JSON `{"app_hash": hex, "chunk_hashes": [hex SHA-256 per chunk],
"records": n}`. Snapshot hash: SHA-256 of the metadata bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from memledger.consensus.store.state import CanonicalStore, Snapshot
from memledger.consensus.wire.server import FrameError, decode_uvarint, encode_uvarint
from memledger.durable import fsync_dir, write_synced

log = logging.getLogger("memledger.snapshots")

FORMAT = 1
CHUNK_BYTES = 4 << 20
MAX_CHUNKS = 100_000


class SnapshotError(ValueError):
    """Bytes that are not a well-formed snapshot chunk or metadata."""


@dataclass(frozen=True)
class SnapshotInfo:
    """What ListSnapshots advertises and OfferSnapshot receives."""

    height: int
    format: int
    chunk_hashes: tuple[bytes, ...]
    records: int
    app_hash: bytes

    @property
    def chunks(self) -> int:
        return len(self.chunk_hashes)

    def metadata(self) -> bytes:
        doc = {"app_hash": self.app_hash.hex(), "chunk_hashes": [h.hex() for h in
                                                                 self.chunk_hashes],
               "records": self.records}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @property
    def hash(self) -> bytes:
        return hashlib.sha256(self.metadata()).digest()

    @classmethod
    def parse(cls, height: int, fmt: int, chunks: int, metadata: bytes) -> SnapshotInfo:
        """Validate advertised fields against the metadata; raise SnapshotError if unusable."""
        if fmt != FORMAT:
            raise SnapshotError(f"snapshot format {fmt} is not supported (only {FORMAT})")
        try:  # a peer's bytes: deep nesting (RecursionError) is just one more bad shape
            doc = json.loads(metadata)
            hashes = tuple(bytes.fromhex(h) for h in doc["chunk_hashes"])
            records, app_hash = doc["records"], bytes.fromhex(doc["app_hash"])
            canonical = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise SnapshotError(f"snapshot metadata does not parse: {exc}") from None
        if type(records) is not int or records < 0 or height < 1:
            raise SnapshotError("snapshot metadata: bad record count or height")
        if not 1 <= len(hashes) <= MAX_CHUNKS or len(hashes) != chunks:
            raise SnapshotError(f"snapshot advertises {chunks} chunks, metadata lists "
                                f"{len(hashes)}")
        if any(len(h) != 32 for h in hashes) or len(app_hash) != 32:
            raise SnapshotError("snapshot metadata: hashes must be 32 bytes")
        info = cls(height, fmt, hashes, records, app_hash)
        if canonical != metadata:
            raise SnapshotError("snapshot metadata is not canonical JSON")
        return info


# ----------------------------------------------------------------------------- codec
def encode_chunks(records: Iterable[tuple[bytes, bytes]],
                  chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Frame records into chunks; always at least one chunk (empty state: one empty)."""
    parts: list[bytes] = []
    size = 0
    emitted = False
    for key, value in records:
        frame = b"".join((encode_uvarint(len(key)), key, encode_uvarint(len(value)), value))
        if parts and size + len(frame) > chunk_bytes:
            yield b"".join(parts)
            emitted = True
            parts, size = [], 0
        parts.append(frame)
        size += len(frame)
    if parts or not emitted:
        yield b"".join(parts)


def decode_chunk(chunk: bytes) -> list[tuple[bytes, bytes]]:
    """The records of one chunk; SnapshotError on truncation or overlong varints.

    Lengths under 2^14 (one or two varint bytes: nearly every key and value) are read
    inline; a restore decodes millions of them.
    """
    out: list[tuple[bytes, bytes]] = []
    pos, end = 0, len(chunk)

    def length() -> int:
        nonlocal pos
        first = chunk[pos]
        if first < 0x80:
            pos += 1
            return first
        if pos + 1 < end and chunk[pos + 1] < 0x80:
            pos += 2
            return (first & 0x7F) | (chunk[pos - 1] << 7)
        try:
            head = decode_uvarint(chunk, pos)
        except FrameError as exc:
            raise SnapshotError(f"bad length in chunk: {exc}") from None
        if head is None:
            raise SnapshotError("truncated length in chunk")
        value, pos = head
        return value

    while pos < end:
        klen = length()
        key = chunk[pos:pos + klen]
        pos += klen
        if pos >= end:
            raise SnapshotError("record runs past the end of the chunk")
        vlen = length()
        value = chunk[pos:pos + vlen]
        pos += vlen
        if pos > end:
            raise SnapshotError("record runs past the end of the chunk")
        out.append((key, value))
    return out


# ----------------------------------------------------------------------------- on disk
class SnapshotStore:
    """Snapshots this node serves: `<root>/<height>/{metadata.json, 0, 1, ...}`."""

    def __init__(self, root: Path, keep: int = 2, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.root = root
        self.keep = max(1, keep)
        self.chunk_bytes = chunk_bytes
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob("*.tmp"):  # a snapshot interrupted by a crash
            shutil.rmtree(stale, ignore_errors=True)

    def write(self, view: Snapshot) -> SnapshotInfo:
        """Serialise one consistent read view of the committed state.

        A write that fails part-way (a full disk) removes its `.tmp` directory before
        raising: the node keeps running, and each failed height would leave one more.
        """
        tmp = self.root / f"{view.last_height}.tmp"
        try:
            return self._write(view, tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _write(self, view: Snapshot, tmp: Path) -> SnapshotInfo:
        height, app_hash = view.last_height, view.last_app_hash
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        hashes: list[bytes] = []
        records = 0

        def counted() -> Iterator[tuple[bytes, bytes]]:
            nonlocal records
            for item in view.iter_prefix(b""):
                records += 1
                yield item

        for index, chunk in enumerate(encode_chunks(counted(), self.chunk_bytes)):
            write_synced(tmp / str(index), chunk)
            hashes.append(hashlib.sha256(chunk).digest())
        info = SnapshotInfo(height, FORMAT, tuple(hashes), records, app_hash)
        write_synced(tmp / "metadata.json", info.metadata())
        fsync_dir(tmp)
        final = self.root / str(height)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        fsync_dir(self.root)
        self._prune()
        return info

    def _heights(self) -> list[int]:
        return sorted(int(p.name) for p in self.root.iterdir()
                      if p.is_dir() and p.name.isdigit())

    def oldest_height(self) -> int | None:
        """The lowest snapshot height on disk (None: none; 0 when the directory cannot be
        read, so nothing is pruned). Block pruning stays at or below it; a snapshot
        pruned meanwhile only makes the answer lower than the truth, never unsafe."""
        try:
            heights = self._heights()
        except OSError:
            return 0  # cannot tell: keep every block this time
        return heights[0] if heights else None

    def _prune(self) -> None:
        for height in self._heights()[:-self.keep]:
            shutil.rmtree(self.root / str(height), ignore_errors=True)

    def list(self) -> list[SnapshotInfo]:
        out = []
        for height in self._heights():
            path = self.root / str(height)
            try:
                metadata = (path / "metadata.json").read_bytes()
                doc = json.loads(metadata)
                out.append(SnapshotInfo.parse(height, FORMAT, len(doc["chunk_hashes"]),
                                              metadata))
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                # one damaged snapshot must not take ListSnapshots (and the node) down
                log.warning("ignoring unreadable snapshot %s", path)
        return out

    def load_chunk(self, height: int, fmt: int, index: int) -> bytes:
        """The chunk's bytes, or b"" when this node does not have it."""
        if fmt != FORMAT or index < 0:
            return b""
        try:
            return (self.root / str(int(height)) / str(int(index))).read_bytes()
        except OSError:
            return b""


class SnapshotTaker:
    """Takes a snapshot in a background thread from a read transaction opened at Commit.

    The read transaction pins the committed state of that height while later blocks
    commit; one snapshot at a time (a due one is skipped while another is running).
    """

    def __init__(self, store: CanonicalStore, snapshots: SnapshotStore, interval: int) -> None:
        self.store = store
        self.snapshots = snapshots
        self.interval = interval
        self._thread: threading.Thread | None = None

    def after_commit(self, height: int) -> None:
        if self.interval <= 0 or height % self.interval != 0:
            return
        if self._thread is not None and self._thread.is_alive():
            log.warning("snapshot at height %d skipped: the previous one is still running",
                        height)
            return
        txn = self.store._env.begin()  # opened here, so it sees exactly this height
        view = Snapshot(self.store, txn)
        self._thread = threading.Thread(target=self._run, args=(view, txn), daemon=True,
                                        name=f"snapshot-{height}")
        self._thread.start()

    def _run(self, view: Snapshot, txn: object) -> None:
        started = time.monotonic()
        try:
            info = self.snapshots.write(view)
            log.info("snapshot at height %d: %d records, %d chunks in %.2fs", info.height,
                     info.records, info.chunks, time.monotonic() - started)
        except Exception:  # noqa: BLE001 - a failed snapshot must never stop the node
            log.exception("snapshot failed")
        finally:
            txn.abort()  # type: ignore[attr-defined]

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
