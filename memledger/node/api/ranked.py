"""Ranked search over memories: `mode=text|semantic|hybrid` of GET /v1/memories?q=.

- `text`: every word must match (as the page listing), ranked by BM25; score = that
  rank, higher is better. From the node's word index (tantivy, `recall/text_index.py`)
  when it is open and not being built, on both backends; otherwise from the projection
  (SQLite FTS5 bm25, PostgreSQL ts_rank_cd), which ranks every posting of every word.
- `semantic`: nearest memories by meaning (the node's embedder and vector index, see
  memledger.recall); score = cosine similarity.
- `hybrid`: reciprocal rank fusion of an any-word BM25 ranking and the semantic
  ranking; score = the fused RRF score.

Every filter (domain, status, type, author, tags, include_disputed) is applied before the
top-k cut in every mode. Ranked pages use an offset cursor `<offset>~ranked`, meant for
the same query and mode; at most MAX_RANKED results are reachable.
"""

from __future__ import annotations

import json
import math
import os
import weakref
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import TSQUERY
from sqlalchemy.engine import Engine

from memledger.node.api.problems import Problem
from memledger.node.api.queries import (
    _MEMORY_COLUMNS,
    MemoryFilter,
    apply_filters,
    memory_json,
)
from memledger.node.api.search import (
    COMMON_MIN_MATCHES,
    MAX_QUERY_CHARS,
    common_on_sqlite,
    query_words,
)
from memledger.projection.schema import FTS_TABLE, TS_CONFIG, TSV_COLUMN, memories
from memledger.recall.follow import projection_height
from memledger.recall.hybrid import (
    OVERFETCH_CAP,
    Keep,
    Ranked,
    first_chunk,
    first_fetch,
    first_passing,
    rrf,
    semantic_ranked,
)
from memledger.recall.indexer import Indexer
from memledger.recall.text_index import WordBag
from memledger.recall.text_indexer import TextIndexer

MODES = ("text", "semantic", "hybrid")
MAX_RANKED = 1000
RANKED_CURSOR = "ranked"
#: candidates each leg of hybrid brings to the fusion, at least. Measured on the evaluation
#: set (bench/bench_recall.py): depth 20 / 30 / 50 gave paraphrase recall@5 0.63 / 0.57 /
#: 0.57 and keyword 1.00 in all three; deeper legs let incidental word matches displace
#: semantic hits, and cost more filter checks per query.
HYBRID_DEPTH = 20
#: weight of the any-word leg in hybrid's fusion (the semantic leg weighs 1)
TEXT_WEIGHT = float(os.environ.get("MEMLEDGER_HYBRID_TEXT_WEIGHT", "0.5"))


@dataclass(frozen=True)
class RankedPage:
    items: list[dict[str, Any]]
    next_cursor: str | None


def parse_offset(cursor: str | None) -> int:
    """The offset a ranked page starts at: the leading number of the cursor. Ranked pages
    hand out `<offset>~ranked`; any cursor the document allows is accepted (a keyset
    cursor `<height>~<id>` reads as offset <height>), never refused."""
    if cursor is None:
        return 0
    return int(cursor.partition("~")[0])


#: Question and function words, dropped from hybrid's any-word leg (where "what", "the"
#: or "do" would rank every memory that has them); kept when nothing else is left.
STOPWORDS = frozenset("""
a about above after again all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had
has have having he her here hers him his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours out over own same she should
so some such than that the their theirs them then there these they this those through to
too under until up very was we were what when where which while who whom why will with
would you your yours
""".split())


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


#: the default filter's check reads the challenged memories' ids once per projection
#: height, while there are at most this many; past it, candidates are checked row by row
EXCLUDED_CAP = 200
# plain SQL, compiled once: this runs on every search with the default filter
_CHALLENGED_FEW = sa.text("SELECT id FROM memories WHERE status = 'challenged' LIMIT :cap")
#: per engine: (projection height, the challenged ids, or None when more than the cap)
_challenged_at: weakref.WeakKeyDictionary[Engine, tuple[int, frozenset[str] | None]] = \
    weakref.WeakKeyDictionary()

#: rows read by a search's filter check, by id: the page is served from them
Rows = dict[str, Any]


def _challenged(conn: sa.Connection, height: int) -> frozenset[str] | None:
    """The challenged memories' ids when there are at most EXCLUDED_CAP, else None; read
    once per projection height (a memory's status changes only in a block) and shared by
    the searches at that height. Read after the height, so it may be a block newer than
    it: a memory challenged since is left out a search early, never shown late."""
    key = conn.engine
    cached = _challenged_at.get(key)
    if cached is not None and cached[0] == height:
        return cached[1]
    ids = conn.execute(_CHALLENGED_FEW, {"cap": EXCLUDED_CAP + 1}).scalars().all()
    few = frozenset(str(i) for i in ids) if len(ids) <= EXCLUDED_CAP else None
    _challenged_at[key] = (height, few)
    return few


def _passing(conn: sa.Connection, flt: MemoryFilter, height: int | None = None,
             rows: Rows | None = None, row_by_row: bool = False) -> Keep:
    """keep(ids): the ids among `ids` that `flt` passes, read from the projection.

    The default filter (every status but `challenged`) rejects few memories, so while
    there are at most EXCLUDED_CAP of them their ids are read once per projection
    `height` (each search when it is not given) and candidates are checked against that
    set: no row lookup per candidate. A filter that passes everything (include_disputed
    alone) reads nothing. These two pass an id the projection lacks (an index ahead of a
    rebuilt projection); the page's row fetch then leaves it out.
    Otherwise (or with `row_by_row`) candidates are checked in the projection, and the
    rows that pass are kept in `rows` when it is given: the page is served from them,
    with no second read. A search that needs no projection height for anything else
    (semantic) takes that path: one statement, where the set needs two (the height,
    then the page's rows).
    One search asks this for every candidate of every leg and widening round, so answers
    are remembered for the search, and the statement takes the ids as one parameter
    (a JSON array on SQLite, an array on PostgreSQL): the same SQL text every time, with
    no per-call expansion of an IN list (that compile step was ~40% of the check)."""
    if not (_narrowed(flt) or flt.status is not None or row_by_row):
        if flt.include_disputed:
            return set
        excluded = _challenged(conn, projection_height(conn) if height is None else height)
        if excluded is not None:
            return lambda ids: set(ids) - excluded
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        listed: Any = memories.c.id == sa.func.any(
            sa.bindparam("ids", type_=sa.ARRAY(sa.Text)))
    else:
        listed = memories.c.id.in_(sa.select(sa.column("value")).select_from(
            sa.func.json_each(sa.bindparam("ids"))))

    def pack(chunk: list[str]) -> Any:
        return chunk if postgres else json.dumps(chunk)
    columns = _MEMORY_COLUMNS if rows is not None else [memories.c.id]
    query = apply_filters(sa.select(*columns), flt).where(listed)
    known: dict[str, bool] = {}

    def keep(ids: list[str]) -> set[str]:
        fresh = [i for i in dict.fromkeys(ids) if i not in known]
        for start in range(0, len(fresh), 1000):
            chunk = fresh[start:start + 1000]
            passed = set()
            for row in conn.execute(query, {"ids": pack(chunk)}):
                passed.add(row.id)
                if rows is not None:
                    rows[row.id] = row
            known.update((i, i in passed) for i in chunk)
        return {i for i in ids if known[i]}
    return keep


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
                  first: Ranked | None = None) -> Ranked | None:
    """Top `n` by BM25 from the word index and the memories not in it yet, keeping only
    what the filter passes: fetch 2n, widen x4 until n pass (`first`: the index's first
    fetch, when the caller has made it). None when even OVERFETCH_CAP hits leave fewer
    than n and more exist (a filter that narrow is answered exactly by the projection)."""
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
            return None
        fetch = min(fetch * 4, OVERFETCH_CAP)


def text_ranked(conn: sa.Connection, flt: MemoryFilter, text: str, n: int,
                any_word: bool = False, words_index: TextIndexer | None = None,
                keep: Keep | None = None, height: int | None = None,
                first: Ranked | None = None) -> Ranked:
    """Top `n` memories by word relevance among those `flt` passes (`keep`: the filter
    check to use, shared with the other leg of a hybrid search; `height`: the
    projection's, read once by the search; `first`: the word index's first fetch)."""
    if len(text) > MAX_QUERY_CHARS:
        raise Problem(422, "invalid_query", f"q is longer than {MAX_QUERY_CHARS} characters")
    unindexed = words_index.unindexed(conn, height) if words_index is not None else None
    if words_index is not None and unindexed is not None:
        terms = content_words(text) if any_word else query_words(text)
        found = _indexed_text(keep or _passing(conn, flt, height), terms, n, any_word,
                              words_index, unindexed, first)
        if found is not None:
            return found
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


def _narrowed(flt: MemoryFilter) -> bool:
    return bool(flt.domain or flt.type or flt.author or flt.tags or
                flt.status not in (None, "committed"))


def semantic(conn: sa.Connection, flt: MemoryFilter, text: str, n: int,
             indexer: Indexer, keep: Keep | None = None, vector: Any = None,
             first: Ranked | None = None) -> Ranked:
    """Top `n` memories by meaning among those `flt` passes (`vector`: the text's
    embedding and `first` the index's first fetch for it, when the caller has them)."""
    if vector is None:
        vector = indexer.embedder.embed([text])[0]
    keep = keep or _passing(conn, flt)

    def narrow(cap: int) -> list[str] | None:
        rows = conn.execute(apply_filters(sa.select(memories.c.id), flt)
                            .limit(cap + 1)).scalars().all()
        return None if len(rows) > cap else [str(r) for r in rows]

    return semantic_ranked(indexer.index, vector, n, keep,
                           narrow if _narrowed(flt) else None, first)


def hybrid(conn: sa.Connection, flt: MemoryFilter, text: str, depth: int,
           indexer: Indexer, words_index: TextIndexer | None, keep: Keep,
           height: int) -> Ranked:
    """Both legs' `depth` best fused. Each leg's first candidates are fetched from its
    index before either is checked, and checked in one statement: a search that takes
    one round trip for both legs instead of one each (each is a wait on a busy
    database, and on PostgreSQL under writes the wait was the tail)."""
    rare = distinctive_words(conn, text, words_index)
    vector = indexer.embedder.embed([text])[0]
    fetch, chunk = first_fetch(depth), first_chunk(depth)
    words_first = meaning_first = None
    if rare and words_index is not None and words_index.serving:
        words_first = words_index.index.search(content_words(rare), fetch, any_word=True)
    if not _narrowed(flt) and len(indexer.index):  # a narrow filter scores its own set
        meaning_first = indexer.index.search(vector, fetch)
    keep([m for m, _ in (words_first or [])[:chunk]] +
         [m for m, _ in (meaning_first or [])[:chunk]])  # answers kept for both legs
    words = text_ranked(conn, flt, rare, depth, any_word=True, words_index=words_index,
                        keep=keep, height=height, first=words_first) if rare else []
    meaning = semantic(conn, flt, text, depth, indexer, keep, vector, meaning_first)
    return rrf([[m for m, _ in words], [m for m, _ in meaning]], weights=(TEXT_WEIGHT, 1.0))


def ranked_search(conn: sa.Connection, flt: MemoryFilter, mode: str, limit: int,
                  cursor: str | None, indexer: Indexer | None,
                  words_index: TextIndexer | None = None) -> RankedPage:
    """One page of a ranked search; each item carries `score` and `mode`."""
    assert flt.q is not None
    if mode not in MODES:
        raise Problem(422, "invalid_mode", f"mode must be one of {', '.join(MODES)}")
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
    # One filter check serves every leg, and one read of the projection's height every
    # leg that needs it (the word leg, for the memories above the word index; the
    # default filter's challenged ids): each round trip to the database is a wait, and
    # on a busy PostgreSQL the tail. A semantic search needs no height: its check reads
    # the rows it serves, one statement in all.
    rows: Rows = {}
    if mode == "semantic":
        assert indexer is not None
        keep = _passing(conn, flt, rows=rows, row_by_row=not flt.include_disputed)
        ranked = semantic(conn, flt, flt.q, want, indexer, keep)
    else:
        height = projection_height(conn)
        keep = _passing(conn, flt, height, rows)
        if mode == "text":
            ranked = text_ranked(conn, flt, flt.q, want, words_index=words_index,
                                 keep=keep, height=height)
        else:
            assert indexer is not None
            ranked = hybrid(conn, flt, flt.q, max(want, HYBRID_DEPTH), indexer,
                            words_index, keep, height)[:want]
    window = ranked[offset:offset + limit]
    missing = [m for m, _ in window if m not in rows]
    if missing:
        query = sa.select(*_MEMORY_COLUMNS).where(memories.c.id.in_(missing))
        rows.update((row.id, row) for row in conn.execute(query))
    items = []
    for mid, score in window:
        found = rows.get(mid)
        if found is None:  # gone from the projection since ranking: skip it
            continue
        item = memory_json(found)
        item["score"] = round(score, 6)
        item["mode"] = mode
        items.append(item)
    end = offset + limit
    next_cursor = f"{end}~{RANKED_CURSOR}" if len(ranked) > end and end < MAX_RANKED else None
    return RankedPage(items, next_cursor)
