"""Ranking: semantic candidates with filters applied before the top-k cut, and reciprocal
rank fusion of word and meaning rankings.

Filters live in the SQL projection, vectors in the index, so a semantic top-k that
respects filters takes one of two paths:

- **narrow filter** (at most PREFILTER_CAP memories pass it): read the ids that pass from
  SQL and score exactly those against the query with their stored vectors. Exact, and the
  cut is taken over the filtered set only.
- **broad filter**: walk the HNSW graph in SEMANTIC_WINDOWS (40, 160, 640, 1,280, 5,120, then
  OVERFETCH_CAP) until `want` pass. A memory the filter rejects never takes a place in
  the top-k. If even the widest walk leaves fewer than `want` and the filter passes at
  most PREFILTER_CAP memories, those not placed yet are scored exactly and appended.

A page's hits never depend on how deep the page reaches (cursors would repeat and skip
hits otherwise): usearch returns different neighbours for different counts, so each
window is searched at its own fixed count, ordered by (score, id), and adds only the
memories no earlier window placed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from memledger.recall.index import VectorIndex

RRF_K = 60
PREFILTER_CAP = 20_000
OVERFETCH_CAP = 20_000

Ranked = list[tuple[str, float]]
#: keep(ids): the ids among `ids` that a search's filter passes
Keep = Callable[[list[str]], set[str]]


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K,
        weights: Sequence[float] | None = None) -> Ranked:
    """Weighted reciprocal rank fusion: score(d) = sum over rankings of
    w / (k + rank(d)), rank from 1. Ties break by id so pages are stable."""
    scores: dict[str, float] = {}
    for i, ranking in enumerate(rankings):
        w = 1.0 if weights is None else weights[i]
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def fusion_windows(first: int, most: int) -> tuple[int, ...]:
    """The depths hybrid fuses at: `first`, doubling, and `most` last."""
    windows = []
    window = first
    while window < most:
        windows.append(window)
        window *= 2
    return (*windows, most)


def fuse_in_windows(rankings: Sequence[Sequence[str]], windows: Sequence[int], want: int,
                    k: int = RRF_K, weights: Sequence[float] | None = None) -> Ranked:
    """One fused order that does not depend on how deep a page reaches.

    Fusing whole lists fetched as deep as each page needs gives every page its own order
    (a memory deep in one list gains rank as the other list deepens), so following the
    cursors showed some memories twice and others never. Here the first `windows[0]` hits
    are the fusion of the lists cut at that depth, the hits up to `windows[1]` the fusion
    at that depth less the hits already placed, and so on: a deeper page only appends.
    The top hits are always fused at the first window, the depth measured best.

    A hit's score is its fused score in its window, capped at the score above it (a hit
    placed by a deeper window may score higher there than one placed before it)."""
    out: list[tuple[str, float]] = []
    placed: set[str] = set()
    ceiling = float("inf")
    for window in windows:
        complete = all(len(r) < window for r in rankings)  # no list reaches this depth
        for doc, score in rrf([r[:window] for r in rankings], k, weights):
            if len(out) >= window and not complete:
                break
            if doc not in placed:
                ceiling = min(ceiling, score)
                out.append((doc, ceiling))
                placed.add(doc)
        if complete or len(out) >= want:
            break
    return out


def first_fetch(want: int) -> int:
    """How many candidates a leg fetches from its index at first (then x4 while too few
    pass the filter)."""
    return max(want * 2, 20)


def first_chunk(want: int) -> int:
    """How many candidates the filter checks at once for `want` more to pass: want and a
    quarter more, since most filters reject few memories."""
    return want * 5 // 4 + 4


def first_passing(hits: Ranked, want: int, keep: Keep | None) -> Ranked:
    """The first `want` of `hits` (in order) that `keep` passes, checking them in chunks
    only as deep as needed: most filters reject few memories, so the first chunk (want
    and a quarter more) usually settles it, rather than a check of every candidate."""
    if keep is None:
        return hits[:want]
    kept: Ranked = []
    start = 0
    while start < len(hits) and len(kept) < want:
        size = first_chunk(max(want - len(kept), 1))
        chunk = hits[start:start + size]
        passed = keep([mid for mid, _ in chunk])
        kept += [(mid, s) for mid, s in chunk if mid in passed]
        start += size
    return kept[:want]


#: the neighbour counts the graph is searched at, in turn (see semantic_ranked)
SEMANTIC_WINDOWS = (40, 160, 640, 1_280, 5_120, OVERFETCH_CAP)


def nearest(index: VectorIndex, query: np.ndarray, count: int) -> Ranked:
    """The index's `count` nearest to `query`, best first, equal scores by id: the same
    list for the same count, whatever page asks (usearch orders ties as it finds them)."""
    return sorted(index.search(query, count), key=lambda kv: (-kv[1], kv[0]))


def exactly(index: VectorIndex, query: np.ndarray, ids: list[str]) -> Ranked:
    """`ids` scored exactly by their stored vectors, best first, equal scores by id."""
    return sorted(index.similarities(query, ids).items(), key=lambda kv: (-kv[1], kv[0]))


def semantic_ranked(index: VectorIndex, query: np.ndarray, want: int,
                    keep: Keep | None,
                    narrow: Callable[[int], list[str] | None] | None,
                    first: Ranked | None = None, exact_first: bool = True) -> Ranked:
    """The `want` memories nearest to `query` among those the filter passes.

    `keep(ids)` returns the subset of ids the filter passes (None: no filter);
    `narrow(cap)` returns every id the filter passes when there are at most `cap`, else
    None (None: the filter is never read whole); `exact_first`: the filter is likely
    narrow (a domain, author...), so `narrow` is tried before the graph, not only after
    its widest walk; `first`: `nearest(index, query, SEMANTIC_WINDOWS[0])`, when the
    caller has already searched for it.

    The graph is walked window by window (SEMANTIC_WINDOWS): each window's neighbours that
    pass and were not placed by an earlier one are appended in (score, id) order, so the
    first n hits are the same for any `want` >= n (a cursor's pages are slices of one
    list). A later window can hold a hit scoring above the last hits of an earlier one.
    """
    if want <= 0 or len(index) == 0:
        return []
    if narrow is not None and exact_first:
        ids = narrow(PREFILTER_CAP)
        if ids is not None:
            return exactly(index, query, ids)[:want]
    placed: Ranked = []
    seen: set[str] = set()
    for window in SEMANTIC_WINDOWS:
        found = nearest(index, query, window) if first is None else first
        first = None
        fresh = [(m, s) for m, s in found if m not in seen]
        placed += first_passing(fresh, want - len(placed), keep)
        seen.update(m for m, _ in fresh)
        if len(placed) >= want or window >= len(index):
            return placed
    return placed + _past_the_walk(index, query, want - len(placed), narrow, seen)


def _past_the_walk(index: VectorIndex, query: np.ndarray, want: int,
                   narrow: Callable[[int], list[str] | None] | None,
                   seen: set[str]) -> Ranked:
    """The memories the filter passes that the widest walk did not reach, scored exactly
    (when at most PREFILTER_CAP pass): a filter no field names as narrow (status=committed
    on a ledger of proposals) must still fill its page."""
    ids = narrow(PREFILTER_CAP) if narrow is not None else None
    if ids is None:
        return []
    return exactly(index, query, [m for m in ids if m not in seen])[:want]


def with_unindexed(hits: Ranked, query: np.ndarray,
                   unindexed: Sequence[tuple[str, np.ndarray]], keep: Keep | None,
                   want: int) -> Ranked:
    """The index's `want` best (`hits`) merged with the memories not in it yet that the
    filter passes, each scored by its cosine to the unit `query` and placed before the
    first hit scoring less; the first `want` of both. The hits keep their order (a
    deeper page's longer list must start with a shallower page's), and a fresh memory
    scoring under every hit is left out while more hits may follow. An id in both is
    the index's (its follower got there first)."""
    seen = {m for m, _ in hits}
    fresh = [(m, v) for m, v in unindexed if m not in seen]
    if not fresh or want <= 0:
        return hits
    passing = keep([m for m, _ in fresh]) if keep is not None else {m for m, _ in fresh}
    scored = sorted(((m, float(v @ query) / (float(np.linalg.norm(v)) or 1.0))
                     for m, v in fresh if m in passing), key=lambda kv: (-kv[1], kv[0]))
    merged: Ranked = []
    for hit in hits:
        while scored and scored[0][1] > hit[1]:
            merged.append(scored.pop(0))
        merged.append(hit)
    if len(hits) < want:  # every hit there is: the rest go below them
        merged += scored
    return merged[:want]
