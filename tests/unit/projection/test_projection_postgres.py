"""The PostgreSQL projection answers as the SQLite one does, on a real server: pages and
their cursors in byte order whatever the database's collation, and every memory consensus
accepts is written and found by its words."""

from __future__ import annotations

import hashlib
import random
import string
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from memledger.api import queries, ranked
from memledger.consensus.families.memory.record import validate_fields
from memledger.consensus.store import codec
from memledger.projection import schema
from memledger.projection.schema import SEARCH_VERSION, TSV_COLUMN, metadata
from memledger.projection.writer import Projection
from memledger.protocol import records
from memledger.protocol.limits import MAX_CONTENT_BYTES, MAX_TAG_BYTES, MAX_TAGS
from memledger.testnet.compose import create_database_sql
from tests.support.chain import LocalChain, seeded_key
from tests.support.postgres import (
    create_database,
    drop_database,
    libpq_url,
    unique_db_name,
    with_database,
)

pytestmark = pytest.mark.postgres

#: valid memory ids whose byte order differs from en-US order ('a-note' < 'B-note' there)
IDS = ["B-note", "a.note", "a-note", "anote", "Zeta", "alpha", "a_b", "A~1"]
PROPOSALS = ["B-2", "a-1", "a.1", "Zed", "a_1"]


def _memory(mid: str, content: str, tags: list[str] | None = None, height: int = 5
            ) -> list[tuple[bytes, bytes]]:
    rec = {"id": mid, "domain": "d", "author": "a" * 64, "type": "fact",
           "content_hash": hashlib.sha256(content.encode()).hexdigest(), "confidence_ppm": 1,
           "tags": tags or [], "status": "committed", "submitted_height": height,
           "submitted_time_ns": 1, "decided_height": height, "votes": {}, "ballot": None,
           "history": [[height, "committed"]], "cocommit": None, "tx": "0" * 64}
    return [(records.MEMORY + mid.encode(), codec.encode(rec)),
            (records.CONTENT + mid.encode(), content.encode())]


def _changes() -> list[tuple[bytes, bytes]]:
    changes = [c for mid in IDS for c in _memory(mid, f"memory {mid}")]
    changes += [(records.PROPOSAL + p.encode(), b'{"id": "%s"}' % p.encode())
                for p in PROPOSALS]
    return sorted(changes)


@pytest.fixture
def en_us_url(postgres_url: str) -> Iterator[str]:
    """A fresh database whose default collation is ICU en-US (what a plain CREATE
    DATABASE gives on the postgres image is libc en_US.utf8: the same order here)."""
    name = unique_db_name("en")
    with psycopg.connect(libpq_url(with_database(postgres_url, "postgres")),
                         autocommit=True) as conn:
        have = conn.execute("SELECT 1 FROM pg_collation WHERE collname = 'en-US-x-icu'").fetchone()
        assert have is not None, "this PostgreSQL has no ICU en-US collation to test with"
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0 LOCALE_PROVIDER icu '
                     "ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'")
    try:
        yield with_database(postgres_url, name)
    finally:
        drop_database(postgres_url, name)


def _memory_order(proj: Projection) -> list[str]:
    with proj.engine.connect() as conn:
        items, _ = queries.list_memories(conn, queries.MemoryFilter(), 100, None)
    return [m["id"] for m in items]


def _proposal_order(proj: Projection) -> list[str]:
    with proj.engine.connect() as conn:
        items, _ = queries.list_documents(conn, "proposal", 100, None)
    return [d["id"] for d in items]


def test_pages_and_cursors_are_in_byte_order_on_an_en_us_database(en_us_url: str) -> None:
    lite, pg = Projection("sqlite://"), Projection(en_us_url)
    for proj in (lite, pg):
        proj.flush(5, b"\x05" * 32, _changes())
    assert _memory_order(lite) == _memory_order(pg) == sorted(IDS)
    assert _proposal_order(lite) == _proposal_order(pg) == sorted(PROPOSALS)
    # a client paging 2 at a time, its requests served by either node in turn
    seen: list[str] = []
    docs: list[str] = []
    cursor: str | None = None
    for turn in range(len(IDS)):
        with (lite, pg)[turn % 2].engine.connect() as conn:
            page, cursor = queries.list_memories(conn, queries.MemoryFilter(), 2, cursor)
        seen += [m["id"] for m in page]
        if cursor is None:
            break
    for turn in range(len(PROPOSALS)):
        with (pg, lite)[turn % 2].engine.connect() as conn:
            dpage, cursor = queries.list_documents(conn, "proposal", 2, cursor)
        docs += [d["id"] for d in dpage]
        if cursor is None:
            break
    assert seen == sorted(IDS) and docs == sorted(PROPOSALS)
    assert lite.dump() == pg.dump()  # the consistency checker compares dumps in key order
    lite.close()
    pg.close()


def test_an_older_projection_is_given_byte_order_when_opened(en_us_url: str) -> None:
    proj = Projection(en_us_url)
    with proj.engine.begin() as conn:  # key columns as projections made them before
        for table in metadata.sorted_tables:
            for column in table.columns:
                if isinstance(column.type, sa.String) and column.type.length:
                    conn.exec_driver_sql(
                        f'ALTER TABLE {table.name} ALTER COLUMN "{column.name}" TYPE '
                        f'varchar({column.type.length}) COLLATE "default"')
    proj.flush(5, b"\x05" * 32, _changes())
    assert _memory_order(proj) != sorted(IDS)  # the database's order: what this fixes
    proj.close()
    reopened = Projection(en_us_url)
    assert _memory_order(reopened) == sorted(IDS)
    assert _proposal_order(reopened) == sorted(PROPOSALS)
    with reopened.engine.connect() as conn:
        collations = set(conn.exec_driver_sql(
            "SELECT coalesce(co.collname, '') FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid "
            "LEFT JOIN pg_collation co ON co.oid = a.attcollation "
            "WHERE c.relname = 'memories' AND a.attname IN ('id', 'domain', 'tx')").scalars())
    assert collations == {"C"}
    reopened.close()
    Projection(en_us_url).close()  # a third open finds nothing left to change


def test_compose_init_creates_byte_order_databases(postgres_url: str) -> None:
    """`testnet --postgres --compose`'s init statement runs and gives collation C."""
    name = unique_db_name("compose")
    with psycopg.connect(libpq_url(with_database(postgres_url, "postgres")),
                         autocommit=True) as conn:
        conn.execute(create_database_sql(name))
        try:
            row = conn.execute("SELECT datcollate FROM pg_database WHERE datname = %s",
                               (name,)).fetchone()
        finally:
            conn.execute(f'DROP DATABASE "{name}"')
    assert row == ("C",)


# ----------------------------------------------------------------- the search column
def _rng_word(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(n))


def _fill(tokens: Iterator[str]) -> str:
    """Space-separated tokens up to the consensus limit on content bytes, after a word to
    search for."""
    parts, size = ["aardvarks"], len("aardvarks")
    for token in tokens:
        if size + 1 + len(token) > MAX_CONTENT_BYTES:
            break
        parts.append(token)
        size += len(token) + 1
    return " ".join(parts)


def _long_urls(rng: random.Random) -> Iterator[str]:
    """Each indexed whole, as host and as path: 2 bytes of vector per byte of content."""
    while True:
        yield "ab.cd/" + _rng_word(rng, 2040)


def _short_urls(rng: random.Random) -> Iterator[str]:
    """Three unique lexemes and their positions per 15 bytes: 2.8 bytes per byte, the
    most found among url, host, email, hyphenated, numeric and short-word mixes."""
    while True:
        yield f"{_rng_word(rng, 4)}.{_rng_word(rng, 3)}/{_rng_word(rng, 4)}"


def _biggest_memory(kind: str) -> tuple[str, list[str]]:
    """Content and tags at every consensus limit, whose vector is over PostgreSQL's."""
    rng = random.Random(kind)
    content = _fill(_long_urls(rng) if kind == "long" else _short_urls(rng))
    tags = sorted(f"ab.cd/{_rng_word(rng, MAX_TAG_BYTES - 6)}" for _ in range(MAX_TAGS))
    validate_fields("general", "fact", content, hashlib.sha256(content.encode()).digest(),
                    900_000, tags)  # what consensus checks
    return content, tags


def _found(proj: Projection, q: str) -> list[str]:
    with proj.engine.connect() as conn:
        flt = queries.MemoryFilter(q=q, status=("proposed", "committed"))
        items, _ = queries.list_memories(conn, flt, 10, None)
    return [m["id"] for m in items]


ALICE = seeded_key("pg-alice")


@pytest.mark.parametrize("kind", ["long", "short"])
def test_the_biggest_memory_consensus_accepts_commits_on_postgresql(
        tmp_path: Path, fresh_postgres_url: str, postgres_url: str, kind: str) -> None:
    """The vector of such content is over 1 MiB: the flush failed and the node halted at
    Commit, at every restart. Now a prefix of the content is indexed, the tags in full."""
    content, tags = _biggest_memory(kind)
    with psycopg.connect(libpq_url(fresh_postgres_url)) as conn, \
            pytest.raises(psycopg.errors.ProgramLimitExceeded):
        conn.execute("SELECT to_tsvector('english', %s)", (content + " " + " ".join(tags),))
    chain = LocalChain(tmp_path / "c", db_url=fresh_postgres_url)
    b = chain.builder(ALICE)
    results = chain.block([
        b.submit(chain.next_nonce(ALICE), "m-big", content, tags=tags),
        b.submit(chain.next_nonce(ALICE), "m-small", "the usual kind of memory")])
    assert [r.code for r in results] == [0, 0] and chain.halts == []
    proj = chain.app.projection
    assert _found(proj, "aardvark") == ["m-big"]
    assert all(_found(proj, tag) == ["m-big"] for tag in tags)
    assert _found(proj, "usual memory") == ["m-small"]
    # a rebuild writes the same rows through another path (COPY-like bulk inserts)
    name = unique_db_name("rebuilt")
    target = Projection(create_database(postgres_url, name))
    try:
        store = chain.app.store
        target.rebuild(store, store.last_height, store.last_app_hash)
        assert target.dump() == proj.dump()
        assert _found(target, tags[0]) == ["m-big"]
    finally:
        target.close()
        drop_database(postgres_url, name)
    chain.close()


def test_an_older_search_column_is_made_again_when_opened(fresh_postgres_url: str) -> None:
    """A projection made before SEARCH_VERSION 2 has the column that halted: opening it
    makes the column again, every row's vector recomputed."""
    proj = Projection(fresh_postgres_url)
    with proj.engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE memories DROP COLUMN {TSV_COLUMN}")
        conn.exec_driver_sql(
            f"ALTER TABLE memories ADD COLUMN {TSV_COLUMN} tsvector GENERATED ALWAYS AS "
            "(to_tsvector('english'::regconfig, coalesce(content, '') || ' ' || tags)) STORED")
    proj.flush(5, b"\x05" * 32, sorted(_memory("m-old", "zebras crossed the road")))
    proj.close()
    reopened = Projection(fresh_postgres_url)
    with reopened.engine.connect() as conn:
        comment = conn.exec_driver_sql(
            f"SELECT col_description('memories'::regclass, attnum) FROM pg_attribute "
            f"WHERE attrelid = 'memories'::regclass AND attname = '{TSV_COLUMN}'").scalar()
        indexes = conn.exec_driver_sql(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'memories' "
            f"AND indexdef LIKE '%%gin ({TSV_COLUMN})%%'").scalar()
    assert comment == f"{SEARCH_VERSION} unaccent" and indexes == 1
    assert _found(reopened, "zebra") == ["m-old"]
    assert _found(reopened, "the road") == ["m-old"]  # recomputed with today's config
    content, tags = _biggest_memory("short")
    reopened.flush(6, b"\x06" * 32, sorted(_memory("m-big", content, tags, height=6)))
    assert _found(reopened, tags[0]) == ["m-big"]
    reopened.close()
    Projection(fresh_postgres_url).close()  # the current column is kept as it is


# ----------------------------------------------------------------- word search
WORDED = {
    "m-who": "The Who played their last show",
    "m-cafe": "Meet at the café near the station",
    "m-it": "IT said it will be down",
    "m-zurich": "Flights to Zürich are naïve about the weather",
    "m-plain": "Cafes and stations in winter",
}
#: stop words, accents either way, case, stems: the answers FTS5 (porter unicode61) gives
QUERIES = {
    "the who": ["m-who"],
    "will be down": ["m-it"],
    "it": ["m-it"],
    "cafe": ["m-cafe", "m-plain"],
    "café": ["m-cafe", "m-plain"],
    "CAFÉS": ["m-cafe", "m-plain"],
    "zurich naive": ["m-zurich"],
    "Zürich": ["m-zurich"],
    "station the": ["m-cafe"],
    "stations": ["m-cafe", "m-plain"],
    "play": ["m-who"],
}


def _worded() -> list[tuple[bytes, bytes]]:
    return sorted(c for mid, text in WORDED.items() for c in _memory(mid, text))


def _answers(proj: Projection) -> dict[str, tuple[list[str], list[str]]]:
    """Per query: the words listing's ids, and text mode's from the projection."""
    out = {}
    with proj.engine.connect() as conn:
        for q in QUERIES:
            flt = queries.MemoryFilter(q=q)
            listed, _ = queries.list_memories(conn, flt, 50, None)
            hits = ranked.text_ranked(conn, queries.MemoryFilter(), q, 50)
            out[q] = (sorted(m["id"] for m in listed), sorted(mid for mid, _ in hits))
    return out


def test_word_search_answers_as_on_sqlite(fresh_postgres_url: str) -> None:
    """With english, stop words emptied the query (nothing found) and accents counted."""
    lite, pg = Projection("sqlite://"), Projection(fresh_postgres_url)
    for proj in (lite, pg):
        proj.flush(5, b"\x05" * 32, _worded())
    want = {q: (ids, ids) for q, ids in QUERIES.items()}
    assert _answers(lite) == want
    assert _answers(pg) == want
    lite.close()
    pg.close()


def test_without_unaccent_stop_words_still_match_and_it_is_taken_up_later(
        fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database that cannot have unaccent still keeps every word; once it can, the
    next open makes the configuration and the column again, accents folded."""
    with monkeypatch.context() as patch:
        patch.setattr(schema, "_unaccent", lambda conn: None)
        proj = Projection(fresh_postgres_url)
        proj.flush(5, b"\x05" * 32, _worded())
        assert _found(proj, "the who") == ["m-who"]
        assert _found(proj, "café") == ["m-cafe"]  # accents kept: only the same word
        proj.close()
    proj = Projection(fresh_postgres_url)
    assert sorted(_found(proj, "café")) == ["m-cafe", "m-plain"]
    with proj.engine.connect() as conn:
        marks = conn.exec_driver_sql(
            "SELECT obj_description(oid, 'pg_ts_config') FROM pg_ts_config "
            f"WHERE cfgname = '{schema.TS_CONFIG}'").scalars().all()
    assert marks == [f"{SEARCH_VERSION} unaccent"]
    proj.close()
