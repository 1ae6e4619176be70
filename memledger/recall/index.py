"""The vector index: usearch HNSW over int8-quantised unit vectors, persisted beside the
projection and tagged with the embedder that built it.

Files in the index folder (HOME/data/recall/ for a node):

- `meta.json`: format, embedder (name, version, dim), quantisation, `indexed_height`,
  count, and the name of the vectors file it vouches for. Written last, atomically
  (write + fsync + rename): it is the commit point.
- `vectors-<generation>.usearch`: the HNSW graph and vectors. A save writes a new
  generation and only then moves `meta.json` to it, so a crash at any point leaves a
  meta that names a complete file holding exactly the memories up to its
  `indexed_height` (never one claiming memories it lacks); older generations are
  removed after the switch.
- `keys.sqlite`: vector key -> memory id. Keys are the first 63 bits of BLAKE2b(id), so
  the same memory has the same key on every backend and after any rebuild. This map is
  written before the vectors it serves; extra rows are harmless, fewer rows than the
  saved vectors (a lost map) rebuild the index at open, and so does a damaged map
  (SQLite finds it malformed or not a database), deleted and made again first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memledger.durable import write_atomic
from memledger.recall.embedder import Embedder, TokenStates
from memledger.sqlite_damage import is_damaged, remove_database
from memledger.sqlite_uri import readonly_uri

FORMAT = 2
#: keep_states(memory ids, their texts, their token states): where `add` hands the token
#: states of the memories it embeds (the rerank store, memledger.recall.rerank)
KeepStates = Callable[[Sequence[str], Sequence[str], Sequence[TokenStates]], None]
DTYPE = "i8"
#: Graph degree. 6 keeps a 1M-memory index at 128 dims in ~270 MB of RSS (16 took
#: ~520 MB at 256 dims); the wider search below buys back most of the lost ANN recall
#: (BENCHMARKS.md section 9). Recorded in meta.json: a change forces a rebuild.
CONNECTIVITY = 6
#: insertions per lock hold while following (see add)
ADD_CHUNK = 8
EXPANSION_ADD = 64
EXPANSION_SEARCH = 200


def memory_key(memory_id: str) -> int:
    """Stable 63-bit vector key of a memory id."""
    digest = hashlib.blake2b(memory_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << 63) - 1)


@dataclass
class IndexMeta:
    format: int
    embedder: str
    embedder_version: str
    dim: int
    dtype: str
    connectivity: int
    indexed_height: int
    count: int
    generation: int
    vectors_file: str

    def matches(self, embedder: Embedder) -> bool:
        return (self.format == FORMAT and self.embedder == embedder.name
                and self.embedder_version == embedder.version and self.dim == embedder.dim
                and self.dtype == DTYPE and self.connectivity == CONNECTIVITY)


class VectorIndex:
    """One node's vector index; thread-safe (searches share a lock with writers)."""

    def __init__(self, folder: str | os.PathLike[str], embedder: Embedder) -> None:
        self.folder = Path(folder)
        self.embedder = embedder
        self.lock = threading.RLock()
        self.meta = self._empty_meta(0)
        self._index = self._new_index()
        self._keys: sqlite3.Connection | None = None  # the writer's connection
        self._keys_lock = threading.Lock()
        # Readers get their own connections (one per thread): in WAL mode a read never
        # waits for the writer's commit, whose fsync took 10-30 ms under load and, behind
        # a shared connection's lock, was the slowest part of the slowest searches.
        self._readers: dict[int, sqlite3.Connection] = {}
        self._readers_lock = threading.Lock()
        self.rebuilt_reason: str | None = None
        #: given the token states of the memories `add` embeds, from the same encoder
        #: pass, when the embedder has them (the rerank store: memledger.recall.rerank)
        self.keep_states: KeepStates | None = None

    # ---------------------------------------------------------------- lifecycle
    def _empty_meta(self, generation: int) -> IndexMeta:
        e = self.embedder
        return IndexMeta(FORMAT, e.name, e.version, e.dim, DTYPE, CONNECTIVITY, 0, 0,
                         generation, "")

    def _new_index(self) -> Any:
        from usearch.index import Index

        return Index(ndim=self.embedder.dim, metric="cos", dtype=DTYPE,
                     connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD,
                     expansion_search=EXPANSION_SEARCH)

    @property
    def meta_file(self) -> Path:
        return self.folder / "meta.json"

    def open(self) -> str | None:
        """Load the persisted index. Returns why it must be rebuilt from height 0 (missing,
        unreadable, other model), or None when it was loaded and can be caught up."""
        self.folder.mkdir(parents=True, exist_ok=True)
        damaged = self._open_keys()
        reason = self._load()
        reason = damaged or reason  # the generation read by _load is kept all the same
        if reason is not None:
            with self.lock:
                generation = self.meta.generation
                self.meta = self._empty_meta(generation)
                self._index = self._new_index()
        self.rebuilt_reason = reason
        return reason

    @property
    def keys_file(self) -> Path:
        return self.folder / "keys.sqlite"

    def _open_keys(self) -> str | None:
        """Open the key map. A damaged one (truncated, overwritten) is deleted and made
        again empty, and the reason returned: the index is rebuilt, as for a lost map."""
        try:
            self._connect_keys()
            self._keys_held()  # reads the table: damage shows here or in the PRAGMA
            return None
        except sqlite3.DatabaseError as exc:
            if not is_damaged(exc):
                raise
            self.close()
            remove_database(self.keys_file)
            self._connect_keys()
            return f"unreadable key map: {exc}"

    def _connect_keys(self) -> None:
        self._keys = sqlite3.connect(self.keys_file, check_same_thread=False,
                                     isolation_level=None)
        self._keys.execute("PRAGMA journal_mode=WAL")
        self._keys.execute("CREATE TABLE IF NOT EXISTS keys (key INTEGER PRIMARY KEY, "
                           "id TEXT NOT NULL)")

    def _load(self) -> str | None:
        if not self.meta_file.exists():
            return "missing"
        try:
            data = json.loads(self.meta_file.read_text())
            if isinstance(data, dict) and data.get("format") != FORMAT:
                if isinstance(data.get("generation"), int):
                    self.meta.generation = data["generation"]
                return f"index format {data.get('format')}, this node writes format {FORMAT}"
            meta = IndexMeta(**data)
        except (OSError, ValueError, TypeError) as exc:
            return f"unreadable meta: {exc}"
        self.meta.generation = meta.generation
        if not meta.matches(self.embedder):
            return (f"built by {meta.embedder} {meta.embedder_version} ({meta.dim}-dim "
                    f"{meta.dtype}, connectivity {meta.connectivity}, format {meta.format}), "
                    f"configured {self.embedder.name} {self.embedder.version}")
        path = self.folder / meta.vectors_file
        if not path.exists():
            return f"missing vectors file {meta.vectors_file}"
        index = self._new_index()
        try:
            index.load(str(path))
        except Exception as exc:  # noqa: BLE001 - any load failure means rebuild
            return f"unreadable vectors file: {exc}"
        if len(index) != meta.count:
            return f"vectors file holds {len(index)} vectors, meta says {meta.count}"
        keys = self._keys_held()
        if keys < meta.count:  # the map lost (deleted, or its WAL gone): hits unnamed
            return f"key map holds {keys} keys, meta says {meta.count} vectors"
        with self.lock:
            self._index, self.meta = index, meta
        return None

    def _keys_held(self) -> int:
        """Rows in the key map. It is written before the vectors it serves and never
        pruned, so it holds at least one row per saved vector; fewer means it was lost."""
        assert self._keys is not None
        with self._keys_lock:
            return int(self._keys.execute("SELECT COUNT(*) FROM keys").fetchone()[0])

    def reset(self) -> None:
        """Forget every vector (a rebuild follows); files change at the next save."""
        with self.lock:
            self._index = self._new_index()
            self.meta = self._empty_meta(self.meta.generation)

    def close(self) -> None:
        with self._keys_lock:
            if self._keys is not None:
                self._keys.close()
                self._keys = None
        with self._readers_lock:
            for conn in self._readers.values():
                conn.close()
            self._readers.clear()

    # ---------------------------------------------------------------- writes
    def add(self, items: Sequence[tuple[str, str]], height: int, threads: int = 1,
            known: Mapping[str, np.ndarray] | None = None,
            timed: Callable[[float, int], None] | None = None) -> int:
        """Embed and add (memory id, text) pairs, then advance the watermark to `height`.
        A memory already present is replaced (content never changes, so this is rare).
        `known`: vectors already embedded for some of the ids (by a search), used as is.
        The token states of the memories embedded here go to `keep_states` when set.
        `timed(seconds, count)`: told how long embedding the `count` new ones took."""
        if items:
            started = time.monotonic()
            vectors = self._vectors(items, threads, known or {}, self.keep_states)
            if timed is not None:
                timed(time.monotonic() - started,
                      sum(1 for mid, _ in items if known is None or mid not in known))
            keys = np.array([memory_key(mid) for mid, _ in items], dtype=np.uint64)
            assert self._keys is not None
            with self._keys_lock:
                # one transaction (one fsync) per batch: in autocommit mode executemany
                # commits, and syncs, every row (it was 80% of a rebuild's time)
                self._keys.execute("BEGIN")
                try:
                    self._keys.executemany(
                        "INSERT OR REPLACE INTO keys (key, id) VALUES (?, ?)",
                        [(int(k), mid) for k, (mid, _) in zip(keys, items, strict=True)])
                except BaseException:
                    self._keys.execute("ROLLBACK")
                    raise
                self._keys.execute("COMMIT")
            # While following (one thread), insert a few at a time: a search waits for the
            # lock, and a whole block's insertions at this thread's low priority held it
            # for 10-30 ms (the slowest hybrid queries at 200k under writes). A build
            # (many threads) inserts its batch in one call.
            step = ADD_CHUNK if threads == 1 else len(keys)
            for start in range(0, len(keys), step):
                part = keys[start:start + step]
                with self.lock:
                    present = [k for k in part.tolist() if self._index.contains(k)]
                    if present:
                        self._index.remove(present)
                    self._index.add(part, vectors[start:start + step], threads=threads)
                if step < len(keys):
                    time.sleep(0)  # let a waiting search take the lock: Python's lock is
                    # not fair, and this thread would otherwise take it straight back
        with self.lock:
            self.meta.indexed_height = max(self.meta.indexed_height, height)
            self.meta.count = len(self._index)
        return len(items)

    def _vectors(self, items: Sequence[tuple[str, str]], threads: int,
                 known: Mapping[str, np.ndarray],
                 keep_states: KeepStates | None = None) -> np.ndarray:
        """Each item's vector: `known`'s when it has one, else embedded (all in one call;
        with their token states to `keep_states`, when given and the embedder has them)."""
        vectors = np.empty((len(items), self.embedder.dim), dtype=np.float32)
        todo = [i for i, (mid, _) in enumerate(items) if mid not in known]
        texts = [items[i][1] for i in todo]
        if todo and keep_states is not None and getattr(self.embedder, "token_states", False):
            vectors[todo], states = self.embedder.embed_with_states(texts, threads=threads)
            keep_states([items[i][0] for i in todo], texts, states)
        elif todo:
            vectors[todo] = self.embedder.embed(texts, threads=threads)
        for i, (mid, _) in enumerate(items):
            if mid in known:
                vectors[i] = known[mid]
        return vectors

    def remove(self, memory_ids: Iterable[str]) -> None:
        keys = [memory_key(m) for m in memory_ids]
        with self.lock:
            present = [k for k in keys if self._index.contains(k)]
            if present:
                self._index.remove(present)
            self.meta.count = len(self._index)

    def save(self) -> None:
        """Persist a new generation, then switch meta.json to it (the commit point)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.lock:
            generation = self.meta.generation + 1
            name = f"vectors-{generation}.usearch"
            path = self.folder / name
            self._index.save(str(path))
            meta = IndexMeta(**{**asdict(self.meta), "generation": generation,
                                "vectors_file": name, "count": len(self._index)})
        with open(path, "rb") as fh:
            os.fsync(fh.fileno())
        write_atomic(self.meta_file, json.dumps(asdict(meta), indent=1))
        with self.lock:
            self.meta.generation, self.meta.vectors_file = generation, name
        for old in self.folder.glob("vectors-*.usearch"):
            if old.name != name:
                with contextlib.suppress(OSError):
                    old.unlink()

    # ---------------------------------------------------------------- reads
    def __len__(self) -> int:
        return len(self._index)

    def search(self, query: np.ndarray, count: int) -> list[tuple[str, float]]:
        """Nearest memories to a unit query vector: (memory id, cosine similarity)."""
        with self.lock:
            size = len(self._index)
            if size == 0 or count <= 0:
                return []
            matches = self._index.search(query, min(count, size), threads=1)
            keys = [int(k) for k in matches.keys]
            dists = [float(d) for d in matches.distances]
        ids = self.ids_for(keys)
        return [(ids[k], 1.0 - d) for k, d in zip(keys, dists, strict=True) if k in ids]

    def similarities(self, query: np.ndarray, memory_ids: Sequence[str]) -> dict[str, float]:
        """Exact cosine of the query to each given memory that the index holds (the
        stored, quantised vectors): the pre-filtered path for narrow filters."""
        keys = np.array([memory_key(m) for m in memory_ids], dtype=np.uint64)
        if not len(keys):
            return {}
        with self.lock:  # one call for all keys: a call per key was most of a 20k check
            have = keys[np.asarray(self._index.contains(keys), dtype=bool).reshape(-1)]
            if not len(have):
                return {}
            vectors = np.asarray(self._index.get(have, dtype=np.float32), dtype=np.float32)
        vectors = vectors.reshape(len(have), -1)
        norms = np.linalg.norm(vectors, axis=1)
        norms[norms == 0] = 1.0
        sims = (vectors @ query) / norms
        by_key = dict(zip(have.tolist(), sims.tolist(), strict=True))
        out: dict[str, float] = {}
        for mid, k in zip(memory_ids, keys.tolist(), strict=True):
            if k in by_key:
                out[mid] = float(by_key[k])
        return out

    def _reader(self) -> sqlite3.Connection:
        """This thread's read-only connection to the key map."""
        me = threading.get_ident()
        with self._readers_lock:
            conn = self._readers.get(me)
            if conn is None:
                conn = sqlite3.connect(readonly_uri(self.keys_file), uri=True,
                                       check_same_thread=False)
                self._readers[me] = conn
            return conn

    def ids_for(self, keys: Sequence[int]) -> dict[int, str]:
        if not keys or self._keys is None:
            return {}
        out: dict[int, str] = {}
        for i in range(0, len(keys), 500):
            chunk = list(keys[i:i + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._reader().execute(
                f"SELECT key, id FROM keys WHERE key IN ({marks})", chunk).fetchall()
            for key, mid in rows:
                out[int(key)] = str(mid)
        return out

    def memory_bytes(self) -> int:
        with self.lock:
            return int(self._index.memory_usage)

    def disk_bytes(self) -> int:
        total = 0
        for path in self.folder.glob("*"):
            with contextlib.suppress(OSError):
                total += path.stat().st_size
        return total
