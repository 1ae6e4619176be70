"""The projection's SQL schema: tables, the full-text index, and the engine settings.

The tables are a read model: every row is derived from canonical records
(`mapping.py` says how), so any of them can be dropped and rebuilt.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

log = logging.getLogger("memledger.projection")

metadata = sa.MetaData()


def _key(length: int) -> sa.types.TypeEngine[str]:
    """A string column compared and ordered by its bytes on every backend.

    SQLite's BINARY collation and Python order strings by code point (= UTF-8 bytes);
    PostgreSQL uses the database's collation unless told otherwise, and en_US (the
    postgres image's default) puts 'a-note' before 'B-note'. Pages and their keyset
    cursors must mean the same on every node, so PostgreSQL columns are COLLATE "C".
    """
    return sa.String(length).with_variant(sa.String(length, collation="C"), "postgresql")


memories = sa.Table(
    "memories", metadata,
    sa.Column("id", _key(128), primary_key=True),
    sa.Column("domain", _key(128), nullable=False, index=True),
    sa.Column("author", _key(64), nullable=False, index=True),
    sa.Column("type", _key(16), nullable=False),
    sa.Column("content", sa.Text, nullable=True),
    sa.Column("content_hash", _key(64), nullable=False),
    sa.Column("confidence_ppm", sa.Integer, nullable=False),
    sa.Column("tags", sa.Text, nullable=False),
    sa.Column("status", _key(16), nullable=False, index=True),
    sa.Column("submitted_height", sa.BigInteger, nullable=False, index=True),
    sa.Column("submitted_time_ns", sa.BigInteger, nullable=False),
    sa.Column("decided_height", sa.BigInteger, nullable=True),
    sa.Column("scope", _key(128), nullable=True),
    sa.Column("cocommit", _key(128), nullable=True),
    sa.Column("tx", _key(64), nullable=False),
    sa.Column("record", sa.Text, nullable=False),
)
#: the auto-voter's duplicate check, once per proposed memory (content_hash = ? AND
#: status = 'committed'): without it SQLite walked every committed memory through the
#: status index (~75 ms a vote at 100k committed memories, seconds under load), which
#: made the voter slower the more the ledger held. Both columns, so the planner, which
#: has no statistics, prefers it to the status index.
CONTENT_HASH_INDEX = sa.Index("ix_memories_content_hash", memories.c.content_hash,
                              memories.c.status)
memory_tags = sa.Table(
    "memory_tags", metadata,
    sa.Column("memory_id", _key(128), primary_key=True),
    sa.Column("tag", _key(64), primary_key=True, index=True),
)
votes = sa.Table(
    "votes", metadata,
    sa.Column("memory_id", _key(128), primary_key=True),
    sa.Column("voter", _key(64), primary_key=True),
    sa.Column("decision", _key(8), nullable=False),
    sa.Column("height", sa.BigInteger, nullable=False),
)
accounts = sa.Table(
    "accounts", metadata,
    sa.Column("public_key", _key(64), primary_key=True),
    # Nonces go up to 2^64-1: stored as decimal text, exact on every backend.
    sa.Column("nonce", _key(20), nullable=False),
)
domains = sa.Table(
    "domains", metadata,
    sa.Column("name", _key(128), primary_key=True),
    sa.Column("owner", _key(64), nullable=True),
    sa.Column("scope", _key(128), nullable=True),
    sa.Column("created", sa.BigInteger, nullable=False),
)
grants = sa.Table(
    "grants", metadata,
    sa.Column("domain", _key(128), primary_key=True),
    sa.Column("grantee", _key(64), primary_key=True),
    sa.Column("level", _key(8), nullable=False),
    # Grant expiry is a user-chosen uint64: text keeps every value exact on every backend.
    sa.Column("expires", _key(20), nullable=False),
    sa.Column("record", sa.Text, nullable=False),
)
corroborations = sa.Table(
    "corroborations", metadata,
    sa.Column("memory_id", _key(128), primary_key=True),
    sa.Column("agent", _key(64), primary_key=True),
    sa.Column("height", sa.BigInteger, nullable=False),
)
# Records whose shape is mostly read whole: id + JSON document.
documents = sa.Table(
    "documents", metadata,
    sa.Column("kind", _key(16), primary_key=True),
    sa.Column("id", _key(160), primary_key=True),
    sa.Column("record", sa.Text, nullable=False),
)
validators = sa.Table(
    "validators", metadata,
    sa.Column("public_key", _key(64), primary_key=True),
    sa.Column("power", sa.BigInteger, nullable=False),
)
receipts = sa.Table(
    "receipts", metadata,
    sa.Column("height", sa.BigInteger, primary_key=True),
    sa.Column("app_hash", _key(64), nullable=False),
)


# ----------------------------------------------------------------- byte order
def use_byte_order(engine: Engine) -> None:
    """Give the key columns of a PostgreSQL projection made before they were declared
    COLLATE "C" that collation (`_key`), so an existing projection orders its pages as
    a new one does. Idempotent: a no-op once every column has it."""
    with engine.begin() as conn:
        use_byte_order_in(conn)


def use_byte_order_in(conn: Connection) -> None:
    """use_byte_order inside the caller's transaction. The ALTER rebuilds the table's
    indexes on those columns (their order changes), not its rows."""
    if conn.dialect.name != "postgresql":
        return
    found = sa.text(
        "SELECT a.attname, coalesce(co.collname, '') FROM pg_attribute a "
        "LEFT JOIN pg_collation co ON co.oid = a.attcollation "
        "WHERE a.attrelid = to_regclass(:table) AND a.attnum > 0 AND NOT a.attisdropped")
    quote = conn.dialect.identifier_preparer.quote
    for table in metadata.sorted_tables:
        have = dict(conn.execute(found, {"table": quote(table.name)}).tuples().all())
        changes = []
        for column in table.columns:
            impl = column.type.dialect_impl(conn.dialect)
            want = getattr(impl, "collation", None)
            if want is not None and column.name in have and have[column.name] != want:
                changes.append(f"ALTER COLUMN {quote(column.name)} TYPE "
                               f"{impl.compile(dialect=conn.dialect)}")
        if changes:
            conn.exec_driver_sql(f"ALTER TABLE {quote(table.name)} {', '.join(changes)}")


# ----------------------------------------------------------------- full-text search
# Off the flush path on purpose: triggers (SQLite) and a generated column (PostgreSQL)
# keep the index in step with `memories`, so flush and rebuild code stay unchanged.
FTS_TABLE = "memories_fts"
TSV_COLUMN = "search_tsv"
#: PostgreSQL text search configuration, made in the projection's schema (queries name it
#: unqualified, as they name the tables): english's parser and stemmer without its stop
#: words, accents folded by `unaccent` when the database has it — so that a search
#: matches what SQLite's FTS5 (porter unicode61: every word kept, diacritics removed)
#: matches. With english, 'the who' or 'will be down' matched nothing (all stop words,
#: so the query was empty) and 'cafe' did not find 'café'.
TS_CONFIG = "memledger_search"
#: its snowball english stemmer, with no stop word list
TS_STEM = "memledger_stem"
#: token types english stems (the others, numbers, URLs, e-mails..., are kept whole)
_STEMMED = "asciiword, asciihword, hword_asciipart, word, hword, hword_part"
#: the ones that may hold non-ASCII letters, and so accents
_ACCENTED_WORDS = "word, hword, hword_part"
_ACCENTED_NUMWORDS = "numword, numhword, hword_numpart"

_SQLITE_FTS = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(content, tags, "
    "content='memories', content_rowid='rowid', tokenize='porter unicode61')",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_ai AFTER INSERT ON memories BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, content, tags) VALUES (new.rowid, new.content, new.tags); "
    "END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_ad AFTER DELETE ON memories BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content, tags) "
    "VALUES ('delete', old.rowid, old.content, old.tags); END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_au AFTER UPDATE OF content, tags ON memories "
    "WHEN old.content IS NOT new.content OR old.tags IS NOT new.tags BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content, tags) "
    "VALUES ('delete', old.rowid, old.content, old.tags); "
    f"INSERT INTO {FTS_TABLE}(rowid, content, tags) VALUES (new.rowid, new.content, new.tags); "
    "END",
]
#: PostgreSQL's search column and configuration as this code defines them, kept as their
#: comments (with " unaccent" when accents are folded): a column with another (or none:
#: projections before version 2) is dropped and made again when the app opens the
#: projection, which recomputes every row's vector. 2: bounded vectors; 3: TS_CONFIG.
SEARCH_VERSION = "memledger search 3"
#: the function the generated column calls (created in the projection's schema)
TSV_FUNCTION = "memledger_search_vector"

#: to_tsvector refuses a vector over 1 MiB of lexemes and positions ("string is too long
#: for tsvector"), and consensus accepts content that makes one (512 KiB of URL-like
#: words: each is indexed whole and as host and path, with positions): the failed flush
#: halted the node at every restart. This indexes all of the content when its vector fits
#: and otherwise a prefix that fits, halving it until it does, with the tags in full (at
#: most 32 x 64 bytes; with no content left they fit with room to spare, so the loop
#: ends). The handler's block runs as a subtransaction that writes nothing: no xid, and
#: no cost that showed on a 50k-row COPY.
_TSV_FUNCTION_BODY = """
DECLARE
    n integer := length(body);
BEGIN
    LOOP
        BEGIN
            RETURN to_tsvector({config}::regconfig, left(body, n) || ' ' || tags);
        EXCEPTION WHEN program_limit_exceeded THEN
            IF n = 0 THEN
                RAISE;
            END IF;
            n := n / 2;
        END;
    END LOOP;
END
"""


def _unaccent(conn: Connection) -> str | None:
    """The `unaccent` dictionary, qualified; the extension is created if the database
    has it and lets us (a contrib module, trusted since PostgreSQL 13: the database
    owner may create it). None, with a warning, when it cannot be had."""
    def dictionary() -> str | None:
        schema = conn.exec_driver_sql(
            "SELECT extnamespace::regnamespace::text FROM pg_extension "
            "WHERE extname = 'unaccent'").scalar()
        return None if schema is None else f"{schema}.unaccent"

    found = dictionary()
    if found is not None:
        return found
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS unaccent")
    except sa.exc.DBAPIError as exc:
        log.warning("PostgreSQL extension unaccent unavailable (%s): word search on this "
                    "projection will not fold accents as SQLite's does; have a superuser "
                    "run CREATE EXTENSION unaccent in it, then restart the node",
                    str(exc.orig).splitlines()[0])
        return None
    return dictionary()


def _postgres_config_ddl(conn: Connection, unaccent: str | None, mark: str) -> list[str]:
    """(Re)make TS_CONFIG and its stemmer in the projection's schema."""
    quote = conn.dialect.identifier_preparer.quote
    schema = quote(str(conn.exec_driver_sql("SELECT current_schema()").scalar_one()))
    config, stem = f"{schema}.{TS_CONFIG}", f"{schema}.{TS_STEM}"
    ddl = [
        f"DROP TEXT SEARCH CONFIGURATION IF EXISTS {config}",
        f"DROP TEXT SEARCH DICTIONARY IF EXISTS {stem}",
        f"CREATE TEXT SEARCH DICTIONARY {stem} "
        "(TEMPLATE = pg_catalog.snowball, LANGUAGE = english)",
        f"CREATE TEXT SEARCH CONFIGURATION {config} (COPY = pg_catalog.english)",
        f"ALTER TEXT SEARCH CONFIGURATION {config} ALTER MAPPING FOR {_STEMMED} WITH {stem}",
    ]
    if unaccent is not None:
        ddl += [f"ALTER TEXT SEARCH CONFIGURATION {config} ALTER MAPPING FOR "
                f"{_ACCENTED_WORDS} WITH {unaccent}, {stem}",
                f"ALTER TEXT SEARCH CONFIGURATION {config} ALTER MAPPING FOR "
                f"{_ACCENTED_NUMWORDS} WITH {unaccent}, pg_catalog.simple"]
    return ddl + [f"COMMENT ON TEXT SEARCH CONFIGURATION {config} IS '{mark}'"]


def _postgres_search_ddl(conn: Connection, mark: str) -> list[str]:
    """The function, column and comment of the PostgreSQL search column, names
    qualified with the projection's schema (a restore from pg_dump runs the generated
    column's function with an empty search_path)."""
    quote = conn.dialect.identifier_preparer.quote
    schema = quote(str(conn.exec_driver_sql("SELECT current_schema()").scalar_one()))
    config = f"{schema}.{TS_CONFIG}"
    function = f"{schema}.{TSV_FUNCTION}"
    body = _TSV_FUNCTION_BODY.format(config="'" + config.replace("'", "''") + "'")
    return [
        f"CREATE OR REPLACE FUNCTION {function}(body text, tags text) RETURNS tsvector "
        f"LANGUAGE plpgsql IMMUTABLE AS $memledger${body}$memledger$",
        f"ALTER TABLE memories ADD COLUMN {TSV_COLUMN} tsvector GENERATED ALWAYS AS "
        f"({function}(coalesce(content, ''), tags)) STORED",
        f"COMMENT ON COLUMN memories.{TSV_COLUMN} IS '{mark}'",
    ]


def _install_postgres_search(conn: Connection) -> None:
    """Make the configuration and the search column if they are missing, again if they
    are another version's (the configuration is left alone when current: queries that
    psycopg prepared hold its oid)."""
    unaccent = _unaccent(conn)
    mark = SEARCH_VERSION + (" unaccent" if unaccent is not None else "")
    config_mark = conn.exec_driver_sql(
        "SELECT obj_description(oid, 'pg_ts_config') FROM pg_ts_config "
        f"WHERE cfgname = '{TS_CONFIG}' AND cfgnamespace = current_schema()::regnamespace"
    ).scalar()
    found = conn.exec_driver_sql(
        "SELECT col_description(a.attrelid, a.attnum) FROM pg_attribute a "
        f"WHERE a.attrelid = to_regclass('memories') AND a.attname = '{TSV_COLUMN}' "
        "AND NOT a.attisdropped").first()
    if found is not None and (found[0] != mark or config_mark != mark):
        conn.exec_driver_sql(f"ALTER TABLE memories DROP COLUMN {TSV_COLUMN}")  # its index too
        found = None
    if config_mark != mark:
        for ddl in _postgres_config_ddl(conn, unaccent, mark):
            conn.exec_driver_sql(ddl)
    if found is None:
        for ddl in _postgres_search_ddl(conn, mark):
            conn.exec_driver_sql(ddl)
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS ix_memories_{TSV_COLUMN} ON memories USING gin ({TSV_COLUMN})")


def add_indexes(engine: Engine) -> None:
    """The indexes declared after projections were first made, created where missing:
    `create_all` makes a new table's indexes but leaves an existing table as it is."""
    for index in (CONTENT_HASH_INDEX,):
        index.create(engine, checkfirst=True)


def install_search(engine: Engine) -> None:
    """Create the full-text index over memories(content, tags) if it is missing.

    SQLite: an FTS5 external-content table kept in sync by triggers (a pre-existing
    projection gets its index built once). PostgreSQL: a STORED generated tsvector
    column with a GIN index (made again when it is another SEARCH_VERSION's). Idempotent.
    """
    with engine.begin() as conn:
        install_search_in(conn)


def install_search_in(conn: Connection) -> None:
    """install_search inside the caller's transaction (a rebuild's)."""
    if conn.dialect.name == "sqlite":
        existed = conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (FTS_TABLE,)).first()
        for ddl in _SQLITE_FTS:
            conn.exec_driver_sql(ddl)
        if existed is None:
            conn.exec_driver_sql(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
    elif conn.dialect.name == "postgresql":
        _install_postgres_search(conn)


def make_engine(url: str) -> Engine:
    """SQLite gets WAL + synchronous=FULL (durable commits, concurrent readers)."""
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)
