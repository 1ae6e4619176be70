"""SQL serving projection: a read model of canonical state, flushed at Commit.

The projection is a pure function of canonical records: every changed key of a block
maps to rows (`rows_for`), so an incremental flush and a rebuild from canonical state
produce the same tables. Each flush runs in one SQL transaction that also claims the
block's `(height, app_hash)` receipt: a replayed block with the same hash is skipped,
a different hash is an error (the caller halts).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from memledger.consensus.store import codec, records

log = logging.getLogger("memledger.projection")

metadata = sa.MetaData()

memories = sa.Table(
    "memories", metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("domain", sa.String(128), nullable=False, index=True),
    sa.Column("author", sa.String(64), nullable=False, index=True),
    sa.Column("type", sa.String(16), nullable=False),
    sa.Column("content", sa.Text, nullable=True),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("confidence_ppm", sa.Integer, nullable=False),
    sa.Column("tags", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("submitted_height", sa.BigInteger, nullable=False, index=True),
    sa.Column("submitted_time_ns", sa.BigInteger, nullable=False),
    sa.Column("decided_height", sa.BigInteger, nullable=True),
    sa.Column("scope", sa.String(128), nullable=True),
    sa.Column("cocommit", sa.String(128), nullable=True),
    sa.Column("tx", sa.String(64), nullable=False),
    sa.Column("record", sa.Text, nullable=False),
)
memory_tags = sa.Table(
    "memory_tags", metadata,
    sa.Column("memory_id", sa.String(128), primary_key=True),
    sa.Column("tag", sa.String(64), primary_key=True, index=True),
)
votes = sa.Table(
    "votes", metadata,
    sa.Column("memory_id", sa.String(128), primary_key=True),
    sa.Column("voter", sa.String(64), primary_key=True),
    sa.Column("decision", sa.String(8), nullable=False),
    sa.Column("height", sa.BigInteger, nullable=False),
)
accounts = sa.Table(
    "accounts", metadata,
    sa.Column("public_key", sa.String(64), primary_key=True),
    # Nonces go up to 2^64-1: stored as decimal text, exact on every backend.
    sa.Column("nonce", sa.String(20), nullable=False),
)
domains = sa.Table(
    "domains", metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("owner", sa.String(64), nullable=True),
    sa.Column("scope", sa.String(128), nullable=True),
    sa.Column("created", sa.BigInteger, nullable=False),
)
grants = sa.Table(
    "grants", metadata,
    sa.Column("domain", sa.String(128), primary_key=True),
    sa.Column("grantee", sa.String(64), primary_key=True),
    sa.Column("level", sa.String(8), nullable=False),
    # Grant expiry is a user-chosen uint64: text keeps every value exact on every backend.
    sa.Column("expires", sa.String(20), nullable=False),
    sa.Column("record", sa.Text, nullable=False),
)
corroborations = sa.Table(
    "corroborations", metadata,
    sa.Column("memory_id", sa.String(128), primary_key=True),
    sa.Column("agent", sa.String(64), primary_key=True),
    sa.Column("height", sa.BigInteger, nullable=False),
)
# Records whose shape is mostly read whole: id + JSON document.
documents = sa.Table(
    "documents", metadata,
    sa.Column("kind", sa.String(16), primary_key=True),
    sa.Column("id", sa.String(160), primary_key=True),
    sa.Column("record", sa.Text, nullable=False),
)
validators = sa.Table(
    "validators", metadata,
    sa.Column("public_key", sa.String(64), primary_key=True),
    sa.Column("power", sa.BigInteger, nullable=False),
)
receipts = sa.Table(
    "receipts", metadata,
    sa.Column("height", sa.BigInteger, primary_key=True),
    sa.Column("app_hash", sa.String(64), nullable=False),
)

#: canonical prefix -> documents.kind, for records served as whole JSON documents
DOCUMENT_KINDS = {
    records.SCOPE: "scope",
    records.COCOMMIT: "cocommit",
    records.CHALLENGE: "challenge",
    records.PROPOSAL: "proposal",
    records.BALLOT: "ballot",
}
SYSTEM_DOCUMENTS = {records.PARAMS: "params", records.CHAIN: "chain"}


class ProjectionConflict(RuntimeError):
    """The projection holds a different app hash for this height: never paper over it."""


class _Batch:
    """Rows of one flush, grouped by table, in canonical key order."""

    def __init__(self) -> None:
        self.upserts: dict[str, list[dict[str, Any]]] = {}
        self.deletes: list[tuple[sa.Table, dict[str, Any]]] = []
        self.content: dict[str, str] = {}
        self.replace_children: list[tuple[sa.Table, str, list[dict[str, Any]]]] = []

    def upsert(self, table: sa.Table, row: dict[str, Any]) -> None:
        self.upserts.setdefault(table.name, []).append(row)


def _add_change(batch: _Batch, key: bytes, value: bytes | None) -> None:
    """Translate one canonical change into projection rows."""
    if key.startswith(records.CONTENT):
        memory_id = key[len(records.CONTENT):].decode()
        if value is not None:
            batch.content[memory_id] = value.decode()
        return
    if key.startswith(records.MEMORY):
        memory_id = key[len(records.MEMORY):].decode()
        if value is None:
            batch.deletes.append((memories, {"id": memory_id}))
            return
        rec = codec.decode(value)
        batch.upsert(memories, _memory_row(rec, value))
        batch.replace_children.append(
            (memory_tags, memory_id, [{"memory_id": memory_id, "tag": t} for t in rec["tags"]])
        )
        batch.replace_children.append((votes, memory_id, [
            {"memory_id": memory_id, "voter": voter, "decision": d, "height": h}
            for voter, (d, h) in sorted(rec["votes"].items())
        ]))
        return
    if key.startswith(records.ACCOUNT):
        pk = key[len(records.ACCOUNT):].decode()
        if value is None:
            batch.deletes.append((accounts, {"public_key": pk}))
        else:
            batch.upsert(accounts, {"public_key": pk, "nonce": str(codec.decode(value)["nonce"])})
        return
    if key.startswith(records.DOMAIN):
        name = key[len(records.DOMAIN):].decode()
        if value is None:
            batch.deletes.append((domains, {"name": name}))
        else:
            rec = codec.decode(value)
            batch.upsert(domains, {"name": name, "owner": rec["owner"], "scope": rec["scope"],
                                   "created": rec["created"]})
        return
    if key.startswith(records.GRANT):
        domain, grantee = records.split_compound(key, records.GRANT)
        if value is None:
            batch.deletes.append((grants, {"domain": domain, "grantee": grantee}))
        else:
            rec = codec.decode(value)
            batch.upsert(grants, {"domain": domain, "grantee": grantee, "level": rec["level"],
                                  "expires": str(rec["expires"]), "record": value.decode()})
        return
    if key.startswith(records.CORROBORATION):
        memory_id, agent = records.split_compound(key, records.CORROBORATION)
        if value is None:
            batch.deletes.append((corroborations, {"memory_id": memory_id, "agent": agent}))
        else:
            batch.upsert(corroborations, {"memory_id": memory_id, "agent": agent,
                                          "height": codec.decode(value)["height"]})
        return
    if key == records.VALIDATORS:
        members = [] if value is None else codec.decode(value)["validators"]
        batch.replace_children.append((validators, "", [
            {"public_key": m, "power": p} for m, p in members
        ]))
        return
    for prefix, kind in DOCUMENT_KINDS.items():
        if key.startswith(prefix):
            _document(batch, kind, key[len(prefix):].decode(), value)
            return
    kind_name = SYSTEM_DOCUMENTS.get(key)
    if kind_name is not None:
        _document(batch, kind_name, "", value)
        return
    if key.startswith(records.SYS):
        _document(batch, "sys", key[len(records.SYS):].decode(), value)
        return
    raise ValueError(f"no projection mapping for canonical key {key[:40]!r}")


def _document(batch: _Batch, kind: str, doc_id: str, value: bytes | None) -> None:
    if value is None:
        batch.deletes.append((documents, {"kind": kind, "id": doc_id}))
    else:
        batch.upsert(documents, {"kind": kind, "id": doc_id, "record": value.decode()})


def _memory_row(rec: dict[str, Any], raw: bytes) -> dict[str, Any]:
    ballot = rec.get("ballot")
    return {
        "id": rec["id"],
        "domain": rec["domain"],
        "author": rec["author"],
        "type": rec["type"],
        "content_hash": rec["content_hash"],
        "confidence_ppm": rec["confidence_ppm"],
        "tags": json.dumps(rec["tags"]),
        "status": rec["status"],
        "submitted_height": rec["submitted_height"],
        "submitted_time_ns": rec["submitted_time_ns"],
        "decided_height": rec["decided_height"],
        "scope": None if ballot is None else ballot["scope"],
        "cocommit": rec.get("cocommit"),
        "tx": rec["tx"],
        "record": raw.decode(),
    }


def _is_transient(exc: OperationalError) -> bool:
    text = str(exc.orig).lower()
    return any(s in text for s in ("database is locked", "deadlock", "could not serialize",
                                   "database table is locked"))


class Projection:
    """Owns the SQL engine, the schema and the flush/rebuild operations."""

    MAX_ATTEMPTS = 5

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.dialect = self.engine.dialect.name
        metadata.create_all(self.engine)
        install_search(self.engine)

    def flush(
        self,
        height: int,
        app_hash: bytes,
        changes: Iterable[tuple[bytes, bytes | None]],
        before_commit: Callable[[], None] | None = None,
    ) -> bool:
        """Apply one block in one transaction; False if this receipt already exists."""
        batch = _Batch()
        for key, value in changes:
            _add_change(batch, key, value)
        for attempt in range(1, self.MAX_ATTEMPTS + 1):
            try:
                with self.engine.begin() as conn:
                    if not self._claim_receipt(conn, height, app_hash):
                        return False
                    self._apply(conn, batch)
                    if before_commit is not None:
                        before_commit()  # test hook: inside the open SQL transaction
                return True
            except OperationalError as exc:
                if not _is_transient(exc) or attempt == self.MAX_ATTEMPTS:
                    raise
                log.warning("transient projection error at %d (attempt %d): %s",
                            height, attempt, exc.orig)
                time.sleep(0.05 * attempt)
        raise AssertionError("unreachable")

    def _claim_receipt(self, conn: Connection, height: int, app_hash: bytes) -> bool:
        found = conn.execute(
            sa.select(receipts.c.app_hash).where(receipts.c.height == height)
        ).scalar_one_or_none()
        if found is not None:
            if found != app_hash.hex():
                raise ProjectionConflict(
                    f"projection has app hash {found} at height {height}, block has "
                    f"{app_hash.hex()}"
                )
            log.info("projection already holds height %d; skipping replayed flush", height)
            return False
        conn.execute(receipts.insert().values(height=height, app_hash=app_hash.hex()))
        return True

    def _insert(self, table: sa.Table) -> Any:
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    def _upsert(self, conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
        stmt = self._insert(table)
        keys = [c.name for c in table.primary_key.columns]
        update = {c.name: stmt.excluded[c.name] for c in table.columns
                  if c.name not in keys and c.name in rows[0]}
        stmt = stmt.on_conflict_do_update(index_elements=keys, set_=update) if update else \
            stmt.on_conflict_do_nothing(index_elements=keys)
        conn.execute(stmt, rows)

    def _apply(self, conn: Connection, batch: _Batch) -> None:
        """Few statements per block: deletes, grouped upserts, bulk child replacement."""
        for table, match in batch.deletes:
            conn.execute(table.delete().where(
                sa.and_(*[table.c[k] == v for k, v in match.items()])))
        content = dict(batch.content)
        for name in sorted(batch.upserts):
            table = metadata.tables[name]
            rows = _dedupe(table, batch.upserts[name])
            if table is memories and content:
                # A memory and its content usually arrive in the same block: write them in
                # one INSERT instead of an INSERT plus an UPDATE (which also re-indexes).
                with_body = [{**r, "content": content.pop(r["id"])} for r in rows
                             if r["id"] in content]
                merged = {w["id"] for w in with_body}
                rows = [r for r in rows if r["id"] not in merged]
                if with_body:
                    self._upsert(conn, table, with_body)
            if rows:
                self._upsert(conn, table, rows)
        self._replace_children(conn, batch.replace_children)
        if content:
            conn.execute(
                memories.update().where(memories.c.id == sa.bindparam("mid")).values(
                    content=sa.bindparam("body")),
                [{"mid": mid, "body": body} for mid, body in sorted(content.items())],
            )

    @staticmethod
    def _replace_children(
        conn: Connection, replacements: list[tuple[sa.Table, str, list[dict[str, Any]]]]
    ) -> None:
        """Delete the old child rows of every touched parent in chunks, insert in bulk."""
        by_table: dict[str, tuple[sa.Table, list[str], list[dict[str, Any]]]] = {}
        for table, parent, rows in replacements:
            entry = by_table.setdefault(table.name, (table, [], []))
            entry[1].append(parent)
            entry[2].extend(rows)
        for name in sorted(by_table):
            table, parents, rows = by_table[name]
            if table is validators:
                conn.execute(validators.delete())
            else:
                for i in range(0, len(parents), 500):
                    conn.execute(table.delete().where(table.c.memory_id.in_(parents[i:i + 500])))
            if rows:
                conn.execute(table.insert(), rows)

    # ----------------------------------------------------------------- rebuild
    def rebuild(self, items: Iterator[tuple[bytes, bytes]], height: int, app_hash: bytes,
                chunk: int = 5000) -> int:
        """Drop and recreate every table from canonical state; returns records read."""
        drop_search(self.engine)
        metadata.drop_all(self.engine)
        metadata.create_all(self.engine)
        # The full-text index is built once at the end: kept in step row by row, every
        # content (which arrives after all memory records, in key order) would re-index.
        count = 0
        with self.engine.begin() as conn:
            batch = _Batch()
            for key, value in items:
                _add_change(batch, key, value)
                count += 1
                if count % chunk == 0:
                    self._apply(conn, batch)
                    batch = _Batch()
            self._apply(conn, batch)
            if height:
                conn.execute(receipts.insert().values(height=height, app_hash=app_hash.hex()))
        install_search(self.engine)
        return count

    def last_receipt(self) -> tuple[int, str] | None:
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(receipts.c.height, receipts.c.app_hash)
                .order_by(receipts.c.height.desc()).limit(1)
            ).first()
        return None if row is None else (int(row[0]), str(row[1]))

    def dump(self, include_receipts: bool = False) -> dict[str, list[tuple[Any, ...]]]:
        """Every table's rows in primary-key order (tests and the consistency checker)."""
        out: dict[str, list[tuple[Any, ...]]] = {}
        with self.engine.connect() as conn:
            for table in metadata.sorted_tables:
                if table is receipts and not include_receipts:
                    continue
                keys = [c for c in table.primary_key.columns]
                rows = conn.execute(sa.select(table).order_by(*keys)).all()
                out[table.name] = [tuple(r) for r in rows]
        return out

    def close(self) -> None:
        self.engine.dispose()


def _dedupe(table: sa.Table, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the last row per primary key (a statement may not upsert one key twice)."""
    keys = [c.name for c in table.primary_key.columns]
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        last[tuple(row[k] for k in keys)] = row
    return list(last.values())


# ----------------------------------------------------------------- full-text search
# Off the flush path on purpose: triggers (SQLite) and a generated column (PostgreSQL)
# keep the index in step with `memories`, so flush and rebuild code stay unchanged.
FTS_TABLE = "memories_fts"
TSV_COLUMN = "search_tsv"
TS_CONFIG = "english"

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
_POSTGRES_FTS = [
    f"ALTER TABLE memories ADD COLUMN IF NOT EXISTS {TSV_COLUMN} tsvector GENERATED ALWAYS AS "
    f"(to_tsvector('{TS_CONFIG}'::regconfig, coalesce(content, '') || ' ' || tags)) STORED",
    f"CREATE INDEX IF NOT EXISTS ix_memories_{TSV_COLUMN} ON memories USING gin ({TSV_COLUMN})",
]


def install_search(engine: Engine) -> None:
    """Create the full-text index over memories(content, tags) if it is missing.

    SQLite: an FTS5 external-content table kept in sync by triggers (a pre-existing
    projection gets its index built once). PostgreSQL: a STORED generated tsvector
    column with a GIN index. Idempotent.
    """
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            existed = conn.exec_driver_sql(
                "SELECT 1 FROM sqlite_master WHERE name = ?", (FTS_TABLE,)).first()
            for ddl in _SQLITE_FTS:
                conn.exec_driver_sql(ddl)
            if existed is None:
                conn.exec_driver_sql(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')")
        elif engine.dialect.name == "postgresql":
            for ddl in _POSTGRES_FTS:
                conn.exec_driver_sql(ddl)


def drop_search(engine: Engine) -> None:
    """Remove the SQLite FTS table (PostgreSQL's column and index go with the table)."""
    if engine.dialect.name == "sqlite":
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {FTS_TABLE}")


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
