"""Champion lists: the best documents of the words most memories contain, kept ready.

A one-word text search for a word in most memories ("the", a project's own name) is a
scan of that word's whole posting list in the word index: block-max WAND skips a block
only when its best document cannot beat the k-th hit, and for such a word nearly every
block holds a document as good as the best (the scores differ by a few per mille, or
tie). At 1M memories that was ~11 ms of the search, and most of its p99.

For a word in at least LISTED_MIN_DOCS documents, this keeps its CHAMPIONS best
documents by BM25 (term frequency and length; see `bm25`), each with its term count and
length, so such a search ranks ~2,000 documents instead of ~1,000,000:

- **Ready before the first search, or on demand.** The index's follower samples the
  latest memories for such words when it starts (and every RESAMPLE_DOCS documents); a
  search for a common word it missed asks for its list (`wanted`). The follower builds
  lists between blocks (the index's top CHAMPIONS, their rows read from the projection
  and analysed as the index does; ~1 s per list at 1M memories, at its low priority).
  Until a list is built, searches use the index.
- **Kept current.** Every document the follower adds is offered to the lists of the
  words it holds before the index's watermark passes it, so no document is in neither.
  A list never loses a document: memories are not deleted from the word index.
- **Exact enough to serve, and honest about it.** BM25's order for one word depends only
  on term count and length against the average length; the list was cut at the average
  of its build, so when that average has moved by more than REBUILD_DRIFT the list is
  built again. A search ranks the whole list by its current BM25 and takes at most
  CHAMPIONS // 2 of it; deeper (or a filter that leaves too few) goes to the index.
- **Bounded.** At most MAX_LISTS lists (the least recently searched go); ~0.25 MB each.

Serving data only: floats and a lock are fine here, none of this reaches consensus.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memledger.recall.text_index import WordBag, bm25

#: a word is listed when at least this many documents hold it (a scan of fewer postings
#: costs the index ~1 ms; the list would save little)
LISTED_MIN_DOCS = 100_000
#: documents kept per word. A search ranks at most half of them (a first fetch of 2k
#: serves pages up to ~500 deep); deeper pages and widened fetches go to the index
CHAMPIONS = 2048
MAX_LISTS = 64
#: rebuild a list when the average document length has moved this much since its build
REBUILD_DRIFT = 0.02
#: the follower samples this many of the latest memories for common words at its start
#: and again after every RESAMPLE_DOCS documents added
SAMPLE = 2000
RESAMPLE_DOCS = 100_000

#: (memory id, term count, length) of one listed document
Entry = tuple[str, int, int]


@dataclass(frozen=True)
class ChampionList:
    """One word's best documents, best first by BM25 at `average` (the average document
    length when the order was last taken). Immutable: a change publishes a new one, made
    with array operations (the follower offers every block and must not hold the
    interpreter long: searches wait for it)."""

    term: str
    average: float
    ids: tuple[str, ...]
    #: the entries' term counts and lengths (floats, for scoring them all at once)
    counts: np.ndarray
    lengths: np.ndarray
    #: each entry's BM25 weight at `average` (idf left out: one word, one idf), negated:
    #: ascending, so `searchsorted` finds where a new document belongs
    keys: np.ndarray
    held: frozenset[str]

    @property
    def entries(self) -> list[Entry]:
        """(id, term count, length) of each entry, best first: for inspection."""
        return [(m, int(c), int(n)) for m, c, n in
                zip(self.ids, self.counts.tolist(), self.lengths.tolist(), strict=True)]

    def ranked(self, idf: float, average: float, n: int) -> list[tuple[str, float]]:
        """The best `n` entries by BM25 now (`idf` and `average` as the index has them)."""
        scores = bm25(idf, self.counts, self.lengths, average)
        order = np.argsort(-scores, kind="stable")[:n]
        return [(self.ids[i], float(scores[i])) for i in order.tolist()]

    def offered(self, new: Sequence[Entry]) -> ChampionList:
        """This list with the documents of `new` that beat its last one (or fill it);
        itself when none does, as nearly every document of a common word does not."""
        full = len(self.ids) >= CHAMPIONS
        worst = float(self.keys[-1]) if len(self.keys) else 0.0
        better = {}
        for memory_id, count, length in new:
            key = -bm25(1.0, count, length, self.average)
            if memory_id not in self.held and (not full or key < worst):
                better[memory_id] = (count, length, key)
        if not better:
            return self  # replayed documents, or none that makes the list
        ids = self.ids + tuple(better)
        counts = np.concatenate([self.counts, [c for c, _, _ in better.values()]])
        lengths = np.concatenate([self.lengths, [n for _, n, _ in better.values()]])
        keys = np.concatenate([self.keys, [k for _, _, k in better.values()]])
        order = np.argsort(keys, kind="stable")[:CHAMPIONS]
        kept = tuple(ids[i] for i in order.tolist())
        return ChampionList(self.term, self.average, kept, counts[order], lengths[order],
                            keys[order], frozenset(kept))


def make_list(term: str, average: float, entries: Sequence[Entry]) -> ChampionList:
    ranked = sorted(entries, key=lambda e: (-bm25(1.0, e[1], e[2], average), e[0]))
    ranked = ranked[:CHAMPIONS]
    counts = np.array([e[1] for e in ranked], np.float64)
    lengths = np.array([e[2] for e in ranked], np.float64)
    return ChampionList(term, average, tuple(e[0] for e in ranked), counts, lengths,
                        -bm25(1.0, counts, lengths, average), frozenset(e[0] for e in ranked))


class Champions:
    """The champion lists of one word index. Searches read and ask (`serving`) from any
    thread; only the follower builds and offers (`build_next`, `offer`)."""

    def __init__(self) -> None:
        self._lists: dict[str, ChampionList] = {}
        #: words whose list is wanted, in the order to build them (dicts keep order)
        self._asked: dict[str, None] = {}
        self._sampled: dict[str, None] = {}
        self._used: dict[str, int] = {}
        self._clock = 0
        self._lock = threading.Lock()

    def serving(self, term: str, fetch: int, doc_freq: Callable[[str], int]
                ) -> ChampionList | None:
        """`term`'s list when it can answer a search that wants its best `fetch`: a full
        list, and `fetch` at most half of it. Asks for the list when there is none and
        `doc_freq(term)` says the word is common enough."""
        if fetch > CHAMPIONS // 2:
            return None
        found = self._lists.get(term)
        if found is None:
            if doc_freq(term) >= LISTED_MIN_DOCS:
                self.want(term, asked=True)
            return None
        with self._lock:
            self._clock += 1
            self._used[term] = self._clock
        return found if len(found.ids) >= CHAMPIONS else None

    def want(self, term: str, asked: bool = False) -> None:
        """Ask the follower for `term`'s list: a search's asking (`asked`) is built before
        the words sampled from the latest memories."""
        with self._lock:
            if term not in self._lists:
                (self._asked if asked else self._sampled)[term] = None

    def wanted(self) -> list[str]:
        with self._lock:
            return list(dict.fromkeys([*self._asked, *self._sampled]))

    # ------------------------------------------------------------ the follower's side
    def build_next(self, average: float, top: Callable[[str], Sequence[Entry]]) -> bool:
        """Build one list: the next wanted, else one cut at an average that has drifted
        by more than REBUILD_DRIFT. One per call, so that the follower goes back to new
        blocks between lists (~1 s each at 1M). `top(term)` gives the index's best
        CHAMPIONS documents for the term with their counts. True when one was built."""
        with self._lock:
            queue = self._asked or self._sampled
            term = next(iter(queue), None)
            if term is not None:
                del queue[term]
        if term is None:
            term = next((t for t, found in sorted(self._lists.items())
                         if abs(average / found.average - 1) > REBUILD_DRIFT), None)
        if term is None:
            return False
        self._lists[term] = make_list(term, average, top(term))
        with self._lock:
            self._clock += 1
            self._used[term] = self._clock
            while len(self._lists) > MAX_LISTS:
                oldest = min(self._lists, key=lambda t: self._used.get(t, 0))
                self._used.pop(oldest, None)
                del self._lists[oldest]
        return True

    def offer(self, bags: Sequence[WordBag]) -> None:
        """Offer documents about to be indexed to the lists of the words they hold."""
        if not self._lists or not bags:
            return
        by_term: dict[str, list[Entry]] = {}
        for memory_id, bag in bags:
            length = sum(bag.values())
            for term in bag.keys() & self._lists.keys():
                by_term.setdefault(term, []).append((memory_id, bag[term], length))
        for term, entries in by_term.items():
            self._lists[term] = self._lists[term].offered(entries)

    def __len__(self) -> int:
        return len(self._lists)
