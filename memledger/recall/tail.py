"""The tail: memories committed above the vector index's watermark, embedded by a static
model as they arrive, so that a search can find them by meaning while the index's
follower is behind.

The default embedder costs ~1.7 ms of CPU per memory, so on two cores its follower
takes ~300-400 new memories/s while a node commits up to ~1,000/s (BENCHMARKS.md §9,
"Ingest"). Under such load the vector index falls behind without bound, and before the
tail only the newest 128 memories above its watermark were searched by meaning. A static
model (WordLlama, ~30 µs a memory) follows any commit rate this machine reaches. Its
vectors are weaker and live in another space, so they only *pick* which tail memories a
search should look at (memledger.recall.indexer, `tail_picks`); the search then embeds
those few with the index's own model and ranks them like any other hit.

Nothing here is persisted: at start the tail follows from the index's watermark, and it
holds only what the index still lacks (memories at or below the watermark are dropped as
the index passes them). It is held in runs of rows, merged as they grow, and replaced
whole, never changed in place: a search reads a snapshot while the follower appends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy.engine import Engine

from memledger.protocol.sealed import is_sealed
from memledger.recall.embedder import Embedder
from memledger.recall.follow import FollowerThread, Following, new_memories, projection_height

log = logging.getLogger("memledger.recall")

#: the static model that embeds the tail (`memledger.recall.embedder` spec)
TAIL_EMBEDDER = "wordllama:128"
#: At most this many memories are held (512 B each at 128 dimensions: 256 MB). Beyond,
#: the oldest are dropped first: the index reaches those soonest.
TAIL_CAP = 500_000


@dataclass(frozen=True)
class Run:
    """Consecutive tail memories in (height, id) order, with their static vectors."""

    ids: tuple[str, ...]
    heights: np.ndarray  # int64, one per id
    vectors: np.ndarray  # float32 [len(ids), dim], unit rows

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def top(self) -> int:
        """The highest height in the run (0 for an empty one)."""
        return int(self.heights[-1]) if len(self.ids) else 0


def joined(first: Run, second: Run) -> Run:
    """One run holding `first`'s rows and then `second`'s."""
    return Run(first.ids + second.ids, np.concatenate([first.heights, second.heights]),
               np.concatenate([first.vectors, second.vectors]))


def appended(runs: tuple[Run, ...], run: Run) -> tuple[Run, ...]:
    """`runs` with `run` added at the end, the last runs merged while the one before is
    at most twice the size of the one after: sizes then halve at least every second run,
    so a tail of n memories is O(log n) runs (one matrix product each per search), and
    each row is copied O(log n) times in all."""
    out = [*runs, run]
    while len(out) >= 2 and len(out[-2]) <= 2 * len(out[-1]):
        last = out.pop()
        out[-1] = joined(out[-1], last)
    return tuple(out)


def pruned(runs: tuple[Run, ...], watermark: int, cap: int) -> tuple[tuple[Run, ...], int]:
    """`runs` without the rows at or below `watermark` (the index has them; a run that
    straddles it is kept whole, its older rows masked by every search), and without the
    oldest rows while more than `cap` remain above it. Also returns the height through
    which rows were dropped for room (0 when none was): memories from the watermark up
    to it are in neither the index nor the tail."""
    kept = [r for r in runs if r.top > watermark]
    excess = _above(kept, watermark) - cap
    dropped_through = 0
    while excess > 0 and kept:
        first = kept[0]
        below = int(np.count_nonzero(first.heights <= watermark))  # masked, not counted
        if len(first) - below <= excess:
            kept.pop(0)
            excess -= len(first) - below
            dropped_through = max(dropped_through, first.top)
            continue
        cut = below + excess  # the masked rows and the oldest `excess` above them go
        dropped_through = max(dropped_through, int(first.heights[cut - 1]))
        kept[0] = Run(first.ids[cut:], first.heights[cut:].copy(),
                      first.vectors[cut:].copy())
        excess = 0
    return tuple(kept), dropped_through


def _above(runs: Sequence[Run], watermark: int) -> int:
    return sum(int(np.count_nonzero(r.heights > watermark)) for r in runs)


def nearest(runs: tuple[Run, ...], query: np.ndarray, lo: int, hi: int, count: int
            ) -> list[tuple[str, float]]:
    """The `count` rows nearest to the unit `query` among those with `lo < height <=
    hi`, best first (ties by id)."""
    found: list[tuple[str, float]] = []
    for run in runs:
        if not len(run) or run.top <= lo or int(run.heights[0]) > hi:
            continue
        scores = run.vectors @ query
        scores[(run.heights <= lo) | (run.heights > hi)] = -np.inf
        take = min(count, len(run))
        best = np.argpartition(-scores, take - 1)[:take] if take < len(run) \
            else np.arange(len(run))
        found += [(run.ids[i], float(scores[i])) for i in best if scores[i] > -np.inf]
    found.sort(key=lambda kv: (-kv[1], kv[0]))
    return found[:count]


@dataclass
class TailStatus:
    embedder: str
    memories: int  # rows held above the index's watermark
    covered_height: int  # every memory up to here is in the index or the tail
    memory_bytes: int


class Tail(Following):
    """Follows the projection from the vector index's watermark with a static model."""

    def __init__(self, engine: Engine, embedder: Embedder, watermark: Callable[[], int],
                 serving: Callable[[], bool] = lambda: True, poll_s: float = 0.2,
                 cap: int = TAIL_CAP) -> None:
        self.engine = engine
        self.embedder = embedder
        self._watermark = watermark
        #: whether the index serves searches: not while it is built from scratch, when
        #: it is nowhere near the projection and no search asks the tail
        self._serving = serving
        self.poll_s = poll_s
        self.cap = cap
        self.runs: tuple[Run, ...] = ()
        #: the last projection height whose memories the tail has read
        self.height = 0
        #: memories up to this height were dropped for room (TAIL_CAP) before the index
        #: reached them
        self.dropped_through = 0
        self._follower: FollowerThread | None = None

    def catch_up(self) -> int:
        """Embed every memory the projection holds above what the tail and the index
        have; drop what the index has passed. Returns rows added."""
        if not self._serving():
            self.runs, self.height, self.dropped_through = (), 0, 0
            return 0
        watermark = self._watermark()
        added = 0
        with self.engine.connect() as conn:
            hi = projection_height(conn)
            if hi < self.height:  # the projection went back: start again from the index
                self.runs, self.height, self.dropped_through = (), 0, 0
            lo = max(self.height, watermark)
            for rows, mark in new_memories(conn, lo, hi):
                kept = [r for r in rows if not is_sealed(r.content)]  # never embedded
                if kept:
                    vectors = self.embedder.embed([str(r.content) for r in kept])
                    self.runs = appended(self.runs, Run(
                        tuple(str(r.id) for r in kept),
                        np.fromiter((int(r.submitted_height) for r in kept), np.int64,
                                    len(kept)), vectors))
                    added += len(kept)
                self.height = mark
                self._prune()
            self.height = max(self.height, hi)
        self._prune()
        return added

    def _prune(self) -> None:
        watermark = self._watermark()
        self.runs, dropped = pruned(self.runs, watermark, self.cap)
        if dropped:
            if self.dropped_through <= watermark:  # once per gap, not per step
                log.warning("recall tail full (%d memories): memories from height %d "
                            "wait for the vector index", self.cap, watermark + 1)
            self.dropped_through = max(self.dropped_through, dropped)

    def nearest(self, text: str, lo: int, hi: int, count: int) -> list[tuple[str, float]]:
        """The tail memories nearest to `text` among those with `lo < height <= hi`."""
        runs = self.runs  # one snapshot for the whole search
        if not runs:
            return []
        return nearest(runs, self.embedder.embed([text])[0], lo, hi, count)

    def __len__(self) -> int:
        return _above(self.runs, self._watermark())

    def covered_height(self, watermark: int) -> int:
        """The last height whose memories are all in the index (at `watermark`) or the
        tail: the tail's height, unless the cap dropped some the index lacks."""
        if self.dropped_through > watermark:
            return watermark
        return max(watermark, self.height)

    def status(self) -> TailStatus:
        runs = self.runs
        watermark = self._watermark()
        return TailStatus(embedder=self.embedder.name, memories=_above(runs, watermark),
                          covered_height=self.covered_height(watermark),
                          memory_bytes=sum(r.vectors.nbytes + r.heights.nbytes for r in runs))

    def start(self) -> Tail:
        """Follow in a daemon thread at the followers' priority: it costs ~30 µs a memory,
        so it keeps up even where the index's follower, beside it, cannot."""
        self._follower = FollowerThread("recall-tail", self._step, self.poll_s).start()
        return self

    def _step(self) -> bool:
        return self.catch_up() == 0

    def stop(self) -> None:
        if self._follower is not None:
            self._follower.stop()
