"""The follower that feeds the word index (`text_index.py`) from the SQL projection.

Like the vector indexer it reads only what Commit already made durable, a chunk of
memories at a time (`follow.new_memories`), and moves its watermark `indexed_height`
only past heights whose memories are all in. Every node has one, embedder or not.

Searches must see every committed memory, as the SQL full-text search they replace did.
They do not wait for the follower for it: a search reads the few memories the projection
holds above the index's watermark (`unindexed`, the last block or two) and ranks them
itself beside the index's hits. Waiting for the follower's tantivy commit instead (15-25
ms at 1M) was most of the search's tail latency under writes. Only when the index has
fallen far behind does a search catch it up first. While the index is being built from
scratch, searches use the projection's own full-text index instead.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from memledger.projection.schema import memories
from memledger.protocol.sealed import is_sealed
from memledger.recall import champions as lists
from memledger.recall.champions import Champions, Entry
from memledger.recall.follow import FollowerThread, Following, new_memories, projection_height
from memledger.recall.text_index import TextIndex, WordBag, analysed_terms, word_bags

log = logging.getLogger("memledger.recall")

#: the most memories above the watermark a search ranks itself (a few blocks' worth)
UNINDEXED_CAP = 500
#: how often a search waiting for the follower's catch-up looks whether the index still
#: serves (a rebuild that began meanwhile sends the search to the projection)
SERVING_CHECK_S = 0.02


def document_body(content: str, tags_json: str | None) -> str:
    """What the word index matches: the content and the tags, as the projection's FTS.
    A private memory's sealed content (v10+) is not indexed: it is ciphertext, and word
    recall in private domains runs on the member's client (memledger.sdk.local_recall)."""
    if is_sealed(content):
        return ""
    tags = json.loads(tags_json) if tags_json else []
    return " ".join([content, *tags]) if tags else content


def documents(rows: Iterable[Any]) -> list[tuple[str, str]]:
    """(id, body) of projection rows with `id`, `content` and `tags`, as the index holds
    them."""
    return [(str(r.id), document_body(r.content, r.tags)) for r in rows]


@dataclass(frozen=True)
class FirstHits:
    """A search's first fetch from the word index, with what it was fetched against."""
    hits: list[tuple[str, float]]
    #: the index's watermark before the fetch: the hits cover every memory up to it
    watermark: int
    #: the not-yet-indexed memories a champion list's scores used (None: the index's
    #: scores, which use none)
    scored_with: list[WordBag] | None

    def hold(self, watermark: int, unindexed: list[WordBag]) -> bool:
        """Whether the hits still go with the memories above `watermark`, `unindexed`:
        the index has not moved since (else memories it took in between would be in
        neither) and the scores used those same memories."""
        return watermark == self.watermark and (
            self.scored_with is None or self.scored_with is unindexed
            or not (self.scored_with or unindexed))


class TextIndexer(Following):
    """Owns a TextIndex and keeps it at the projection's height."""

    def __init__(self, engine: Engine, index: TextIndex, poll_s: float = 0.05) -> None:
        self.engine = engine
        self.index = index
        self.poll_s = poll_s
        self.state = "stopped"
        self._catch_up_lock = threading.Lock()
        self._follower: FollowerThread | None = None
        self._unindexed: tuple[int, int, list[WordBag]] | None = None
        #: why a search found the index unreadable: the follower rebuilds it
        self._damaged: str | None = None
        self.champions = Champions()
        #: documents added when the latest memories were last sampled for common words
        self._sampled_at = -lists.RESAMPLE_DOCS

    def catch_up(self) -> int:
        """Index every memory up to the projection's height; returns documents added."""
        with self._catch_up_lock:
            return self._catch_up()

    def _catch_up(self, rebuild: bool = True) -> int:
        """`catch_up` under its lock. A projection below the watermark (rebuilt, replaced)
        empties the index: it stops serving (searches use the projection's full-text
        index) until it is rebuilt, here unless `rebuild` is False (a search's catch-up:
        the follower rebuilds)."""
        with self.engine.connect() as conn:
            hi = projection_height(conn)
            lo = self.index.indexed_height
            went_back, state = hi < lo or self._damaged is not None, self.state
            if went_back:
                self.state = "building"
                if not rebuild:
                    return 0
                self._start_over(hi, lo)
                lo = 0
            added = 0
            for rows, mark in new_memories(conn, lo, hi):
                docs = documents(rows)
                # analysed once for the searches and the champion lists (not while the
                # index is built from scratch: nobody searches it then)
                bags = word_bags(docs) if self.serving or len(self.champions) else None
                if bags is not None:
                    if added == 0 and mark >= hi:
                        self._share_pending(lo, hi, bags)
                    self.champions.offer(bags)  # before the watermark passes them
                self.index.add(docs, mark)
                added += len(rows)
            if added == 0 and hi != lo:
                self.index.add([], hi)
            if went_back:
                self.state = state  # rebuilt up to the projection: serving again
            return added

    def _start_over(self, hi: int, lo: int) -> None:
        """Empty the index, to be rebuilt from the projection: it went back below the
        watermark `lo`, or a search found the index's files damaged."""
        damaged, self._damaged = self._damaged, None
        if damaged is not None:
            log.warning("word index damaged: rebuilding: %s", damaged)
            self.index.discard(f"damaged: {damaged}")
        else:
            log.warning("projection height %d is below the word index's %d: rebuilding",
                        hi, lo)
            self.index.reset()
            self.index.rebuilt_reason = "projection behind index"
        self.champions = Champions()

    def _share_pending(self, lo: int, hi: int, bags: list[WordBag]) -> None:
        """Hand the rows about to be indexed to searches as their word bags first: the
        searches between the flush and the end of this tantivy commit (15-25 ms at 1M)
        then rank them without reading them again, and the read and the analysis leave
        the searches' path. The same rows `unindexed` would read for (lo, hi]."""
        if self.serving:
            self._unindexed = (lo, hi, bags)

    def champion_hits(self, words: list[str], fetch: int, unindexed: list[WordBag]
                      ) -> list[tuple[str, float]] | None:
        """The best `fetch` documents holding the one word of `words`, from its champion
        list (`champions.py`), scored by BM25 as `score_unindexed` scores `unindexed`;
        None when the index must answer: several words, deeper than half a list, or a
        word without a list (one is asked for when the word is common enough)."""
        terms = set(analysed_terms(words))
        if not self.serving or len(terms) != 1:
            return None
        (term,) = terms
        found = self.champions.serving(term, fetch, self.index.doc_freq)
        if found is None:
            return None
        return found.ranked(self.index.idf(term, unindexed),
                            self.index.average_length(unindexed), fetch)

    def first_hits(self, words: list[str], fetch: int, any_word: bool) -> FirstHits:
        """A search's first `fetch` candidates, fetched before it has read the projection's
        height (and so before it knows which memories are above the watermark): from the
        word's champion list, scored with the not-yet-indexed memories last read, else
        from the index."""
        watermark = self.index.indexed_height  # before the fetch: the index holds this
        if not any_word:
            cached = self._unindexed
            bags = cached[2] if cached is not None and cached[0] == watermark else []
            hits = self.champion_hits(words, fetch, bags)
            if hits is not None:
                return FirstHits(hits, watermark, bags)
        try:
            hits = self.index.search(words, fetch, any_word=any_word)
        except ValueError as exc:  # tantivy's error for a damaged file
            self._found_damaged(str(exc))
            hits = []
        return FirstHits(hits, watermark, None)

    def _found_damaged(self, reason: str) -> None:
        """Stop serving (the search, finding the index not serving, asks the projection's
        full-text index) and have the follower rebuild the index: damage inside a
        segment that the open's probe did not read fails every search that reads it."""
        log.warning("word index unreadable, searches use the projection until it is "
                    "rebuilt: %s", reason)
        self._damaged = reason
        self.state = "building"

    def _champion_entries(self, term: str) -> list[Entry]:
        """The index's best CHAMPIONS documents for `term`, with their term counts and
        lengths from the projection's rows, analysed as the index analyses them."""
        ids = self.index.top_ids(term, lists.CHAMPIONS)
        docs = []
        with self.engine.connect() as conn:
            for start in range(0, len(ids), 1000):
                query = sa.select(memories.c.id, memories.c.content, memories.c.tags).where(
                    memories.c.id.in_(ids[start:start + 1000]), memories.c.content.is_not(None))
                docs += documents(conn.execute(query))
        return [(memory_id, bag[term], sum(bag.values()))
                for memory_id, bag in word_bags(docs) if term in bag]

    @property
    def serving(self) -> bool:
        """Whether the index is built and followed (it may be a block or two behind)."""
        return self.state == "following"

    def unindexed(self, conn: sa.Connection, height: int | None = None
                  ) -> list[WordBag] | None:
        """The memories committed above the index's watermark, as word bags a search ranks
        itself; None while the index cannot serve (being built from scratch, or the
        projection went back below its watermark).

        Read once per (watermark, projection height) and shared by the searches that
        follow: while the follower lags, every search would otherwise read and analyse
        the same rows. `height` is the projection's, when the search has read it.
        More than UNINDEXED_CAP of them means the follower is far behind
        (a very large block, a starved follower): then the index is caught up here, at
        the searching thread's priority, and the list is empty (None, if a rebuild
        began meanwhile: a search never waits for one)."""
        if not self.serving:
            return None
        lo = self.index.indexed_height
        hi = projection_height(conn) if height is None else height
        if hi < lo:  # the projection went back: the follower rebuilds the index
            return None
        if hi == lo:
            return []
        cached = self._unindexed
        if cached is not None and cached[:2] == (lo, hi):
            return cached[2]
        # one row more than the cap tells "exactly the cap" (ranked here) from "more"
        first = next(new_memories(conn, lo, hi, chunk=UNINDEXED_CAP + 1), None)
        if first is not None and len(first[0]) > UNINDEXED_CAP:
            return [] if self._search_catch_up() else None
        bags = word_bags(documents(first[0])) if first is not None else []
        self._unindexed = (lo, hi, bags)
        return bags

    def _search_catch_up(self) -> bool:
        """Catch the index up for a search that found it far behind; False when it is not
        serving (a rebuild began): the search then uses the projection's full-text index
        instead of waiting for the rebuild (it holds the lock throughout) or doing it."""
        while not self._catch_up_lock.acquire(timeout=SERVING_CHECK_S):
            if not self.serving:
                return False
        try:
            if self.serving:
                self._catch_up(rebuild=False)
            return self.serving
        finally:
            self._catch_up_lock.release()

    # ---------------------------------------------------------------- following
    def start(self) -> None:
        """Open the persisted index (empty if missing or stale) and follow the projection."""
        reason = self.index.open()
        if reason is not None:
            log.info("word index will be built from the projection: %s", reason)
        self.state = "building" if reason is not None else "following"
        self._follower = FollowerThread("word-indexer", self._step, self.poll_s).start()

    def _step(self) -> bool:
        if self.catch_up() == 0 and self._damaged is None:  # else: rebuilt next
            self.state = "following"
        if not self.serving:
            return False
        # between blocks: one champion list, of those wanted or drifted, then a new look
        # at the projection (more to build: no pause)
        if self.index.docs_added >= self._sampled_at + lists.RESAMPLE_DOCS:
            self._want_common_words()
        return not self.champions.build_next(self.index.average_length(),
                                             self._champion_entries)

    def _want_common_words(self) -> None:
        """Ask for the lists of the words the latest SAMPLE memories hold that are common
        enough, so the first search for "the" after a start is not the slow one. A word
        in 10% of memories is in a sample of 2,000 with near certainty; rarer listed
        words (at 10M memories, 1%) are asked for by their first search."""
        self._sampled_at = self.index.docs_added
        if len(self.index) < lists.LISTED_MIN_DOCS:
            return
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(memories.c.id, memories.c.content, memories.c.tags)
                                .where(memories.c.content.is_not(None))
                                .order_by(memories.c.submitted_height.desc())
                                .limit(lists.SAMPLE)).all()
        held: set[str] = set()
        for _, bag in word_bags(documents(rows)):
            held.update(bag)
        for term in sorted(held):
            if self.index.doc_freq(term) >= lists.LISTED_MIN_DOCS:
                self.champions.want(term)

    def stop(self) -> None:
        if self._follower is not None:
            self._follower.stop()
        self.index.close()
        self.state = "stopped"
