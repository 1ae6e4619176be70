"""Indexes declared after projections were first made reach existing projections, and the
auto-voter's duplicate check uses its own (it walked every committed memory)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import sqlalchemy as sa

from memledger.devtools.chain import LocalChain, seeded_key
from memledger.projection.schema import memories
from memledger.sqlite_uri import sqlite_path


def _plan(db: sqlite3.Connection) -> str:
    """The voter's duplicate check (memledger/daemon/voter.py), as SQLite plans it."""
    query = sa.select(memories.c.id).where(
        memories.c.content_hash == "ab" * 32, memories.c.status == "committed",
        memories.c.id != "x").limit(1)
    sql = str(query.compile(compile_kwargs={"literal_binds": True}))
    return " / ".join(str(r[3]) for r in db.execute(f"EXPLAIN QUERY PLAN {sql}"))


def test_an_existing_projection_gets_the_content_hash_index_on_open(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("indexes")
    b = chain.builder(key)
    chain.block([b.submit(chain.next_nonce(key), f"m-{i}", f"note {i}") for i in range(3)])
    path = sqlite_path(chain.db_url)
    assert path is not None
    with sqlite3.connect(path) as db:
        assert "ix_memories_content_hash" in _plan(db)
        db.execute("DROP INDEX ix_memories_content_hash")  # as a projection made before it
    with sqlite3.connect(path) as db:  # a new connection: no statement planned before
        assert "ix_memories_status" in _plan(db)
    chain.reopen()
    with sqlite3.connect(path) as db:
        assert "USING INDEX ix_memories_content_hash (content_hash=? AND status=?)" in _plan(db)
        assert db.execute("SELECT count(*) FROM memories").fetchone() == (3,)
    chain.close()
