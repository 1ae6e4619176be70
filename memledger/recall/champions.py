"""Champion lists: the best documents of the words most memories contain, kept ready.

A one-word text search for a word in most memories ("the", a project's own name) is a
scan of that word's whole posting list in the word index: block-max WAND skips a block
only when its best document cannot beat the k-th hit, and for such a word nearly every
block holds a document as good as the best (the scores differ by a few per mille, or
tie). At 1M memories that was ~11 ms of the search, and most of its p99.

For a word in at least LISTED_MIN_DOCS documents, this keeps its CHAMPIONS best
documents by BM25 (term frequency and length; see `bm25`), each with its term count and
length, so such a search ranks ~2,000 documents instead of ~1,000,000:

- **On demand.** A search for such a word asks for its list (`wanted`); the index's
  follower builds it between blocks (the index's top CHAMPIONS, their rows read from the
  projection and analysed as the index does). Until then searches use the index.
- **Kept current.** Every document the follower adds is offered to the lists of the
  words it holds before the index's watermark passes it, so no document is in neither.
  A list never loses a document: memories are not deleted from the word index.
- **Exact enough to serve, and honest about it.** BM25's order for one word depends only
  on term count and length against the average length; the list was cut at the average
  of its build, so when that average has moved by more than REBUILD_DRIFT the list is
  built again. A search ranks the whole list by its current BM25 and takes at most
  CHAMPIONS // 2 of it; deeper (or a filter that leaves too few) goes to the index.
- **Bounded.** At most MAX_LISTS lists (the least recently searched go); ~0.2 MB each.

Serving data only: floats and a lock are fine here, none of this reaches consensus.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memledger.recall.text_index import WordBag, bm25

#: a word is listed when at least this many documents hold it (a scan of fewer postings
#: costs the index ~1 ms; the list would save little)
LISTED_MIN_DOCS = 100_000
#: documents kept per word: twice the deepest ranked page (MAX_RANKED) plus its first fetch
CHAMPIONS = 2048
MAX_LISTS = 64
#: rebuild a list when the average document length has moved this much since its build
REBUILD_DRIFT = 0.02

#: (memory id, term count, length) of one listed document
Entry = tuple[str, int, int]


@dataclass(frozen=True)
class ChampionList:
    """One word's best documents, best first by BM25 at `average` (the average document
    length when the order was last taken). Immutable: a change publishes a new one."""

    term: str
    average: float
    entries: tuple[Entry, ...]
    #: each entry's BM25 weight at `average` (idf left out: one word, one idf), ascending
    #: by negation so `bisect` finds where a new document belongs
    keys: tuple[float, ...]
    #: the entries' term counts and lengths, for scoring them all at once
    counts: np.ndarray = field(init=False, repr=False, compare=False)
    lengths: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", np.array([e[1] for e in self.entries], np.float64))
        object.__setattr__(self, "lengths", np.array([e[2] for e in self.entries], np.float64))

    def ranked(self, idf: float, average: float, n: int) -> list[tuple[str, float]]:
        """The best `n` entries by BM25 now (`idf` and `average` as the index has them)."""
        scores = bm25(idf, self.counts, self.lengths, average)
        order = np.argsort(-scores, kind="stable")[:n]
        return [(self.entries[i][0], float(scores[i])) for i in order.tolist()]

    def offered(self, new: Sequence[Entry]) -> ChampionList:
        """This list with the documents of `new` that beat its last one (or fill it)."""
        entries, keys = list(self.entries), list(self.keys)
        held = {memory_id for memory_id, _, _ in entries}
        for entry in new:
            if entry[0] in held:
                continue  # a replayed document: already here
            key = -bm25(1.0, entry[1], entry[2], self.average)
            if len(entries) >= CHAMPIONS and key >= keys[-1]:
                continue
            at = bisect.bisect_right(keys, key)
            entries.insert(at, entry)
            keys.insert(at, key)
            held.add(entry[0])
            if len(entries) > CHAMPIONS:
                held.discard(entries.pop()[0])
                keys.pop()
        return ChampionList(self.term, self.average, tuple(entries), tuple(keys))


def make_list(term: str, average: float, entries: Sequence[Entry]) -> ChampionList:
    ranked = sorted(entries, key=lambda e: (-bm25(1.0, e[1], e[2], average), e[0]))
    ranked = ranked[:CHAMPIONS]
    return ChampionList(term, average, tuple(ranked),
                        tuple(-bm25(1.0, e[1], e[2], average) for e in ranked))


class Champions:
    """The champion lists of one word index. Searches read (`ranked`, `wanted`) from any
    thread; only the follower builds and offers (`build_wanted`, `offer`)."""

    def __init__(self) -> None:
        self._lists: dict[str, ChampionList] = {}
        self._wanted: set[str] = set()
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
                self.want(term)
            return None
        with self._lock:
            self._clock += 1
            self._used[term] = self._clock
        return found if len(found.entries) >= CHAMPIONS else None

    def want(self, term: str) -> None:
        """Ask the follower for `term`'s list (a search found the word common)."""
        with self._lock:
            self._wanted.add(term)

    def wanted(self) -> list[str]:
        with self._lock:
            return sorted(self._wanted)

    # ------------------------------------------------------------ the follower's side
    def build_wanted(self, average: float,
                     top: Callable[[str], Sequence[Entry]]) -> int:
        """Build the wanted lists, and rebuild those cut at an average that has drifted;
        `top(term)` gives the index's best CHAMPIONS documents for the term with their
        counts. Returns how many lists were built."""
        with self._lock:
            todo = set(self._wanted)
            self._wanted.clear()
        todo |= {t for t, found in self._lists.items()
                 if abs(average / found.average - 1) > REBUILD_DRIFT}
        for term in sorted(todo):
            self._lists[term] = make_list(term, average, top(term))
            with self._lock:
                self._clock += 1
                self._used[term] = self._clock
        while len(self._lists) > MAX_LISTS:
            with self._lock:
                oldest = min(self._lists, key=lambda t: self._used.get(t, 0))
                self._used.pop(oldest, None)
            del self._lists[oldest]
        return len(todo)

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
