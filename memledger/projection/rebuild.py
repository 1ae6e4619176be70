"""Rebuilding the projection from canonical state in one pass, as a bulk load.

The rows are those a flush of every record would write (`mapping.py`); only the way they
are written differs, because a rebuild starts from empty tables (state sync, `memledger
projection rebuild`):

- tables are created without their secondary indexes, which are built once at the end,
  and so is the full-text index;
- rows go in as plain INSERTs through the driver's executemany (every key appears once,
  so there is nothing to upsert);
- each memory is written together with its content, looked up as the memory is read.
  In key order all `mem/` records come before all `memc/` ones, so without the lookup
  every content would cost an UPDATE of a row written long before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateTable

from memledger.consensus.store import records
from memledger.projection.mapping import Batch, add_change
from memledger.projection.schema import (
    drop_search,
    install_search_in,
    memories,
    metadata,
    receipts,
)

ContentLookup = Callable[[bytes], bytes | None]

#: SQLite page cache for the rebuild's connection (its default is 2 MiB)
REBUILD_CACHE_KIB = 512 * 1024


def rebuild(engine: Engine, items: Iterator[tuple[bytes, bytes]], height: int,
            app_hash: bytes, *, content_of: ContentLookup | None = None,
            chunk: int = 5000) -> int:
    """Drop and recreate every table from `items` (canonical records in key order).

    `content_of(key)` reads a `memc/` record by key; given, contents are written with
    their memories and the `memc/` items are skipped. Returns the records read.
    """
    drop_search(engine)
    metadata.drop_all(engine)
    count = 0
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":  # index builds sort in the page cache
            conn.exec_driver_sql(f"PRAGMA cache_size=-{REBUILD_CACHE_KIB}")
        for table in metadata.sorted_tables:
            conn.execute(CreateTable(table))
        batch = Batch()
        for key, value in items:
            count += 1
            if content_of is not None and key.startswith(records.CONTENT):
                continue  # already written with its memory
            add_change(batch, key, value)
            if content_of is not None and key.startswith(records.MEMORY):
                suffix = key[len(records.MEMORY):]
                body = content_of(records.CONTENT + suffix)
                if body is not None:
                    batch.content[suffix.decode()] = body.decode()
            if count % chunk == 0:
                _insert(conn, batch)
                batch = Batch()
        _insert(conn, batch)
        if height:
            conn.execute(receipts.insert().values(height=height, app_hash=app_hash.hex()))
        for table in metadata.sorted_tables:
            for index in sorted(table.indexes, key=lambda i: str(i.name)):
                index.create(conn)
        install_search_in(conn)
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA cache_size=-2000")  # back to SQLite's default
    return count


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
    if content:  # contents whose memory came in an earlier batch (no lookup given)
        conn.execute(
            memories.update().where(memories.c.id == sa.bindparam("mid")).values(
                content=sa.bindparam("body")),
            [{"mid": mid, "body": body} for mid, body in sorted(content.items())],
        )


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
