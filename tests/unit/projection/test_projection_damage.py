"""A damaged SQLite projection is derived data: opening it moves the file aside (kept as
evidence) for a new one, which the app's catch-up rebuilds from canonical state. Before,
`Projection()` raised "database disk image is malformed" / "file is not a database" and
the app could not start, nor `projection rebuild` run. Errors that are not damage (a
PostgreSQL projection, a database that cannot be reached) are the operator's: one clear
error, nothing moved."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from memledger.consensus.store.state import CanonicalStore
from memledger.daemon.appproc import catch_up_projection
from memledger.projection.writer import Projection, ProjectionUnavailable
from tests.support.chain import LocalChain, seeded_key


def _damage(db: Path, how: str) -> bytes:
    """Checkpoint the projection into its file (a WAL would mask the damage), then damage
    it; returns the damaged bytes."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = db.read_bytes()
    damaged = data[:len(data) // 2] if how == "truncated" else b"x" * 100 + data[100:]
    db.write_bytes(damaged)
    return damaged


@pytest.fixture()
def chain_dump(tmp_path: Path) -> dict[str, list[tuple[object, ...]]]:
    """A closed chain of 5 blocks at tmp_path/c; its projection's rows."""
    chain = LocalChain(tmp_path / "c")
    key = seeded_key("damage")
    for b in range(5):
        chain.block([chain.builder(key).submit(chain.next_nonce(key), f"m-{b}-{i}",
                                               f"zeppelin {b} {i}") for i in range(20)])
    dump = chain.app.projection.dump()
    chain.close()
    return dump


@pytest.mark.parametrize("how", ["truncated", "garbage header"])
def test_a_damaged_sqlite_projection_is_moved_aside_and_rebuilt(
        tmp_path: Path, chain_dump: dict[str, list[tuple[object, ...]]], how: str) -> None:
    db = tmp_path / "c" / "projection.db"
    damaged = _damage(db, how)
    store = CanonicalStore(str(tmp_path / "c" / "state"))
    try:
        projection = Projection(f"sqlite:///{db}")  # raised sqlite3.DatabaseError
        try:
            assert projection.last_receipt() is None  # a new, empty one
            assert catch_up_projection(store, projection)  # as the app does at start
            assert projection.dump() == chain_dump
            assert projection.last_receipt() == (5, store.last_app_hash.hex())
        finally:
            projection.close()
    finally:
        store.close()
    assert (tmp_path / "c" / "projection.db.corrupt-1").read_bytes() == damaged
    _damage(db, how)  # again: the evidence of the first is kept
    Projection(f"sqlite:///{db}").close()
    assert sorted(p.name for p in db.parent.glob("projection.db.corrupt-*")) == [
        "projection.db.corrupt-1", "projection.db.corrupt-2"]


def test_an_unreachable_postgres_projection_is_an_error_saying_so() -> None:
    url = "postgresql+psycopg://ml:s3cret@127.0.0.1:1/memledger?connect_timeout=2"
    with pytest.raises(ProjectionUnavailable) as info:
        Projection(url)
    said = str(info.value)
    assert said.startswith("cannot open the projection database postgresql+psycopg://ml:***@127.0.0.1:1/")
    assert "s3cret" not in said and "never replaced by the node" in said


def test_a_sqlite_error_that_is_not_damage_moves_nothing(tmp_path: Path) -> None:
    db = tmp_path / "projection.db"
    db.mkdir()  # not a file SQLite can open: unopenable, not damaged
    with pytest.raises(ProjectionUnavailable, match="unable to open database file"):
        Projection(f"sqlite:///{db}")
    assert db.is_dir() and not list(tmp_path.glob("*.corrupt-*"))
