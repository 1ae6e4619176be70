"""The token-state store: each memory's rerank rows (memledger.recall.late), kept beside the
vector index so a reranked search reads them instead of running the model over its 30
candidates (~2 ms a query instead of ~40 ms, bench/bench_rerank_probe.py).

Derived serving data, never consensus: rebuildable from the projection at any time, and
only ever a cache. `late.sqlite` in the recall folder holds one row per memory:
`(memory_id, model, digest, ntok, states)`, `states` being `ntok` x 128 int8 values and
`digest` a hash of the content they were made from. A row is used only when its `model`
is the reading embedder's (name, version and the row format, `late.FORMAT`), its digest
the content's the reader holds (a projection replaced by another chain's may reuse an
id for other content) and its length matches `ntok`: a row from another model or
content, a torn one or a missing one is recomputed by the caller, never misread. A
damaged file is deleted and made again empty. So no write here needs to be durable: WAL
with `synchronous=NORMAL` (no fsync per commit); what a crash loses is recomputed when
next needed.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memledger.recall import late
from memledger.sqlite_damage import is_damaged, remove_database

log = logging.getLogger("memledger.recall")

FILE = "late.sqlite"
_SCHEMA = ("CREATE TABLE IF NOT EXISTS states (memory_id TEXT PRIMARY KEY, "
           "model TEXT NOT NULL, digest BLOB NOT NULL, ntok INTEGER NOT NULL, "
           "states BLOB NOT NULL)")


def digest(content: str) -> bytes:
    """What a row records of the content it was made from."""
    return hashlib.blake2b(content.encode(), digest_size=16).digest()


class LateStore:
    """Rerank rows by memory id for one model. Thread-safe: each reading thread has its
    own connection (in WAL mode a read never waits for a write), writes share one."""

    def __init__(self, folder: str | Path, model: str) -> None:
        self.path = Path(folder) / FILE
        self.model = model
        self._writer: sqlite3.Connection | None = None
        self._write_lock = threading.Lock()
        self._readers: dict[int, sqlite3.Connection] = {}
        self._readers_lock = threading.Lock()

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                               timeout=5.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)
        return conn

    def _write_conn(self) -> sqlite3.Connection:
        if self._writer is None:
            self._writer = self._connect()
        return self._writer

    def _reader(self) -> sqlite3.Connection:
        me = threading.get_ident()
        with self._readers_lock:
            conn = self._readers.get(me)
            if conn is None:
                conn = self._readers[me] = self._connect()
            return conn

    def close(self) -> None:
        with self._write_lock:
            self._close_connections()

    def _close_connections(self) -> None:
        """Close the writer (the caller holds the write lock) and every reader."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        with self._readers_lock:
            for conn in self._readers.values():
                conn.close()
            self._readers.clear()

    def _damaged(self, exc: sqlite3.DatabaseError, *, write_locked: bool = False) -> bool:
        """True (after starting the file afresh) when `exc` says the file is damaged;
        `write_locked` from a thread that already holds the write lock."""
        if not is_damaged(exc):
            return False
        log.warning("token-state store %s is damaged (%s): starting it afresh", self.path,
                    exc)
        if write_locked:
            self._close_connections()
        else:
            self.close()
        remove_database(self.path)
        return True

    # ------------------------------------------------------------------ rows
    def get(self, items: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        """int8 [ntok, AXES] rows of the given (memory id, content) pairs that hold this
        model's rows of this content; the others (missing, another model's or content's,
        torn) are left out, for the caller to make."""
        if not items:
            return {}
        wanted = {m: digest(c) for m, c in items}
        memory_ids = list(wanted)
        try:
            rows = []
            for i in range(0, len(memory_ids), 500):
                chunk = list(memory_ids[i:i + 500])
                marks = ",".join("?" * len(chunk))
                rows += self._reader().execute(
                    f"SELECT memory_id, digest, ntok, states FROM states WHERE model = ? AND "
                    f"memory_id IN ({marks})", [self.model, *chunk]).fetchall()
        except sqlite3.DatabaseError as exc:
            if self._damaged(exc):
                return {}
            raise
        out: dict[str, np.ndarray] = {}
        for memory_id, made_from, ntok, blob in rows:
            if made_from == wanted.get(memory_id) and ntok > 0 and \
                    len(blob) == ntok * late.AXES:
                out[str(memory_id)] = np.frombuffer(blob, dtype=np.int8).reshape(
                    ntok, late.AXES)
        return out

    def put(self, items: Sequence[tuple[str, str, np.ndarray]]) -> None:
        """Store (memory id, content, its int8 rows) for this model, replacing any row the
        ids had: one transaction. A write that fails (a busy or damaged file) is logged and
        dropped: the rows are made again when next needed."""
        if not items:
            return
        params = [(mid, self.model, digest(content), int(rows.shape[0]),
                   np.ascontiguousarray(rows, dtype=np.int8).tobytes())
                  for mid, content, rows in items]
        with self._write_lock:
            try:
                conn = self._write_conn()
                conn.execute("BEGIN")
                try:
                    conn.executemany("INSERT OR REPLACE INTO states (memory_id, model, "
                                     "digest, ntok, states) VALUES (?, ?, ?, ?, ?)", params)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if not self._damaged(exc, write_locked=True):
                    log.warning("token-state store %s: %d rows not written (%s)",
                                self.path, len(items), exc)

    def count(self) -> int:
        """Rows held for this model."""
        return int(self._reader().execute("SELECT COUNT(*) FROM states WHERE model = ?",
                                          [self.model]).fetchone()[0])

    def disk_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            path = self.path.with_name(self.path.name + suffix)
            if path.exists():
                total += path.stat().st_size
        return total
