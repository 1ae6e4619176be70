"""The filter check of a ranked search: which of an index's candidates the search's filter
passes, and the projection height the search reads by, in as few statements as it can.

Each statement is a round trip to the database, and on a busy PostgreSQL every round trip
is a wait for a core: the tail of a search's latency. So a check reads the candidates'
rows (the page is then served from them, with no second read) and learns the projection
height from its first statement, as a column beside the rows; a search that needs the
height (the word leg, for the memories above the word index) asks the check for it
rather than reading it apart. The usual search is then one statement.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from memledger.api.queries import MEMORY_COLUMNS, MemoryFilter, apply_filters
from memledger.projection.schema import memories, receipts
from memledger.recall.follow import projection_height

_HEIGHT = sa.select(sa.func.max(receipts.c.height)).scalar_subquery().label("at_height")

#: rows read by a search's filter check, by id: the page is served from them
Rows = dict[str, Any]


class FilterCheck:
    """check(ids): the ids among `ids` that `flt` passes, read from the projection;
    check.height(): the projection height the search reads by.

    One search asks this for every candidate of every leg and widening round, so answers
    are remembered for the search, and a statement takes the ids as one parameter (a JSON
    array on SQLite, an array on PostgreSQL): the same SQL text every time, with no
    per-call expansion of an IN list (that compile step was ~40% of the check). The rows
    that pass are kept in `rows` when it is given."""

    def __init__(self, conn: sa.Connection, flt: MemoryFilter, rows: Rows | None = None
                 ) -> None:
        self._conn = conn
        self._rows = rows
        self._height: int | None = None
        self._known: dict[str, bool] = {}
        self._postgres = conn.dialect.name == "postgresql"
        if self._postgres:
            listed: Any = memories.c.id == sa.func.any(
                sa.bindparam("ids", type_=sa.ARRAY(sa.Text)))
        else:
            listed = memories.c.id.in_(sa.select(sa.column("value")).select_from(
                sa.func.json_each(sa.bindparam("ids"))))
        columns = MEMORY_COLUMNS if rows is not None else [memories.c.id]
        by_id = not self._postgres  # SQLite: look the ids up, not walk the filter's index
        self._query = apply_filters(sa.select(*columns), flt, listed_ids=by_id).where(listed)
        self._query_at_height = apply_filters(sa.select(*columns, _HEIGHT), flt,
                                              listed_ids=by_id).where(listed)

    def height(self) -> int:
        """The projection height: the one the check's first statement read, else read
        now. The rows a search checks and the height it reads by are then of one
        snapshot."""
        if self._height is None:
            self._height = projection_height(self._conn)
        return self._height

    def __call__(self, ids: list[str]) -> set[str]:
        fresh = [i for i in dict.fromkeys(ids) if i not in self._known]
        for start in range(0, len(fresh), 1000):
            self._check(fresh[start:start + 1000])
        return {i for i in ids if self._known[i]}

    def _check(self, chunk: list[str]) -> None:
        learn = self._height is None  # the first statement reads the height beside
        query = self._query_at_height if learn else self._query
        passed = set()
        for row in self._conn.execute(query, {"ids": chunk if self._postgres
                                              else json.dumps(chunk)}):
            if learn:
                self._height = int(row.at_height or 0)
                learn = False
            passed.add(row.id)
            if self._rows is not None:
                self._rows[row.id] = row
        self._known.update((i, i in passed) for i in chunk)
