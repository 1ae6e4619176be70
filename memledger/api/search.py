"""Full-text predicates over memories(content, tags), one per projection dialect.

User text is never spliced into a query language: SQLite gets every word as a quoted
FTS5 string (so `AND`, `NEAR`, `*`, `"` and `:` are plain text), PostgreSQL gets it
through plainto_tsquery. Both mean "all of these words" (stemmed, every word kept,
accents folded: TS_CONFIG is made to match FTS5's porter unicode61, see schema.py).
"""

from __future__ import annotations

import re

import sqlalchemy as sa

from memledger.api.problems import Problem
from memledger.api.schemas import MAX_QUERY_WORDS, QUERY_SEPARATORS
from memledger.projection.schema import FTS_TABLE, TS_CONFIG, TSV_COLUMN

MAX_QUERY_CHARS = 512
COMMON_MIN_MATCHES = 500
_SEPARATORS = re.compile(f"[{QUERY_SEPARATORS}]+")


def split_query(text: str) -> list[str]:
    """Every word of `q`: the runs between separators, as the QUERY pattern counts them."""
    return [t for t in _SEPARATORS.split(text) if t]


def query_words(text: str) -> list[str]:
    """The words of `q` that can match: those of split_query (at most 32, by the document's
    QUERY pattern) that hold a letter or digit."""
    return [t for t in split_query(text) if any(ch.isalnum() for ch in t)]


def check_query(text: str) -> None:
    """422 invalid_query for a q beyond the document's bounds (the route's pattern refuses
    it first; this holds for any caller)."""
    if len(text) > MAX_QUERY_CHARS:
        raise Problem(422, "invalid_query", f"q is longer than {MAX_QUERY_CHARS} characters")
    words = len(split_query(text))
    if words > MAX_QUERY_WORDS:
        raise Problem(422, "invalid_query", f"q has {words} words; at most "
                                            f"{MAX_QUERY_WORDS} are searched for")


def fts5_query(text: str) -> str | None:
    """AND of quoted terms, inner double quotes doubled as FTS5 string syntax requires;
    None when no word is left (such a query matches nothing)."""
    terms = query_words(text)
    if not terms:
        return None
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


def search_clause(dialect: str, text: str, *, ordered_scan: bool = False) -> sa.TextClause:
    """A WHERE predicate selecting memories that match `text`.

    `ordered_scan` (SQLite) marks the predicate with unary `+` so the planner walks
    memories in page order and probes the match list, instead of fetching and sorting
    every match — the right plan for common words, the wrong one for rare words.
    """
    check_query(text)
    fts = fts5_query(text)
    if fts is None:
        return sa.text("1 = 0")
    if dialect == "sqlite":
        plus = "+" if ordered_scan else ""
        return sa.text(
            f"{plus}memories.rowid IN (SELECT rowid FROM {FTS_TABLE} "
            f"WHERE {FTS_TABLE} MATCH :fts_q)"
        ).bindparams(fts_q=fts)
    if dialect == "postgresql":
        # the same words, space-joined: PostgreSQL text cannot carry NUL
        return sa.text(
            f"memories.{TSV_COLUMN} @@ plainto_tsquery('{TS_CONFIG}'::regconfig, :fts_q)"
        ).bindparams(fts_q=" ".join(query_words(text)))
    raise Problem(501, "search_unsupported", f"full-text search is not available on {dialect}")


def common_on_sqlite(conn: sa.Connection, text: str) -> bool:
    """True when `text` matches at least ~1% of memories (SQLite only).

    Counting is capped, so the probe costs at most that many FTS postings (well under a
    millisecond per thousand); max(rowid) stands in for the table size for free.
    """
    fts = fts5_query(text)
    if fts is None:
        return False
    size = conn.exec_driver_sql("SELECT coalesce(max(rowid), 0) FROM memories").scalar_one()
    cap = max(COMMON_MIN_MATCHES, int(size) // 100)
    found = conn.execute(sa.text(
        f"SELECT count(*) FROM (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :q "
        "LIMIT :cap)"), {"q": fts, "cap": cap}).scalar_one()
    return int(found) >= cap
