"""LMDB layout of the canonical store: sub-databases, meta keys, errors, row helpers.

Shared by the store (`state.py`), its read view (`snapshot.py`), block overlays
(`overlay.py`) and out-of-block fills (`fill.py`); see `state.py` for the layout itself.
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Callable, Iterable
from typing import Any

import lmdb

from memledger.protocol.commitment import MerkleTree, bucket_hash

DEFAULT_MAP_SIZE = 64 << 30
#: LMDB's default key limit is 511 bytes and hidx keys carry a 2-byte bucket prefix.
MAX_KEY_LEN = 509
SCHEMA_VERSION = 1
U64_MAX = (1 << 64) - 1

_DB_DATA = b"data"
_DB_HIDX = b"hidx"
_DB_TREE = b"tree"
_DB_META = b"meta"
M_HEIGHT = b"height"
M_APP_HASH = b"app_hash"
M_APP_VERSION = b"app_version"
M_SCHEMA = b"schema"
M_LOADING = b"loading"
M_RESTORING = b"restoring"
#: A state-sync restore finished here, and no block has committed on top of it yet: until
#: one does, CometBFT may not have saved its own state at that height (a stop in between
#: leaves it with none, and it state-syncs again), so the restore may be redone.
M_RESTORED = b"restored_unconfirmed"
#: The committed state's bucket-hash layout (commitment.LAYOUTS); absent means 1, the
#: only layout before app version 6.
M_LAYOUT = b"hash_layout"
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


def u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


#: A tree node's key: its heap index as 4 big-endian bytes (a C call: ~2,000 per block).
node_key: Callable[[int], bytes] = struct.Struct(">I").pack


def user_meta_key(name: str) -> bytes:
    if not isinstance(name, str) or not name:
        raise ValueError("meta name must be a non-empty str")
    return _M_USER + name.encode("utf-8")


def check_key(key: bytes) -> None:
    if type(key) is not bytes:
        raise TypeError("keys must be bytes")
    if not 1 <= len(key) <= MAX_KEY_LEN:
        raise ValueError(f"key length must be 1..{MAX_KEY_LEN}, got {len(key)}")


def check_record(key: bytes, value: bytes) -> None:
    check_key(key)
    if type(value) is not bytes:
        raise TypeError("values must be bytes")


ALL_DBS = (_DB_DATA, _DB_HIDX, _DB_TREE, _DB_META)


def write_rows(txn: lmdb.Transaction, db: Any, rows: Iterable[tuple[bytes, bytes | None]]) -> None:
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


def layout_of(txn: lmdb.Transaction, meta: Any) -> int:
    """The bucket-hash layout of the state a transaction sees."""
    raw = txn.get(M_LAYOUT, db=meta)
    return 1 if raw is None else int.from_bytes(raw, "big")


def leaves_from_hidx(txn: lmdb.Transaction, hidx: Any, layout: int,
                      skip: frozenset[int] = frozenset()) -> dict[int, bytes]:
    """Stream hidx in (bucket, key) order and hash every bucket not in `skip`."""
    leaves: dict[int, bytes] = {}

    def close(pfx: bytes | None, entries: list[tuple[bytes, bytes]]) -> None:
        if pfx is not None and int.from_bytes(pfx, "big") not in skip:
            leaves[int.from_bytes(pfx, "big")] = bucket_hash(entries, layout)

    cur_pfx: bytes | None = None
    entries: list[tuple[bytes, bytes]] = []
    for k, v in txn.cursor(db=hidx).iternext():
        pfx = k[:2]
        if pfx != cur_pfx:
            close(cur_pfx, entries)
            cur_pfx, entries = pfx, []
        entries.append((k[2:], v))
    close(cur_pfx, entries)
    return leaves


def tree_from_hidx(txn: lmdb.Transaction, hidx: Any, layout: int) -> MerkleTree:
    """The from-scratch tree of everything in hidx, under `layout`."""
    return MerkleTree.from_leaves(leaves_from_hidx(txn, hidx, layout))


def take_writer_lock(path: str) -> int:
    """Exclusive flock so two writers (processes or stores) never share one directory."""
    fd = os.open(os.path.join(path, _WRITER_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"{path}: another writer holds the store") from exc
    return fd
