"""SQL serving projection: a read model of canonical state, flushed at Commit.

Rows come from `mapping.py` (one table row per canonical key family) into the tables of
`schema.py`. Each flush runs in one SQL transaction that also claims the
block's `(height, app_hash)` receipt: a replayed block with the same hash is skipped,
a different hash is an error (the caller halts).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from memledger.projection.background import BackgroundRebuild
from memledger.projection.compiled import CompiledStatements
from memledger.projection.mapping import Batch, add_change
from memledger.projection.rebuild import CommittedRecords, RecordSource, rebuild
from memledger.projection.schema import (
    add_indexes,
    install_search,
    make_engine,
    memories,
    metadata,
    receipts,
    use_byte_order,
    validators,
)
from memledger.sqlite_damage import is_damaged, move_aside
from memledger.sqlite_uri import sqlite_path

log = logging.getLogger("memledger.projection")

class ProjectionConflict(RuntimeError):
    """The projection holds a different app hash for this height: never paper over it."""


class ProjectionBehind(RuntimeError):
    """The projection's last block is not the one canonical state committed last: its
    database lost commits (a failover to a standby, a restore from a backup, commits not
    made durable) while the node ran. Flushing on top of it would hide those blocks'
    memories for good; the node halts instead, and at its next start
    `catch_up_projection` rebuilds the projection from canonical state."""


class ProjectionUnavailable(RuntimeError):
    """The projection's database cannot be opened, and it is not a damaged SQLite file
    this node may replace (PostgreSQL, a locked or unreadable file): the operator's call."""


def _unavailable(url: str, exc: sa.exc.DBAPIError) -> str:
    """One line on why the projection at `url` (password hidden) cannot be opened."""
    shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    said = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else repr(exc.orig)
    hint = ("" if sqlite_path(url) is not None else ": a PostgreSQL projection is never "
            "replaced by the node; repair the database (or point db_url at an empty one), "
            "then `memledger projection rebuild` fills it from canonical state")
    return f"cannot open the projection database {shown}: {said}{hint}"


def _is_transient(exc: OperationalError) -> bool:
    text = str(exc.orig).lower()
    return any(s in text for s in ("database is locked", "deadlock", "could not serialize",
                                   "database table is locked"))


class Projection:
    """Owns the SQL engine, the schema and the flush/rebuild operations.

    It is the app's commit sink (`consensus.store.sinks.CommitSink`): the node's app
    process hands it to the app, which flushes each block here before LMDB."""

    MAX_ATTEMPTS = 5

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.dialect = self.engine.dialect.name
        self._statements = CompiledStatements(self.engine.dialect)
        try:
            self._prepare()
        except sa.exc.DBAPIError as exc:
            self.engine.dispose()
            path = sqlite_path(url)
            if path is None or not is_damaged(exc):
                raise ProjectionUnavailable(_unavailable(url, exc)) from exc
            self._set_aside(path, exc)
            self.engine = make_engine(url)
            self._prepare()

    def _prepare(self) -> None:
        """Schema and search set up, and the receipts read once: a damaged SQLite file
        shows here (or in the PRAGMAs of the first connection), not at the first flush."""
        metadata.create_all(self.engine)
        add_indexes(self.engine)
        use_byte_order(self.engine)
        install_search(self.engine)
        self.last_receipt()

    @staticmethod
    def _set_aside(path: str, exc: BaseException) -> None:
        """Move a damaged SQLite projection aside (kept as evidence) for a new one: it is
        derived data, which the app's catch-up (or `projection rebuild`) writes again from
        canonical state; left there it stopped the node at every start."""
        moved = move_aside(path)
        log.error("the projection %s is damaged (%s): moved it aside to %s and starting an "
                  "empty one, rebuilt from canonical state", path, getattr(exc, "orig", exc),
                  moved)

    @property
    def shareable(self) -> bool:
        """Whether another process can open this database (not an in-memory SQLite)."""
        url = sa.engine.make_url(self.url)
        return url.get_backend_name() != "sqlite" or sqlite_path(self.url) is not None

    def restore_feed(self, state_dir: str) -> BackgroundRebuild | None:
        """A child process rebuilding this projection as a state-sync restore stores
        chunks into `state_dir`; None if no other process can open this database."""
        if not self.shareable:
            return None
        return BackgroundRebuild(self.url, state_dir)

    def flush(
        self,
        height: int,
        app_hash: bytes,
        changes: Iterable[tuple[bytes, bytes | None]],
        before_commit: Callable[[], None] | None = None,
        follows: int = 0,
    ) -> bool:
        """Apply one block in one transaction; False if this receipt already exists.

        `follows`: the height canonical state committed last (0: none, or unchecked). The
        projection's last receipt must be that one (ProjectionBehind otherwise)."""
        batch = Batch()
        for key, value in changes:
            add_change(batch, key, value)
        for attempt in range(1, self.MAX_ATTEMPTS + 1):
            try:
                with self.engine.begin() as conn:
                    if not self._claim_receipt(conn, height, app_hash, follows):
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

    def _claim_receipt(self, conn: Connection, height: int, app_hash: bytes,
                       follows: int) -> bool:
        run = self._statements.one
        found = run(conn, ("receipt at",), lambda: sa.select(receipts.c.app_hash).where(
            receipts.c.height == sa.bindparam("height")), {"height": height}
        ).scalar_one_or_none()
        if found is not None:
            if found != app_hash.hex():
                raise ProjectionConflict(
                    f"projection has app hash {found} at height {height}, block has "
                    f"{app_hash.hex()}"
                )
            log.info("projection already holds height %d; skipping replayed flush", height)
            return False
        if follows:
            last = run(conn, ("last receipt",),
                       lambda: sa.select(sa.func.max(receipts.c.height)), {}).scalar()
            if last != follows:
                raise ProjectionBehind(
                    f"the projection's last block is {last}, canonical state's is {follows}: "
                    "its database lost commits (a failover or a restore?); restart the node "
                    "to rebuild the projection from canonical state")
        self._statements.many(conn, ("insert", receipts.name), receipts.insert,
                              [{"height": height, "app_hash": app_hash.hex()}])
        return True

    def has_gaps(self) -> bool:
        """Whether a block is missing between the projection's first receipt (a rebuild's,
        or block 1's) and its last: blocks lost by its database before `flush` checked
        what it follows, each hiding its memories for good."""
        with self.engine.connect() as conn:
            count, low, high = conn.execute(sa.select(
                sa.func.count(), sa.func.min(receipts.c.height),
                sa.func.max(receipts.c.height))).one()
        return bool(count) and int(count) != int(high) - int(low) + 1

    def _insert(self, table: sa.Table) -> Any:
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    def _upsert(self, conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
        def build() -> Any:
            stmt = self._insert(table)
            keys = [c.name for c in table.primary_key.columns]
            update = {c.name: stmt.excluded[c.name] for c in table.columns
                      if c.name not in keys and c.name in rows[0]}
            return stmt.on_conflict_do_update(index_elements=keys, set_=update) if update \
                else stmt.on_conflict_do_nothing(index_elements=keys)

        self._statements.many(conn, ("upsert", table.name, tuple(rows[0])), build, rows)

    def _apply(self, conn: Connection, batch: Batch) -> None:
        """Few statements per block: deletes, grouped upserts, bulk child replacement."""
        for table, match in batch.deletes:
            columns = tuple(match)
            self._statements.one(conn, ("delete", table.name, columns),
                                 partial(_delete_where, table, columns), match)
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
            self._statements.many(
                conn, ("content",),
                lambda: memories.update().where(memories.c.id == sa.bindparam("mid")).values(
                    content=sa.bindparam("body")),
                [{"mid": mid, "body": body} for mid, body in sorted(content.items())],
            )

    def _replace_children(
        self, conn: Connection, replacements: list[tuple[sa.Table, str, list[dict[str, Any]]]]
    ) -> None:
        """Delete the old child rows of every touched parent, insert the new ones in bulk."""
        by_table: dict[str, tuple[sa.Table, list[str], list[dict[str, Any]]]] = {}
        for table, parent, rows in replacements:
            entry = by_table.setdefault(table.name, (table, [], []))
            entry[1].append(parent)
            entry[2].extend(rows)
        many = self._statements.many
        for name in sorted(by_table):
            table, parents, rows = by_table[name]
            if table is validators:
                conn.execute(validators.delete())
            else:
                many(conn, ("children of", name), partial(_delete_children, table),
                     [{"parent": p} for p in parents])
            if rows:
                many(conn, ("insert", name, tuple(rows[0])), table.insert, rows)

    # ----------------------------------------------------------------- rebuild
    def rebuild(self, source: RecordSource, height: int, app_hash: bytes) -> int:
        """Drop and recreate every table from canonical state (`rebuild.py`; pass a read
        view, one transaction for the whole pass); returns records read."""
        return rebuild(self.engine, source, height, app_hash)

    def rebuild_committed(self, store: CommittedRecords) -> int:
        """Rebuild from a store's committed state, in one read transaction for rows and
        contents, with the receipt of its last commit; returns records read."""
        with store.snapshot() as view:
            return self.rebuild(view, view.last_height, view.last_app_hash)

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


def _delete_where(table: sa.Table, columns: tuple[str, ...]) -> Any:
    """DELETE of the rows whose `columns` equal the parameters of the same names."""
    return table.delete().where(sa.and_(*[table.c[k] == sa.bindparam(k) for k in columns]))


def _delete_children(table: sa.Table) -> Any:
    """DELETE of a child table's rows under the parameter `parent` (a memory id)."""
    return table.delete().where(table.c.memory_id == sa.bindparam("parent"))


def _dedupe(table: sa.Table, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the last row per primary key (a statement may not upsert one key twice)."""
    keys = [c.name for c in table.primary_key.columns]
    last: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        last[tuple(row[k] for k in keys)] = row
    return list(last.values())



