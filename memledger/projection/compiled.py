"""The flush's statements, compiled once to the driver's own SQL and run by the driver.

Why: every Commit flushes a block in a handful of statements (the receipt, one upsert per
table, the child rows), and SQLAlchemy's `Connection.execute` spends ~100-170 µs of
Python on each one before the driver sees it (building the statement, its cache key,
the parameter processing), against ~5-10 µs for the same SQL given to the driver
(`exec_driver_sql`). On a block of 50 txs that was most of the projection's share of
Commit. The statements are still built with SQLAlchemy (so each dialect gets its own
SQL), once per shape; the projection's columns are strings and integers, which no
dialect converts on the way in, so the rows go to the driver as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.engine import Connection, CursorResult, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

Row = Mapping[str, Any]


class CompiledStatements:
    """Driver SQL per statement shape, for one dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._compiled: dict[tuple[Any, ...], tuple[str, tuple[str, ...] | None]] = {}

    def one(self, conn: Connection, shape: tuple[Any, ...],
            build: Callable[[], ClauseElement], params: Row) -> CursorResult[Any]:
        """Run the statement `build` makes with one row of parameters."""
        sql, names = self._sql(shape, build, params)
        return conn.exec_driver_sql(sql, dict(params) if names is None else
                                    tuple(params[n] for n in names))

    def many(self, conn: Connection, shape: tuple[Any, ...],
             build: Callable[[], ClauseElement], rows: Sequence[Row]) -> None:
        """Run it once per row, as one executemany (every row with the same keys)."""
        if not rows:
            return
        sql, names = self._sql(shape, build, rows[0])
        conn.exec_driver_sql(sql, [dict(r) for r in rows] if names is None else
                             [tuple(r[n] for n in names) for r in rows])

    def _sql(self, shape: tuple[Any, ...], build: Callable[[], ClauseElement],
             first: Row) -> tuple[str, tuple[str, ...] | None]:
        """The SQL for `shape`, compiled the first time it is seen, and the order of its
        parameters when the driver takes them by position.

        `shape` must name everything the SQL depends on: the table and the columns the
        rows carry (an INSERT's column list comes from the first row's keys).
        """
        entry = self._compiled.get(shape)
        if entry is None:
            compiled = build().compile(dialect=self._dialect, column_keys=list(first))
            if not isinstance(compiled, SQLCompiler):
                raise TypeError(f"{shape!r} does not compile to a SQL statement")
            names = tuple(compiled.positiontup or ()) if compiled.positional else None
            entry = (str(compiled), names)
            self._compiled[shape] = entry
        return entry
