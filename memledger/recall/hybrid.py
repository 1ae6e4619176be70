"""Ranking: semantic candidates with filters applied before the top-k cut, and reciprocal
rank fusion of word and meaning rankings.

Filters live in the SQL projection, vectors in the index, so a semantic top-k that
respects filters takes one of two paths:

- **narrow filter** (at most PREFILTER_CAP memories pass it): read the ids that pass from
  SQL and score exactly those against the query with their stored vectors. Exact, and the
  cut is taken over the filtered set only.
- **broad filter**: walk the HNSW graph for `want * 2` neighbours, keep those the filter
  passes, and widen the walk (x4, up to OVERFETCH_CAP) until `want` survive. A memory the
  filter rejects never takes a place in the top-k.
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


def semantic_ranked(index: VectorIndex, query: np.ndarray, want: int,
                    keep: Keep | None,
                    narrow: Callable[[int], list[str] | None] | None,
                    first: Ranked | None = None) -> Ranked:
    """The `want` memories nearest to `query` among those the filter passes.

    `keep(ids)` returns the subset of ids the filter passes (None: no filter);
    `narrow(cap)` returns every id the filter passes when there are fewer than `cap`,
    else None (None: never narrow); `first`: the index's `first_fetch(want)` nearest,
    when the caller has already searched for them.
    """
    if want <= 0 or len(index) == 0:
        return []
    if narrow is not None:
        ids = narrow(PREFILTER_CAP)
        if ids is not None:
            sims = index.similarities(query, ids)
            return sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[:want]
    fetch = first_fetch(want)
    while True:
        found = index.search(query, fetch) if first is None else first
        first = None
        hits = first_passing(found, want, keep)
        if len(hits) >= want or fetch >= min(len(index), OVERFETCH_CAP):
            return hits
        fetch = min(fetch * 4, OVERFETCH_CAP)


def with_unindexed(hits: Ranked, query: np.ndarray,
                   unindexed: Sequence[tuple[str, np.ndarray]], keep: Keep | None,
                   want: int) -> Ranked:
    """The index's `want` best (`hits`) merged with the memories not in it yet that the
    filter passes, each scored by its cosine to the unit `query`; the best `want` of both.
    An id in both is the index's (its follower got there first)."""
    seen = {m for m, _ in hits}
    fresh = [(m, v) for m, v in unindexed if m not in seen]
    if not fresh or want <= 0:
        return hits
    passing = keep([m for m, _ in fresh]) if keep is not None else {m for m, _ in fresh}
    scored = [(m, float(v @ query) / (float(np.linalg.norm(v)) or 1.0))
              for m, v in fresh if m in passing]
    return sorted(hits + scored, key=lambda kv: (-kv[1], kv[0]))[:want]
