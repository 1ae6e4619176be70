"""Read queries over the projection: memory rows, filters and keyset cursors.

Pages are ordered by (submitted_height, id), a key that never changes once a memory
exists, so a cursor (the last key of the previous page) stays valid while new blocks
arrive: later memories only ever append to the end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from memledger.api.search import common_on_sqlite, search_clause
from memledger.projection.schema import corroborations, documents, memories, memory_tags


@dataclass(frozen=True)
class MemoryFilter:
    """Validated filters of GET /v1/memories."""

    domain: str | None = None
    #: the statuses asked for; none: the safe default (DEFAULT_STATUSES)
    status: str | Sequence[str] | None = field(default_factory=tuple)
    type: str | None = None
    author: str | None = None
    tags: Sequence[str] = field(default_factory=tuple)
    include_disputed: bool = False
    q: str | None = None

    def statuses(self) -> tuple[str, ...]:
        """The statuses kept: those asked for, else committed (and, with
        include_disputed, challenged). Deprecated and superseded memories are retracted
        or replaced facts: a reader who leaves the filter out must not act on one."""
        if isinstance(self.status, str):  # one status, as callers before v10 gave it
            return (self.status,)
        if self.status:
            return tuple(sorted(set(self.status)))
        return (*DEFAULT_STATUSES, *(("challenged",) if self.include_disputed else ()))


DEFAULT_STATUSES = ("committed",)
#: statuses that hold most memories: asking for them narrows nothing (see `narrowed`)
_BROAD_STATUSES = frozenset({"committed", "challenged", "proposed"})


def memory_cursor(height: int, memory_id: str) -> str:
    """`<height>~<id>` (schemas.MEMORY_CURSOR): any such key is a valid place to resume,
    so every cursor the document allows is one the server accepts."""
    return f"{height}~{memory_id}"


def parse_memory_cursor(cursor: str) -> tuple[int, str]:
    """Inverse of `memory_cursor` on a value the route already matched to the pattern."""
    height, _, last_id = cursor.partition("~")
    return int(height), last_id


def memory_json(row: sa.Row[Any], record: dict[str, Any] | None = None) -> dict[str, Any]:
    """One projection row as the API's Memory object (`record`: the row's canonical
    record, when the caller has parsed it already)."""
    if record is None:
        record = json.loads(row.record)
    return {
        "id": row.id,
        "domain": row.domain,
        "author": row.author,
        "type": row.type,
        "content": row.content,
        "content_hash": row.content_hash,
        "confidence": row.confidence_ppm / 1_000_000,
        "confidence_ppm": row.confidence_ppm,
        "tags": json.loads(row.tags),
        "status": row.status,
        "submitted_height": row.submitted_height,
        "submitted_time_ns": row.submitted_time_ns,
        "decided_height": row.decided_height,
        "scope": row.scope,
        "cocommit": row.cocommit,
        "tx": row.tx,
        "history": record.get("history", []),
        "ballot": record.get("ballot"),
        "corroborators": record.get("corroborators", []),
        "coauthors": record.get("coauthors"),
        "supersedes": record.get("supersedes"),
        "superseded_by": record.get("superseded_by"),
        "pending_correction": record.get("pending_correction"),
        "origin": record.get("origin"),
        "epoch": record.get("epoch"),
    }


MEMORY_COLUMNS = [c for c in memories.c]
# Built once: re-building a select per request costs ~5x the SQLite lookup itself.
MEMORY_BY_ID = sa.select(*MEMORY_COLUMNS).where(memories.c.id == sa.bindparam("memory_id"))
_EXISTS = sa.select(memories.c.id).where(memories.c.id == sa.bindparam("memory_id"))


def get_memory(conn: sa.Connection, memory_id: str) -> dict[str, Any] | None:
    row = conn.execute(MEMORY_BY_ID, {"memory_id": memory_id}).first()
    return None if row is None else memory_json(row)


def memory_exists(conn: sa.Connection, memory_id: str) -> bool:
    return conn.execute(_EXISTS, {"memory_id": memory_id}).first() is not None


def apply_filters(query: Any, flt: MemoryFilter, *, listed_ids: bool = False) -> Any:
    """`query` (a select over memories) narrowed by every filter of `flt` except `q`:
    shared by the page listing and the ranked search modes (ranked.py).

    `listed_ids`: `query` also keeps only a short list of ids (a ranked search's filter
    check, SQLite only). SQLite keeps no statistics on the projection, so it took the
    status (or domain, author) index for the outer loop and walked every memory having
    that value, ~100-150 ms on a 100k-memory ledger, instead of looking up the few ids
    by primary key (0.3 ms). Here those terms are kept off their indexes (SQLite's unary
    `+`) and tags are checked per row, by the tag table's primary key."""
    def column(col: Any) -> Any:
        return sa.literal_column(f"+memories.{col.name}", col.type) if listed_ids else col

    if flt.domain is not None:
        query = query.where(column(memories.c.domain) == flt.domain)
    query = query.where(column(memories.c.status).in_(flt.statuses()))
    if flt.type is not None:
        query = query.where(memories.c.type == flt.type)
    if flt.author is not None:
        query = query.where(column(memories.c.author) == flt.author.lower())
    for tag in dict.fromkeys(flt.tags):
        if listed_ids:
            query = query.where(sa.exists().where(memory_tags.c.memory_id == memories.c.id,
                                                  memory_tags.c.tag == tag))
        else:
            query = query.where(memories.c.id.in_(
                sa.select(memory_tags.c.memory_id).where(memory_tags.c.tag == tag)))
    return query


def list_memories(conn: sa.Connection, flt: MemoryFilter, limit: int, cursor: str | None,
                  records: dict[str, dict[str, Any]] | None = None
                  ) -> tuple[list[dict[str, Any]], str | None]:
    """One page of memories matching `flt`, and the cursor of the next page (if any).
    `records`, when given, receives each item's parsed canonical record (status reasons
    are derived from them: no second read)."""
    query = apply_filters(sa.select(*MEMORY_COLUMNS), flt)
    if flt.q is not None:
        query = query.where(search_clause(conn.dialect.name, flt.q,
                                          ordered_scan=_ordered_scan(conn, flt)))
    if cursor is not None:
        height, last_id = parse_memory_cursor(cursor)
        # the leading >= gives the planner an index range to start from
        query = query.where(memories.c.submitted_height >= height, sa.or_(
            memories.c.submitted_height > height, memories.c.id > last_id))
    query = query.order_by(memories.c.submitted_height, memories.c.id).limit(limit + 1)
    rows = conn.execute(query).all()
    parsed = {str(r.id): json.loads(r.record) for r in rows[:limit]}
    page = [memory_json(r, parsed[str(r.id)]) for r in rows[:limit]]
    if records is not None:
        records.update(parsed)
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = memory_cursor(last.submitted_height, last.id)
    return page, next_cursor


def _ordered_scan(conn: sa.Connection, flt: MemoryFilter) -> bool:
    """Walk memories in page order for common words when no other filter narrows them
    (SQLite; PostgreSQL's planner makes this choice itself from its statistics)."""
    if conn.dialect.name != "sqlite" or flt.q is None:
        return False
    return not narrowed(flt) and common_on_sqlite(conn, flt.q)


def narrowed(flt: MemoryFilter) -> bool:
    """Whether `flt` narrows beyond the default status rule (a domain, type, author, tag
    or a status other than committed)."""
    return bool(flt.domain or flt.type or flt.author or flt.tags or
                set(flt.statuses()) - _BROAD_STATUSES)


def memory_votes(conn: sa.Connection, memory_id: str) -> list[dict[str, Any]]:
    """The votes on a memory, oldest first, each with the reason its voter gave on chain
    (v5+). Read from the memory's canonical record, which holds all of it (the votes
    table lacks the reason): one read."""
    record = conn.execute(sa.select(memories.c.record).where(memories.c.id == memory_id)
                          ).scalar_one_or_none()
    entries: dict[str, list[Any]] = json.loads(record)["votes"] if record else {}
    ordered = sorted(entries.items(), key=lambda kv: (int(kv[1][1]), kv[0]))
    return [{"voter": voter, "decision": str(entry[0]), "height": int(entry[1]),
             "reason": str(entry[2]) if len(entry) > 2 else None}
            for voter, entry in ordered]


def memory_corroborations(conn: sa.Connection, memory_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        sa.select(corroborations.c.agent, corroborations.c.height)
        .where(corroborations.c.memory_id == memory_id)
        .order_by(corroborations.c.height, corroborations.c.agent))
    return [{"agent": r.agent, "height": r.height} for r in rows]


def get_document(conn: sa.Connection, kind: str, doc_id: str) -> dict[str, Any] | None:
    raw = conn.execute(sa.select(documents.c.record).where(
        documents.c.kind == kind, documents.c.id == doc_id)).scalar_one_or_none()
    return None if raw is None else dict(json.loads(raw))


def list_documents(conn: sa.Connection, kind: str, limit: int,
                   cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
    query = sa.select(documents.c.id, documents.c.record).where(documents.c.kind == kind)
    if cursor is not None:
        query = query.where(documents.c.id > cursor)  # the last id of the previous page
    rows = conn.execute(query.order_by(documents.c.id).limit(limit + 1)).all()
    items = [{"id": r.id, "record": json.loads(r.record)} for r in rows[:limit]]
    next_cursor = str(rows[limit - 1].id) if len(rows) > limit else None
    return items, next_cursor
