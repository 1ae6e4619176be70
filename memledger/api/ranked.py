"""Ranked search over memories: `mode=text|semantic|hybrid` of GET /v1/memories?q=.

- `text`: every word must match (as the page listing), ranked by BM25; score = that
  rank, higher is better. From the node's word index (tantivy, `recall/text_index.py`)
  when it is open and not being built, on both backends; otherwise from the projection
  (SQLite FTS5 bm25, PostgreSQL ts_rank_cd), which ranks every posting of every word.
- `semantic`: nearest memories by meaning (the node's embedder and vector index, see
  memledger.recall); score = cosine similarity.
- `hybrid`: reciprocal rank fusion of an any-word BM25 ranking and the semantic
  ranking; score = the fused RRF score.

`rerank=true` (hybrid and semantic; off by default) rescores the first RERANK_DEPTH hits
by MaxSim over token states (memledger.recall.rerank); score = that relevance, -1..1,
and `min_score` filters on it (docs/RECALL.md, "Rerank").

Every filter (domain, status, type, author, tags, include_disputed) is applied before the
top-k cut in every mode. Ranked pages use an offset cursor `<offset>~ranked`, meant for
the same query and mode; at most MAX_RANKED results are reachable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
import tantivy
from sqlalchemy.dialects.postgresql import TSQUERY

from memledger.api.filter_check import FilterCheck, Rows
from memledger.api.freshness import hit_facts, reweigh
from memledger.api.freshness import pool_size as freshness_pool
from memledger.api.problems import Problem
from memledger.api.queries import (
    MEMORY_COLUMNS,
    MemoryFilter,
    apply_filters,
    memory_json,
    narrowed,
)
from memledger.api.search import (
    COMMON_MIN_MATCHES,
    MAX_QUERY_CHARS,
    common_on_sqlite,
    query_words,
)
from memledger.projection.schema import FTS_TABLE, TS_CONFIG, TSV_COLUMN, memories
from memledger.recall.hybrid import (
    OVERFETCH_CAP,
    PREFILTER_CAP,
    SEMANTIC_WINDOWS,
    Keep,
    Ranked,
    first_chunk,
    first_fetch,
    first_passing,
    fuse_in_windows,
    fusion_windows,
    nearest,
    semantic_ranked,
    with_unindexed,
)
from memledger.recall.indexer import Indexer
from memledger.recall.rerank import RERANK_DEPTH, Reranker
from memledger.recall.stopwords import STOPWORDS
from memledger.recall.text_index import TextIndex, WordBag, analysed_terms, terms_query
from memledger.recall.text_indexer import FirstHits, TextIndexer

MODES = ("text", "semantic", "hybrid")
MAX_RANKED = 1000
RANKED_CURSOR = "ranked"
#: candidates each leg of hybrid brings to the fusion, at least. Measured on the evaluation
#: set (bench/bench_recall.py): depth 20 / 30 / 50 gave paraphrase recall@5 0.63 / 0.57 /
#: 0.57 and keyword 1.00 in all three; deeper legs let incidental word matches displace
#: semantic hits, and cost more filter checks per query.
HYBRID_DEPTH = 20
#: the depths hybrid fuses at (recall.hybrid.fuse_in_windows): the top HYBRID_DEPTH hits
#: always come from legs of that depth, and a deeper page only appends to them
HYBRID_WINDOWS = fusion_windows(HYBRID_DEPTH, MAX_RANKED + 1)
#: weight of the any-word leg in hybrid's fusion (the semantic leg weighs 1); 1.0, 0.5 and
#: 0.3 measured (BENCHMARKS.md §9): within 0.02 recall@5 of each other on the evaluation set
TEXT_WEIGHT = 0.5


@dataclass(frozen=True)
class RankedPage:
    items: list[dict[str, Any]]
    next_cursor: str | None
    #: each item's canonical record, from the rows the page was served from: the API's
    #: status reasons need them, and need not read them again
    records: dict[str, dict[str, Any]] = field(default_factory=dict)


def parse_offset(cursor: str | None) -> int:
    """The offset a ranked page starts at: the leading number of the cursor. Ranked pages
    hand out `<offset>~ranked`; any cursor the document allows is accepted (a keyset
    cursor `<height>~<id>` reads as offset <height>), never refused."""
    if cursor is None:
        return 0
    return int(cursor.partition("~")[0])


def content_words(text: str) -> list[str]:
    words = query_words(text)
    kept = [w for w in words if w.lower().strip("?!.,;:'\"") not in STOPWORDS]
    return kept or words


def _common(conn: sa.Connection, word: str, words_index: TextIndexer | None) -> bool:
    """True when `word` matches at least 1% of memories (and at least COMMON_MIN_MATCHES).

    From the word index's term dictionary when it is given (no postings read); else a
    capped count in the projection, which costs up to that many postings."""
    if words_index is not None:
        found, size = words_index.index.share_matching(word)
        return found >= max(COMMON_MIN_MATCHES, size // 100)
    if conn.dialect.name == "sqlite":
        return common_on_sqlite(conn, word)
    size = conn.exec_driver_sql(
        "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE relname = 'memories'"
    ).scalar_one_or_none() or 0
    cap = max(COMMON_MIN_MATCHES, int(size) // 100)
    tsq = sa.func.plainto_tsquery(sa.literal_column(f"'{TS_CONFIG}'::regconfig"),
                                  sa.bindparam("w", word))
    inner = sa.select(sa.literal(1)).select_from(memories).where(
        sa.literal_column(f"memories.{TSV_COLUMN}").op("@@")(tsq)).limit(cap).subquery()
    found = conn.execute(sa.select(sa.func.count()).select_from(inner)).scalar_one()
    return int(found) >= cap


def distinctive_words(conn: sa.Connection, text: str,
                      words_index: TextIndexer | None = None) -> str:
    """The content words of `text` that are not common: hybrid's word leg ranks only
    these, since BM25 over a very common word's postings is slow and says little (the
    meaning leg carries such queries). Empty when every word is common. Frequencies come
    from the word index when it is serving (as of its watermark: a block or two more
    barely moves a frequency, so this never waits for the index to catch up), else from
    the projection."""
    counted_by = words_index if words_index is not None and words_index.serving else None
    return " ".join(w for w in content_words(text) if not _common(conn, w, counted_by))


def _fts_any(text: str) -> str | None:
    words = content_words(text)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def _fts_all(text: str) -> str | None:
    words = query_words(text)
    if not words:
        return None
    return " ".join('"' + w.replace('"', '""') + '"' for w in words)


def _with_unindexed(hits: Ranked, extra: Ranked, complete: bool) -> Ranked:
    """The index's hits (in its order) with the not-yet-indexed matches placed by score.
    While more hits may exist below the fetched ones (`complete` False), a match scoring
    under the last fetched hit is left for a deeper fetch. An id in both is the index's."""
    seen = {m for m, _ in hits}
    floor = hits[-1][1] if hits and not complete else -math.inf
    merged = list(hits)
    for memory_id, score in extra:
        if memory_id in seen or score < floor:
            continue
        at = next((i for i, (_, s) in enumerate(merged) if s < score), len(merged))
        merged.insert(at, (memory_id, score))
    return merged


def _indexed_text(keep: Keep, words: list[str], n: int, any_word: bool,
                  index: TextIndexer, unindexed: list[WordBag],
                  below: Callable[[set[str], Ranked], Ranked],
                  first: Ranked | None = None) -> Ranked:
    """Top `n` by BM25 from the word index and the memories not in it yet, keeping only
    what the filter passes: fetch 2n, widen x4 until n pass (`first`: the index's first
    fetch, when the caller has made it). When even OVERFETCH_CAP hits leave fewer than n
    and more exist, `below(fetched ids, unindexed scores)` ranks the rest."""
    extra = index.index.score_unindexed(words, unindexed, any_word) if unindexed else []
    fetch = first_fetch(n)
    while True:
        hits = first
        if hits is None and not any_word:  # one very common word: its champion list
            hits = index.champion_hits(words, fetch, unindexed)
        if hits is None:
            hits = index.index.search(words, fetch, any_word=any_word)
        first = None
        if extra:
            hits = _with_unindexed(hits, extra, len(hits) < fetch)
        kept = first_passing(hits, n, keep)
        if len(kept) >= n or len(hits) < fetch:
            return kept
        if fetch >= OVERFETCH_CAP:
            return kept + below({m for m, _ in hits}, extra)[:n - len(kept)]
        fetch = min(fetch * 4, OVERFETCH_CAP)


def _scored_by_index(index: TextIndex, words: list[str], ids: list[str],
                     any_word: bool) -> Ranked:
    """The word index's BM25 of the documents `ids` that match `words` (the query
    `TextIndex.search` makes, restricted to these ids at no score), best first."""
    terms = analysed_terms(words)
    if not terms or not ids:
        return []
    tindex = index._open_index()
    only = tantivy.Query.const_score_query(
        tantivy.Query.term_set_query(tindex.schema, "id", ids), 0.0)
    query = tantivy.Query.boolean_query([
        (tantivy.Occur.Must, terms_query(tindex.schema, terms, any_word)),
        (tantivy.Occur.Must, only)])
    searcher = tindex.searcher()
    hits = searcher.search(query, len(ids), count=False).hits
    return [(str(searcher.doc(address)["id"][0]), float(score)) for score, address in hits]


def _below_the_fetch(conn: sa.Connection, flt: MemoryFilter, text: str, any_word: bool,
                     index: TextIndex, terms: list[str]
                     ) -> Callable[[set[str], Ranked], Ranked]:
    """What ranks the matches a filter passes below the word index's widest fetch: those
    the projection finds (at most PREFILTER_CAP, its best first), scored by the word
    index's BM25 beside the memories not in it yet. Falling back to the projection's own
    ranking instead switched scales and order between the pages of one cursor."""
    def below(fetched: set[str], extra: Ranked) -> Ranked:
        ids = [m for m, _ in _projection_ranked(conn, flt, text, PREFILTER_CAP, any_word)
               if m not in fetched]
        passing = set(ids)
        scored = _scored_by_index(index, terms, ids, any_word)
        scored += [(m, sc) for m, sc in extra if m in passing]
        return sorted(scored, key=lambda kv: (-kv[1], kv[0]))
    return below


def text_ranked(conn: sa.Connection, flt: MemoryFilter, text: str, n: int,
                any_word: bool = False, words_index: TextIndexer | None = None,
                check: FilterCheck | None = None, first: FirstHits | None = None
                ) -> Ranked:
    """Top `n` memories by word relevance among those `flt` passes (`check`: the filter
    check to use, shared with the other leg of a hybrid search; `first`: the word
    index's first fetch, when the caller has made it).

    The word index's first candidates are fetched and checked before the memories above
    its watermark are read: the check's statement brings the projection height those
    are read at, so a search that finds them shared by the follower (the usual case)
    makes that one statement."""
    if len(text) > MAX_QUERY_CHARS:
        raise Problem(422, "invalid_query", f"q is longer than {MAX_QUERY_CHARS} characters")
    if words_index is not None and words_index.serving:
        check = check or FilterCheck(conn, flt)
        terms = content_words(text) if any_word else query_words(text)
        if first is None:
            first = words_index.first_hits(terms, first_fetch(n), any_word)
        check([m for m, _ in first.hits[:first_chunk(n)]])
        unindexed = words_index.unindexed(conn, check.height())
        if unindexed is not None:
            # the first hits go with the memories above the watermark, unless the index
            # moved meanwhile (or a list's scores used other rows): then fetched again
            held = first.hold(words_index.index.indexed_height, unindexed)
            below = _below_the_fetch(conn, flt, text, any_word, words_index.index, terms)
            return _indexed_text(check, terms, n, any_word, words_index, unindexed, below,
                                 first.hits if held else None)
    return _projection_ranked(conn, flt, text, n, any_word)


def _projection_ranked(conn: sa.Connection, flt: MemoryFilter, text: str, n: int,
                       any_word: bool) -> Ranked:
    """Top `n` by the projection's own full-text ranking (SQLite bm25 with the sign
    flipped, PostgreSQL ts_rank_cd): while the word index is built."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        fts = _fts_any(text) if any_word else _fts_all(text)
        if fts is None:
            return []
        rank: Any = sa.literal_column(f"bm25({FTS_TABLE})")
        query = sa.select(memories.c.id, rank.label("r")).select_from(
            memories.join(sa.table(FTS_TABLE),
                          sa.text(f"{FTS_TABLE}.rowid = memories.rowid"))).where(
            sa.text(f"{FTS_TABLE} MATCH :fts_q").bindparams(fts_q=fts))
        query = apply_filters(query, flt).order_by(sa.text("r"), memories.c.id).limit(n)
        return [(str(r.id), -float(r.r)) for r in conn.execute(query)]
    if dialect == "postgresql":
        words = " ".join(content_words(text) if any_word else query_words(text))
        if not words:
            return []
        tsq: Any = sa.func.plainto_tsquery(sa.literal_column(f"'{TS_CONFIG}'::regconfig"),
                                           sa.bindparam("ts_words", words))
        if any_word:  # the same stemmed lexemes, OR-ed
            tsq = sa.cast(sa.func.replace(sa.cast(tsq, sa.Text), "&", "|"), TSQUERY)
        tsv: Any = sa.literal_column(f"memories.{TSV_COLUMN}")
        query = sa.select(memories.c.id, sa.func.ts_rank_cd(tsv, tsq).label("r")).where(
            tsv.op("@@")(tsq))
        query = apply_filters(query, flt).order_by(sa.desc(sa.text("r")), memories.c.id)
        return [(str(r.id), float(r.r)) for r in conn.execute(query.limit(n))]
    raise Problem(501, "search_unsupported", f"ranked search is not available on {dialect}")


#: ids a narrow filter's first read takes: most narrow filters pass fewer, and are read
#: in that one statement
NARROW_FIRST_READ = 1000


def filtered_ids(conn: sa.Connection, flt: MemoryFilter
                 ) -> Callable[[int], list[str] | None]:
    """narrow(cap): every id `flt` passes when at most `cap` do, else None; each answer
    is kept for the search (the graph walk asks again past its widest window).

    A filter that names a domain is tried exactly first (recall.hybrid), and a domain may
    hold most of the ledger: reading cap + 1 (20,001) ids only to learn that it is not
    narrow cost ~100 ms of a 100k-memory search, every search (the session-start hook's
    domain query, BENCHMARKS.md §12). So up to NARROW_FIRST_READ ids are read; past that,
    SQL is asked whether a (cap+1)-th row exists (it steps an index, hands no rows to
    Python), and only a filter that passes at most `cap` is read whole."""
    answers: dict[int, list[str] | None] = {}
    ids = apply_filters(sa.select(memories.c.id), flt)

    def narrow(cap: int) -> list[str] | None:
        if cap not in answers:
            answers[cap] = _ids_up_to(conn, flt, ids, cap)
        return answers[cap]
    return narrow


def _ids_up_to(conn: sa.Connection, flt: MemoryFilter, ids: Any, cap: int
               ) -> list[str] | None:
    rows = conn.execute(ids.limit(min(cap, NARROW_FIRST_READ) + 1)).scalars().all()
    if len(rows) > cap:
        return None
    if len(rows) > NARROW_FIRST_READ:
        beyond = apply_filters(sa.select(sa.literal(1)).select_from(memories), flt)
        if conn.execute(beyond.limit(1).offset(cap)).first() is not None:
            return None
        rows = conn.execute(ids.limit(cap + 1)).scalars().all()
        if len(rows) > cap:  # a block came between the two reads
            return None
    return [str(r) for r in rows]


def semantic(conn: sa.Connection, flt: MemoryFilter, text: str, n: int,
             indexer: Indexer, keep: FilterCheck | None = None, vector: Any = None,
             first: Ranked | None = None, since: int | None = None,
             narrow: Callable[[int], list[str] | None] | None = None) -> Ranked:
    """Top `n` memories by meaning among those `flt` passes (`vector`: the text's
    embedding and `first` the index's first window for it, when the caller has them, with
    `since` the watermark read before that fetch; `narrow`: the filter's `filtered_ids`,
    when the caller has asked it already), the ones committed since the index's
    watermark included (read-your-writes). The watermark is read before the index is
    searched: a follower step in between would otherwise move memories into the index
    after the search and above the watermark the search reads, and out of both."""
    if since is None:
        since = indexer.index.meta.indexed_height
    if vector is None:
        vector = indexer.embedder.embed([text])[0]
    keep = keep or FilterCheck(conn, flt)
    narrow = narrow or filtered_ids(conn, flt)
    hits = semantic_ranked(indexer.index, vector, n, keep, narrow, first,
                           exact_first=narrowed(flt))
    height = keep.height()
    # the tail's picks first, then the newest: an id in both is ranked once
    fresh = dict(indexer.tail_picks(conn, text, height, since, keep))
    fresh.update(indexer.unindexed(conn, height, since))
    return with_unindexed(hits, vector, list(fresh.items()), keep, n)


def hybrid(conn: sa.Connection, flt: MemoryFilter, text: str, want: int,
           indexer: Indexer, words_index: TextIndexer | None, check: FilterCheck,
           vector: Any = None) -> Ranked:
    """The first `want` (at least) of the legs fused in windows: each leg as deep as the
    window that holds `want`. Each leg's first candidates are fetched from its index
    before either is checked, and checked in one statement: a search that takes one
    round trip for both legs instead of one each (each is a wait on a busy database, and
    on PostgreSQL under writes the wait was the tail). `vector`: the text's embedding,
    when the caller has it."""
    rare = distinctive_words(conn, text, words_index)
    if vector is None:
        vector = indexer.embedder.embed([text])[0]
    depth = next((w for w in HYBRID_WINDOWS if w >= want), HYBRID_WINDOWS[-1])
    fetch, chunk = first_fetch(depth), first_chunk(depth)
    words_first = meaning_first = None
    if rare and words_index is not None and words_index.serving:
        words_first = words_index.first_hits(content_words(rare), fetch, any_word=True)
    since = indexer.index.meta.indexed_height  # before the index is searched: see semantic
    narrow = filtered_ids(conn, flt)
    # a narrow filter scores its own set; one that names a field but passes more than
    # PREFILTER_CAP (a domain holding most of the ledger) walks the graph as a broad one
    exact = narrowed(flt) and narrow(PREFILTER_CAP) is not None
    if not exact and len(indexer.index):
        meaning_first = nearest(indexer.index, vector, SEMANTIC_WINDOWS[0])
    check([m for m, _ in (words_first.hits if words_first else [])[:chunk]] +
          [m for m, _ in (meaning_first or [])[:chunk]])  # answers kept for both legs
    words = text_ranked(conn, flt, rare, depth, any_word=True, words_index=words_index,
                        check=check, first=words_first) if rare else []
    meaning = semantic(conn, flt, text, depth, indexer, check, vector, meaning_first, since,
                       narrow)
    return fuse_in_windows([[m for m, _ in words], [m for m, _ in meaning]], HYBRID_WINDOWS,
                           want, weights=(TEXT_WEIGHT, 1.0))


def _rerank_checked(mode: str, indexer: Indexer | None, rerank: bool,
                    min_score: float | None) -> Reranker | None:
    """The reranker a search asked for, or None; a Problem when it cannot have one."""
    if min_score is not None and not rerank:
        raise Problem(422, "min_score_needs_rerank",
                      "min_score filters the rerank stage's score: add rerank=true")
    if not rerank:
        return None
    if mode == "text":
        raise Problem(422, "rerank_needs_meaning",
                      "rerank=true reranks a meaning search: use mode=hybrid or semantic")
    if indexer is None:
        return None  # the caller answers recall_unavailable
    if indexer.late is None:
        raise Problem(422, "rerank_unsupported",
                      f"this node's embedder ({indexer.embedder.name}) has no token states "
                      "to rerank with; the minilm-int8 family has (docs/RECALL.md, Rerank)")
    return indexer.late


def _reranked(conn: sa.Connection, reranker: Reranker, qrows: Any, ranked: Ranked,
              rows: Rows, min_score: float | None) -> Ranked:
    """The first RERANK_DEPTH hits by MaxSim (ties keep the first stage's order), each
    scored by it; those under `min_score` left out."""
    pool = ranked[:RERANK_DEPTH]
    missing = [m for m, _ in pool if m not in rows]
    if missing:
        query = sa.select(*MEMORY_COLUMNS).where(memories.c.id.in_(missing))
        rows.update((row.id, row) for row in conn.execute(query))
    scores = reranker.scores(qrows, [(m, rows[m].content if m in rows else None)
                                     for m, _ in pool])
    order = sorted((m for m, _ in pool if m in scores), key=lambda m: -scores[m])
    return [(m, scores[m]) for m in order if min_score is None or scores[m] >= min_score]


def ranked_search(conn: sa.Connection, flt: MemoryFilter, mode: str, limit: int,
                  cursor: str | None, indexer: Indexer | None,
                  words_index: TextIndexer | None = None,
                  freshness: float | None = None, rerank: bool = False,
                  min_score: float | None = None) -> RankedPage:
    """One page of a ranked search; each item carries `score` and `mode`. `freshness`
    (a half-life in days) weighs the scores by age and corroborations before the cut
    (memledger.api.freshness). `rerank` scores the first RERANK_DEPTH hits (after any
    freshness weighing) by MaxSim over token states (memledger.recall.rerank) and
    orders the page by it, `min_score` leaving out hits it scores lower."""
    assert flt.q is not None
    if mode not in MODES:
        raise Problem(422, "invalid_mode", f"mode must be one of {', '.join(MODES)}")
    reranker = _rerank_checked(mode, indexer, rerank, min_score)
    if mode != "text" and indexer is None:
        raise Problem(409, "recall_unavailable",
                      f"mode={mode} needs an embedder; this node has none configured "
                      "(node config `embedder`)")
    offset = parse_offset(cursor)
    if len(flt.q) > MAX_QUERY_CHARS:
        raise Problem(422, "invalid_query", f"q is longer than {MAX_QUERY_CHARS} characters")
    if not query_words(flt.q):  # no word with a letter or digit: matches nothing, any mode
        return RankedPage([], None)
    want = min(offset + limit, MAX_RANKED) + 1
    if reranker is not None:
        want = RERANK_DEPTH + 1  # a reranked search reaches its first RERANK_DEPTH hits
    page_want = want
    if freshness is not None:
        want = freshness_pool(want, MAX_RANKED + 1)
    vector = qrows = None
    if reranker is not None:  # one encoder pass: the query's vector and its rerank rows
        vector, qrows = reranker.query(flt.q)
    # One filter check serves every leg, reads the rows the page is served from and
    # brings the projection height the word leg needs (for the memories above the word
    # index): each round trip to the database is a wait, and on a busy PostgreSQL the
    # tail. The usual search, in any mode, is one statement.
    rows: Rows = {}
    check = FilterCheck(conn, flt, rows)
    if mode == "text":
        ranked = text_ranked(conn, flt, flt.q, want, words_index=words_index, check=check)
    elif mode == "semantic":
        assert indexer is not None
        ranked = semantic(conn, flt, flt.q, want, indexer, check, vector)
    else:
        assert indexer is not None
        ranked = hybrid(conn, flt, flt.q, want, indexer, words_index, check, vector)[:want]
    if freshness is not None:
        facts, now_ns = hit_facts(conn, [m for m, _ in ranked], rows)
        ranked = reweigh(ranked, facts, now_ns, freshness)[:page_want]
    if reranker is not None:
        ranked = _reranked(conn, reranker, qrows, ranked, rows, min_score)
    window = ranked[offset:offset + limit]
    missing = [m for m, _ in window if m not in rows]
    if missing:
        query = sa.select(*MEMORY_COLUMNS).where(memories.c.id.in_(missing))
        rows.update((row.id, row) for row in conn.execute(query))
    items = []
    records = {}
    for mid, score in window:
        found = rows.get(mid)
        if found is None:  # gone from the projection since ranking: skip it
            continue
        records[mid] = json.loads(found.record)
        item = memory_json(found, records[mid])
        item["score"] = round(score, 6)
        item["mode"] = mode
        items.append(item)
    end = offset + limit
    next_cursor = f"{end}~{RANKED_CURSOR}" if len(ranked) > end and end < MAX_RANKED else None
    return RankedPage(items, next_cursor, records)
