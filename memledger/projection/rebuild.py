"""Rebuilding the projection from canonical state, as a bulk load in one transaction.

The rows are those a flush of every record would write (`mapping.py`); only the way they
are written differs, because a rebuild starts from empty tables (state sync, `memledger
projection rebuild`, a projection found behind canonical state at start):

- tables are dropped and created again inside the rebuild's one transaction, without
  their secondary indexes, which are built once at the end, and so is the full-text
  index; a rebuild that fails or is abandoned leaves the projection as it was;
- rows go in as plain INSERTs through the driver's executemany (every key appears once,
  so there is nothing to upsert);
- each memory is written when its content is read, its record looked up by id. In key
  order every `mem/` record comes before every `memc/` one, so the memory is already
  there to look up, even when records arrive as a restore's chunks are stored
  (`background.py`); a content that came after its row would cost an UPDATE each.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateTable

from memledger.projection.mapping import Batch, add_change
from memledger.projection.schema import (
    FTS_TABLE,
    install_search_in,
    memories,
    metadata,
    receipts,
)
from memledger.protocol import records

#: SQLite page cache for the rebuild's connection (its default is 2 MiB)
REBUILD_CACHE_KIB = 512 * 1024
_SQLITE_DEFAULT_CACHE = -2000


class RecordSource(Protocol):
    """Committed records: a store's read view (one transaction) or the store itself."""

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]: ...

    def get(self, key: bytes) -> bytes | None: ...


class CommittedView(RecordSource, Protocol):
    """A read view that also knows the commit it shows."""

    @property
    def last_height(self) -> int: ...

    @property
    def last_app_hash(self) -> bytes: ...


class CommittedRecords(Protocol):
    """A store that lends one consistent read view (CanonicalStore)."""

    def snapshot(self) -> AbstractContextManager[CommittedView]: ...


class RebuildWriter:
    """One rebuild in one open transaction, fed records in ascending key order.

    `add` may be called many times (a restore feeds each chunk as it is stored), then
    `finish` commits or `abort` leaves the projection untouched.
    """

    def __init__(self, engine: Engine, batch_records: int = 5000) -> None:
        self.records = 0
        self._batch_records = batch_records
        self._batch = Batch()
        self._pending = 0
        self._memories_seen = 0
        self._memories_written = 0
        self._sqlite = engine.dialect.name == "sqlite"
        self._conn = engine.connect()
        if self._sqlite:
            # Python's sqlite3 opens a transaction only before DML, so the DROP/CREATE
            # below would commit on their own: take control and begin one ourselves.
            self._driver = self._conn.connection.dbapi_connection
            self._driver.isolation_level = None  # type: ignore[union-attr]
        self._txn = self._conn.begin()
        try:
            if self._sqlite:
                self._conn.exec_driver_sql("BEGIN IMMEDIATE")
            if self._sqlite:  # index builds sort in the page cache
                self._conn.exec_driver_sql(f"PRAGMA cache_size=-{REBUILD_CACHE_KIB}")
                self._conn.exec_driver_sql(f"DROP TABLE IF EXISTS {FTS_TABLE}")
            metadata.drop_all(self._conn)
            for table in metadata.sorted_tables:
                self._conn.execute(CreateTable(table))
        except BaseException:
            self.abort()
            raise

    def add(self, items: Iterable[tuple[bytes, bytes]], source: RecordSource) -> None:
        """Map records (ascending, after any added before); `source` looks memories up."""
        for key, value in items:
            self.records += 1
            if key.startswith(records.MEMORY):
                self._memories_seen += 1  # written with its content, below
                continue
            if key.startswith(records.CONTENT):
                memory_key = records.MEMORY + key[len(records.CONTENT):]
                memory = source.get(memory_key)
                if memory is not None:
                    add_change(self._batch, memory_key, memory)
                    self._memories_written += 1
            add_change(self._batch, key, value)
            self._pending += 1
            if self._pending >= self._batch_records:
                self._write_batch()

    def finish(self, height: int, app_hash: bytes, source: RecordSource) -> int:
        """Write what is left, the receipt and the indexes; commit. Returns records read."""
        try:
            self._write_batch()
            if self._memories_written != self._memories_seen:
                self._write_memories_without_content(source)
            conn = self._conn
            if height:
                conn.execute(receipts.insert().values(height=height, app_hash=app_hash.hex()))
            for table in metadata.sorted_tables:
                for index in sorted(table.indexes, key=lambda i: str(i.name)):
                    index.create(conn)
            install_search_in(conn)
            self._txn.commit()
        except BaseException:
            self.abort()
            raise
        self._release()
        return self.records

    def abort(self) -> None:
        """Roll back: the projection is as it was before the rebuild began."""
        if self._txn.is_active:
            self._txn.rollback()
        self._release()

    def _release(self) -> None:
        """Give the connection back to the pool as it was lent."""
        if self._conn.closed:
            return
        if self._sqlite:
            self._conn.exec_driver_sql(f"PRAGMA cache_size={_SQLITE_DEFAULT_CACHE}")
            self._driver.isolation_level = ""  # type: ignore[union-attr]
        self._conn.close()

    def _write_memories_without_content(self, source: RecordSource) -> None:
        """Memories no content record came for (none in valid state; never drop a row)."""
        written = {row[0] for row in self._conn.execute(sa.select(memories.c.id))}
        for key, value in source.iter_prefix(records.MEMORY):
            if key[len(records.MEMORY):].decode() not in written:
                add_change(self._batch, key, value)
        self._write_batch()

    def _write_batch(self) -> None:
        _insert(self._conn, self._batch)
        self._batch = Batch()
        self._pending = 0


def rebuild(engine: Engine, source: RecordSource, height: int, app_hash: bytes) -> int:
    """Drop and recreate every table from `source`'s records; returns records read."""
    writer = RebuildWriter(engine)
    writer.add(source.iter_prefix(b""), source)
    return writer.finish(height, app_hash, source)


def _insert(conn: Connection, batch: Batch) -> None:
    """Write one batch of a rebuild: fresh rows only, in table then key order."""
    content = batch.content
    for name in sorted(batch.upserts):
        table = metadata.tables[name]
        rows = batch.upserts[name]
        if table is memories:
            rows = [{**row, "content": content.pop(row["id"], None)} for row in rows]
        _insert_rows(conn, table, rows)
    children: dict[str, list[dict[str, Any]]] = {}
    for table, _parent, rows in batch.replace_children:
        children.setdefault(table.name, []).extend(rows)
    for name in sorted(children):
        if children[name]:
            _insert_rows(conn, metadata.tables[name], children[name])
    # A content left here has no memory record: there is no row to give it to.


def _insert_rows(conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """One driver-level executemany per column set (SQLAlchemy's per-row overhead is
    most of a rebuild's time otherwise)."""
    by_columns: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for row in rows:
        columns = tuple(row)
        by_columns.setdefault(columns, []).append(tuple(row.values()))
    quote = conn.dialect.identifier_preparer.quote
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    for columns, values in by_columns.items():
        sql = (f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) "
               f"VALUES ({', '.join([mark] * len(columns))})")
        conn.exec_driver_sql(sql, values)
