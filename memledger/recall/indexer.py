"""The follower that feeds the vector index from the SQL projection, after Commit.

It never runs inside Commit: it reads what the projection already made durable, so
Commit's cost does not change, and embeddings never touch consensus. Its watermark,
`indexed_height`, is the last projection height whose memories are all in the index;
reads report it (and the lag behind the projection) in /v1/status and /metrics.

A memory's content is written once, in the block that submits it, so the memories to add
between two watermarks are exactly those with `lo < submitted_height <= hi`, read in
(height, id) order a chunk at a time. Status changes need no index work: every search
filters its candidates against the projection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memledger.projection.schema import memories
from memledger.protocol.sealed import is_sealed
from memledger.recall.embedder import Embedder
from memledger.recall.follow import (
    FollowerThread,
    Following,
    new_memories,
    projection_height,
    submitted_between,
)
from memledger.recall.index import VectorIndex
from memledger.recall.rerank import Reranker, supports
from memledger.recall.tail import Tail, TailStatus

log = logging.getLogger("memledger.recall")

#: While following, the index is saved when this much time or this many additions have
#: gone unsaved (and always at stop and after a rebuild). A save writes the whole graph
#: (~240 MB at 1M memories) and holds the interpreter for it (~0.4 s at 1M: usearch does
#: not release the GIL), stalling every search in the process; saving after every block
#: put that stall into the p99. A crash loses nothing: a restart re-adds what the saved
#: watermark lacks.
SAVE_EVERY_S = 300.0
SAVE_EVERY_ADDS = 50_000

#: A search ranks at most this many of the newest memories above the watermark itself,
#: so a memory is found by meaning as soon as it is committed, not once the follower
#: reaches it (a writer that recalls what it just wrote). Further behind than that, the
#: older ones wait for the follower; /v1/status shows the lag.
UNINDEXED_CAP = 128
#: The embedding time one search may spend on them. A search embeds the ones no search
#: embedded yet only when all of them fit within it, at the time per memory measured
#: here: a static model embeds 128 in ~2 ms; a transformer one or two (a quiet node, a
#: writer that recalls what it wrote). When they do not fit, the search embeds none: it
#: ranks those already embedded and wakes the follower, which embeds the rest (~170 ms
#: for a block of 100). Searches that each embedded a few within this budget put the
#: follower's work into the p99 of searches under steady writes (hybrid at 1M on
#: PostgreSQL: 19-30 ms that way, 8-13 ms this way; BENCHMARKS.md §9, "Reads at
#: background priority, and read-your-writes that never waits").
UNINDEXED_BUDGET_S = 0.005
#: Further behind than TAIL_AFTER memories, the tail (memledger.recall.tail) picks the
#: memories a search looks at: its TAIL_POOL nearest by the static model, the first
#: TAIL_PICKS of them the search's filter passes, embedded by the index's model (best
#: first) within TAIL_BUDGET_S, at least one. Only while the follower is that far behind:
#: a follower a block or two behind (~100-300 memories under 100 writes/s at 1M) gets
#: there within a second, and picks would add up to TAIL_BUDGET_S to every search
#: meanwhile. Under a load the follower cannot take, the lag passes 1,000 within a
#: second or two of it.
TAIL_AFTER = 1_000
TAIL_POOL = 64
TAIL_PICKS = 8
TAIL_BUDGET_S = 0.010


@dataclass
class IndexerStatus:
    embedder: str
    embedder_version: str
    dim: int
    indexed_height: int
    projection_height: int
    count: int
    memory_bytes: int
    disk_bytes: int
    rebuilt_reason: str | None
    state: str  # "building", "following", "stopped"
    tail: TailStatus | None = None

    @property
    def lag(self) -> int:
        return max(0, self.projection_height - self.indexed_height)

    @property
    def covered_lag(self) -> int:
        """Blocks whose memories are in neither the index nor the tail: how far behind
        recall by meaning is (the index's lag when there is no tail)."""
        covered = self.tail.covered_height if self.tail is not None else self.indexed_height
        return max(0, self.projection_height - max(covered, self.indexed_height))


class Indexer(Following):
    """Owns a VectorIndex and keeps it at the projection's height."""

    def __init__(self, engine: Engine, index: VectorIndex, poll_s: float = 0.2,
                 store_token_states: bool = True, tail_embedder: Embedder | None = None
                 ) -> None:
        self.engine = engine
        self.index = index
        #: searches that asked the tail for picks (the follower was far behind)
        self.tail_searches = 0
        #: memories above the watermark, embedded by a static model as they commit, for
        #: searches while the follower is behind (None: only the newest UNINDEXED_CAP)
        self.tail = Tail(engine, tail_embedder, lambda: self.index.meta.indexed_height,
                         lambda: self.state != "building", poll_s) \
            if tail_embedder is not None else None
        #: the rerank stage, for embedders with token states. With `store_token_states`
        #: the follower stores each memory's rerank rows from the pass that makes its
        #: vector; without, a reranked search computes (and keeps) the rows it lacks
        self.late = Reranker(index.embedder, index.folder) if supports(index.embedder) \
            else None
        if self.late is not None and store_token_states:
            index.keep_states = self.late.keep
        self.poll_s = poll_s
        self.projection_height = 0
        self.state = "stopped"
        self._follower: FollowerThread | None = None
        self._last_save = time.monotonic()
        self._unsaved = 0
        self._building = False  # a build is under way, to be saved when it completes
        # the memories above the watermark that searches embedded, for the next searches
        # and then for the follower (so each is embedded once): (lo, hi, [(id, vector)])
        self._unindexed_lock = threading.Lock()
        self._unindexed: tuple[int, int, list[tuple[str, np.ndarray]]] | None = None
        self._embedded: dict[str, np.ndarray] = {}
        #: seconds to embed one memory, as last measured (the follower's batches and the
        #: searches' own embedding; None until the first): what decides whether the
        #: memories above the watermark fit within a search's budget
        self.seconds_per_memory: float | None = None

    @property
    def embedder(self) -> Embedder:
        return self.index.embedder

    # ---------------------------------------------------------------- one step
    def catch_up(self, limit_rows: int | None = None) -> int:
        """Index every memory up to the projection's current height; returns rows added."""
        added = 0
        with self.engine.connect() as conn:
            hi = projection_height(conn)
            self.projection_height = hi
            lo = self.index.meta.indexed_height
            went_back, state = hi < lo, self.state
            if went_back:
                self._start_over(hi, lo)
                lo = 0
            for rows, mark in new_memories(conn, lo, hi):
                # a (re)build may use every core; following stays on one, and only its
                # time per memory is a search's. Private memories (v10+) hold
                # ciphertext: never embedded
                building = self.state == "building"
                self.index.add([(r.id, r.content) for r in rows if not is_sealed(r.content)],
                               mark, threads=0 if building else 1,
                               known=self._embedded,  # replaced whole, never changed
                               timed=None if building else self._measured)
                added += len(rows)
                self._unsaved += len(rows)
                if limit_rows is not None and added >= limit_rows:
                    break
            if added == 0:
                self.index.add([], hi)  # nothing new up to hi
            if went_back and self.index.meta.indexed_height >= hi:
                self.state = state  # rebuilt up to the projection (else `_step` says so)
        return added

    def _start_over(self, hi: int, lo: int) -> None:
        """The projection went back (rebuilt or replaced) below the watermark `lo`: empty
        the index and rebuild it as a build (every core; not serving the memories above
        its watermark, and /v1/status says "building"). The empty index is saved at
        once: a crash during the rebuild must not reload vectors of another projection
        under the old watermark."""
        log.warning("projection height %d is below the index's %d: rebuilding", hi, lo)
        self.state, self._building = "building", True
        self.index.reset()
        self.index.rebuilt_reason = "projection behind index"
        self.index.save()

    # ---------------------------------------------------------------- read-your-writes
    def unindexed(self, conn: sa.Connection, height: int, since: int | None = None
                  ) -> list[tuple[str, np.ndarray]]:
        """The newest memories (at most UNINDEXED_CAP) committed above the watermark and
        at most at `height` (the projection height the search reads by), with their
        vectors, for a search to rank beside the index's hits. Empty while the index is
        being built from scratch (it is not serving then). `since`: the watermark the
        search read before it searched the index; the follower may have moved it since,
        and the memories it took meanwhile are in neither the hits nor above the new one.

        Embedded here only when every one no search embedded yet fits within
        UNINDEXED_BUDGET_S; otherwise the list holds those already embedded, and the
        follower is woken to embed the rest. A complete list is shared by the searches at
        the same (watermark, height), a later list reuses the vectors it already has, and
        the follower takes them instead of embedding again."""
        lo = self.index.meta.indexed_height if since is None else since
        if self.state == "building" or height <= lo or UNINDEXED_CAP <= 0:
            return []
        with self._unindexed_lock:
            cached, embedded = self._unindexed, self._embedded
        if cached is not None and cached[:2] == (lo, height):
            return cached[2]
        rows = conn.execute(
            sa.select(memories.c.id, memories.c.content).where(submitted_between(lo, height))
            .order_by(memories.c.submitted_height.desc(), memories.c.id.desc())
            .limit(UNINDEXED_CAP)).all()
        need = [(str(r.id), str(r.content)) for r in rows
                if r.id not in embedded and not is_sealed(r.content)]
        fresh: dict[str, np.ndarray] = {}
        if need and self._fits(len(need)):
            fresh = self._embed_within(need, budget_s=None)
        elif need:
            self.wake()
        have = {**embedded, **fresh}
        listed = [(str(r.id), have[r.id]) for r in rows if r.id in have]
        wanted = sum(1 for r in rows if not is_sealed(r.content))
        with self._unindexed_lock:
            if len(listed) == wanted:
                self._unindexed = (lo, height, listed)
            self._remember(fresh)
        return listed

    def _fits(self, count: int) -> bool:
        """Whether embedding `count` memories fits within UNINDEXED_BUDGET_S at the time
        per memory measured so far (before any measure: one)."""
        per = self.seconds_per_memory
        return count <= 1 if per is None else count * per <= UNINDEXED_BUDGET_S

    def _measured(self, seconds: float, count: int) -> None:
        """Fold one measure of embedding `count` memories into `seconds_per_memory` (a
        moving average: a busy moment does not decide for good)."""
        if count <= 0:
            return
        per = seconds / count
        old = self.seconds_per_memory
        self.seconds_per_memory = per if old is None else 0.7 * old + 0.3 * per

    def wake(self) -> None:
        """Have the follower look for new memories now rather than at its next poll."""
        if self._follower is not None:
            self._follower.wake()

    def _remember(self, fresh: dict[str, np.ndarray]) -> None:
        """Keep vectors searches made, for later searches and the follower (call with
        `_unindexed_lock` held). Replaced, never changed in place: the follower may be
        reading the old one; emptied past 4 * UNINDEXED_CAP, which the follower has by
        then taken or will embed itself."""
        kept = self._embedded if len(self._embedded) < 4 * UNINDEXED_CAP else {}
        self._embedded = {**kept, **fresh}

    def tail_picks(self, conn: sa.Connection, text: str, height: int, since: int,
                   keep: Callable[[list[str]], Collection[str]] | None
                   ) -> list[tuple[str, np.ndarray]]:
        """The tail memories (above `since`, at most at `height`) nearest to `text`, with
        vectors from the index's own model, for a search to rank beside its hits: empty
        unless the follower is more than TAIL_AFTER memories behind (nearer, it gets
        there soon, and the newest-first `unindexed` has the newest). `keep(ids)`: the
        ids the search's filter passes."""
        tail = self.tail
        if tail is None or self.state == "building" or height <= since or \
                sum(len(r) for r in tail.runs) <= TAIL_AFTER:
            return []
        self.tail_searches += 1
        near = [m for m, _ in tail.nearest(text, since, height, TAIL_POOL)]
        passing = keep(near) if keep is not None and near else set(near)
        chosen = [m for m in near if m in passing][:TAIL_PICKS]
        with self._unindexed_lock:
            embedded = self._embedded
        need = [m for m in chosen if m not in embedded]
        texts = dict(conn.execute(sa.select(memories.c.id, memories.c.content)
                                  .where(memories.c.id.in_(need))).tuples().all()) \
            if need else {}
        fresh = self._embed_within([(m, str(texts[m])) for m in need if m in texts],
                                   budget_s=TAIL_BUDGET_S)
        with self._unindexed_lock:
            self._remember(fresh)
        have = {**embedded, **fresh}
        return [(m, have[m]) for m in chosen if m in have]

    def _embed_within(self, items: list[tuple[str, str]],
                      budget_s: float | None) -> dict[str, np.ndarray]:
        """Vectors for a prefix of `items`: one text, then twice as many each round while
        the next round, at the time per text so far, still ends within `budget_s` (a
        round that merely starts within it overshot it several times over: at 1M under
        writes on PostgreSQL that took the p99 from 6-10 ms to 23-27 ms). None: all of
        them, in one round."""
        out: dict[str, np.ndarray] = {}
        started, size, at = time.monotonic(), len(items) if budget_s is None else 1, 0
        while at < len(items):
            spent = time.monotonic() - started
            if at and budget_s is not None and \
                    spent + spent / at * min(size, len(items) - at) > budget_s:
                break
            part = items[at:at + size]
            out.update(zip([m for m, _ in part], self.embedder.embed([t for _, t in part]),
                           strict=True))
            at, size = at + len(part), size * 2
        self._measured(time.monotonic() - started, at)
        return out

    def maybe_save(self, force: bool = False) -> bool:
        due = self._unsaved >= SAVE_EVERY_ADDS or \
            (self._unsaved and time.monotonic() - self._last_save >= SAVE_EVERY_S)
        moved = self.index.meta.indexed_height != getattr(self, "_saved_height", -1)
        if force and (self._unsaved or moved) or due:
            self.index.save()
            self._saved_height = self.index.meta.indexed_height
            self._unsaved = 0
            self._last_save = time.monotonic()
            return True
        return False

    def rebuild(self) -> int:
        """Drop the in-memory index and build it again from the projection, then save."""
        self.index.reset()
        total = 0
        self.state = "building"
        while True:
            added = self.catch_up()
            total += added
            if added == 0 or self.index.meta.indexed_height >= self.projection_height:
                break
        self.maybe_save(force=True)
        self.state = "following"
        return total

    # ---------------------------------------------------------------- follower thread
    def start(self) -> None:
        """Open the persisted index (rebuilding when missing, stale or from another model)
        and follow the projection in a daemon thread."""
        reason = self.index.open()
        if reason is not None:
            log.warning("vector index will be rebuilt from the projection: %s", reason)
        self.state = "building" if reason is not None else "following"
        self._building = reason is not None
        self.follow()

    def follow(self) -> None:
        """Follow the projection in a daemon thread, from the index as it stands."""
        self._follower = FollowerThread("recall-indexer", self._step, self.poll_s).start()
        if self.tail is not None:
            self.tail.start()

    def _step(self) -> bool:
        """One round of following; True when caught up (the thread then waits)."""
        added = self.catch_up()
        if added == 0 and self.index.meta.indexed_height >= self.projection_height:
            self.state = "following"
        built = self._building and self.state == "following"
        self.maybe_save(force=built)  # a finished build at once: a crash must not redo it
        self._building = self._building and not built
        return self.state == "following"

    def stop(self) -> None:
        if self.tail is not None:
            self.tail.stop()
        if self._follower is not None:
            self._follower.stop()
        try:
            self.maybe_save(force=True)
        except Exception:  # noqa: BLE001 - best effort at shutdown
            log.exception("saving the vector index at shutdown failed")
        self.index.close()
        if self.late is not None:
            self.late.close()
        self.state = "stopped"

    def wait_caught_up(self, timeout_s: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.engine.connect() as conn:
                hi = projection_height(conn)
            if self.index.meta.indexed_height >= hi and self.state == "following":
                return True
            time.sleep(0.05)
        return False

    def current_height(self) -> int:
        """The projection's height now (one indexed max()), else the height the current
        step began at (an unreadable projection): a step may embed for minutes under a
        burst, and a lag reckoned from its start said the index was caught up."""
        try:
            with self.engine.connect() as conn:
                return projection_height(conn)
        except sa.exc.SQLAlchemyError:
            return self.projection_height

    def status(self, projection_height: int | None = None) -> IndexerStatus:
        """Size, watermark and lag; `projection_height`: the projection's current height
        when the caller has read it, else it is read here."""
        meta = self.index.meta
        height = self.current_height() if projection_height is None else projection_height
        return IndexerStatus(
            embedder=self.embedder.name, embedder_version=self.embedder.version,
            dim=self.embedder.dim, indexed_height=meta.indexed_height,
            projection_height=max(height, meta.indexed_height),
            count=len(self.index), memory_bytes=self.index.memory_bytes(),
            disk_bytes=self.index.disk_bytes(), rebuilt_reason=self.index.rebuilt_reason,
            state=self.state, tail=self.tail.status() if self.tail is not None else None)
