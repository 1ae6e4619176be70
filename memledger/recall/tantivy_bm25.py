"""BM25 exactly as the word index (tantivy) computes it, for documents it does not hold yet.

A text search ranks the memories above the word index's watermark itself
(`TextIndex.score_unindexed`). Their scores must be the ones tantivy gives them once the
follower has indexed them, to the bit: with other scores a memory moves in the ranking
when it is indexed, and a cursor's next page repeats a hit and skips another. Equal
scores are common (lengths are kept to one byte, so documents of one length bucket and
term count tie), so "close" is not enough. tantivy:

- keeps a document's length as a one-byte code (Lucene's scheme), decoded by FIELDNORMS;
- normalises by the average length total tokens / documents of its searcher (deleted
  documents count until their segments merge), read here from its own explanation of a
  hit, once per committed view;
- computes in 32-bit floats.

Serving data only: none of this reaches consensus.
"""

from __future__ import annotations

import bisect
import json
import math
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import tantivy

K1 = np.float32(1.2)
B = np.float32(0.75)
#: lengths below this are kept exactly; above, 3 bits of mantissa (tantivy fieldnorm/code.rs)
_EXACT_BELOW = 24


def _decoded(code: int) -> int:
    """The length a one-byte fieldnorm code stands for."""
    if code < _EXACT_BELOW:
        return code
    rest = code - _EXACT_BELOW
    bits, shift = rest & 0b111, rest >> 3
    return _EXACT_BELOW + (bits if shift == 0 else (bits | 8) << (shift - 1))


FIELDNORMS = tuple(_decoded(code) for code in range(256))


def quantised(length: int) -> int:
    """The length tantivy scores a document of `length` terms by (its code's value)."""
    return FIELDNORMS[bisect.bisect_right(FIELDNORMS, length) - 1]


class ViewStats:
    """(total tokens, documents) of a tantivy searcher's view, as its BM25 counts them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._value: tuple[int, int] | None = None

    def get(self, index: tantivy.Index, searcher: tantivy.Searcher, field: str,
            terms: Sequence[str], key: tuple[Any, ...]) -> tuple[int, int] | None:
        """The view's counts, from tantivy's explanation of one hit of the query's rarest
        held term; cached while `key` (what identifies the view) holds. None when no
        term of the query is in the index and nothing is cached for this view."""
        with self._lock:
            if self._key == key:
                return self._value
        held = [(int(searcher.doc_freq(field, t)), t) for t in set(terms)]
        held = [(df, t) for df, t in held if df > 0]
        if not held:
            return None
        term = min(held)[1]
        query = tantivy.Query.term_query(index.schema, field, term, index_option="freq")
        hits = searcher.search(query, 1, count=False).hits
        if not hits:
            return None
        value = _counts(json.loads(query.explain(searcher, hits[0][1]).to_json()))
        with self._lock:
            self._key, self._value = key, value
        return value


def _counts(explanation: dict[str, Any]) -> tuple[int, int]:
    """(total tokens, documents) from a term query's explanation: its N and avgdl."""
    found: dict[str, float] = {}

    def walk(node: dict[str, Any]) -> None:
        found[str(node.get("description", ""))] = float(node["value"])
        for child in node.get("details", []):
            walk(child)
    walk(explanation)
    docs = round(found["N, total number of docs"])
    average = found["avgdl, average length of field"]
    return round(average * docs), docs


def idf(doc_freq: int, docs: int) -> np.float32:
    """tantivy's inverse document frequency, in its precision."""
    x = (np.float32(docs - doc_freq) + np.float32(0.5)) / (np.float32(doc_freq)
                                                           + np.float32(0.5))
    # the logarithm rounded once from double precision, as the C library's logf does;
    # numpy's float32 log can be an ulp off it, enough to break a tie
    return np.float32(math.log(float(np.float32(1.0) + x)))


def average(tokens: int, docs: int) -> np.float32:
    """tantivy's average length: total tokens / documents, in its precision."""
    return np.float32(tokens) / np.float32(max(docs, 1))


def score(term_idf: np.float32, count: Any, fieldnorm: Any, mean: np.float32) -> Any:
    """One term's share of a document's BM25, as tantivy computes it (Bm25Weight):
    `count` occurrences, `fieldnorm` the quantised length (float32 numbers or arrays)."""
    norm = K1 * (np.float32(1.0) - B + B * fieldnorm / mean)
    return np.float32(term_idf * (np.float32(1.0) + K1)) * (count / (count + norm))

#: the word index's counts per committed view (one index per process)
VIEW_STATS = ViewStats()


def score_bags(index: tantivy.Index, searcher: tantivy.Searcher, field: str,
               terms: Sequence[str], bags: Sequence[tuple[str, Counter[str]]],
               any_word: bool, view: tuple[Any, ...], estimate: float
               ) -> list[tuple[str, float]]:
    """BM25 of the (id, term counts) documents `bags` that match the analysed `terms`,
    best first, as tantivy scores a document of the same words in the searcher's view:
    the scores the search's hits from the index carry (`view`: what identifies that
    view; `estimate`: an average length, for an index that holds no term of the query,
    where it cannot be read back)."""
    counts = VIEW_STATS.get(index, searcher, field, terms, view)
    if counts is None:  # no query term held: the documents' own share is still right
        held = int(searcher.num_docs)
        counts = (round(estimate * held), held)
    tokens, docs = counts
    if not docs:  # an empty index: these documents' own average
        tokens, docs = sum(sum(bag.values()) for _, bag in bags), len(bags)
    mean = average(tokens, docs)
    matching = [(memory_id, bag) for memory_id, bag in bags
                if (any if any_word else all)(t in bag for t in terms)]
    if not matching:
        return []
    lengths = np.array([quantised(sum(bag.values())) for _, bag in matching],
                       dtype=np.float32)
    totals = np.zeros(len(matching), dtype=np.float32)
    for term in terms:  # in the query's order, each share added as tantivy adds it
        freqs = np.array([bag[term] for _, bag in matching], dtype=np.float32)
        term_idf = idf(int(searcher.doc_freq(field, term)), counts[1])
        totals += np.where(freqs > 0, score(term_idf, freqs, lengths, mean), np.float32(0.0))
    scored = [(memory_id, float(total))
              for (memory_id, _), total in zip(matching, totals, strict=True)]
    return sorted(scored, key=lambda hit: (-hit[1], hit[0]))
