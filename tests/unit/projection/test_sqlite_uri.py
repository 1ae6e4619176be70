"""Read-only SQLite files under a node home whose path holds URI syntax ('#', '%', '?', a
space): each reader opens the very file its writer wrote (it failed with 'no such table',
'unable to open database file', or read another file)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from memledger.api.db import readonly_engine
from memledger.daemon.voter_notes import NotesWriter, VoterNote, read_notes
from memledger.projection.writer import Projection
from memledger.recall.embedder import Embedder
from memledger.recall.index import VectorIndex, memory_key
from memledger.sqlite_uri import readonly_uri, sqlite_path, sqlite_url

#: each a directory name that broke the old `file:{path}?mode=ro` URI
ODD_NAMES = ["node #1", "50%41 home", "what?x=1", "a%2Fb"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_readonly_uri_names_exactly_the_path(tmp_path: Path, name: str) -> None:
    path = tmp_path / name / "x.db"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.execute("create table t (v)")
        conn.execute("insert into t values (7)")
    conn.close()
    ro = sqlite3.connect(readonly_uri(path), uri=True)
    assert ro.execute("select v from t").fetchall() == [(7,)]
    with pytest.raises(sqlite3.OperationalError):
        ro.execute("insert into t values (8)")
    ro.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing made beside it


def test_readonly_uri_keeps_a_leading_double_slash_a_path() -> None:
    assert readonly_uri("//srv/x.db") == "file:////srv/x.db?mode=ro"
    assert readonly_uri("rel #/x.db") == "file:rel%20%23/x.db?mode=ro"


@pytest.mark.parametrize("name", ODD_NAMES)
def test_rest_reads_a_projection_under_an_odd_home(tmp_path: Path, name: str) -> None:
    data = tmp_path / name / "data"
    data.mkdir(parents=True)
    url = sqlite_url(data / "projection.db")
    writer = Projection(url)
    writer.flush(3, b"\x03" * 32, [])
    writer.close()
    engine = readonly_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("select max(height) from receipts")).scalar() == 3
    engine.dispose()
    # the writer wrote inside the home: a `?` used to end SQLAlchemy's path, so the
    # home `what?x=1` had its projection written to the file `what` beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert (data / "projection.db").stat().st_size > 0


@pytest.mark.parametrize("name", [*ODD_NAMES, "plain", "x?uri=true"])
def test_sqlite_url_reads_back_to_its_path(tmp_path: Path, name: str) -> None:
    path = str(tmp_path / name / "projection.db")
    assert sqlite_path(sqlite_url(path)) == path
    assert sqlite_url("/srv/plain/p.db") == "sqlite:////srv/plain/p.db"  # the usual form


def test_sqlite_path_names_no_file_for_memory_and_other_backends() -> None:
    assert sqlite_path("sqlite://") is None
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("sqlite:///file:x?mode=memory&uri=true") is None
    assert sqlite_path("postgresql://h/db") is None
    assert sqlite_path("sqlite:///file://localhost/srv/a%3Fb.db?uri=true") == "/srv/a?b.db"


def test_voter_notes_read_under_an_odd_home(tmp_path: Path) -> None:
    home = tmp_path / "home #2 100%"
    writer = NotesWriter(home)
    writer.record("m1", "v" * 64, "accept", "passes the baseline checks")
    writer.close()
    assert read_notes(home, ["m1"]) == {
        "m1": {"v" * 64: VoterNote("v" * 64, "accept", "passes the baseline checks")}}


class _Fixed(Embedder):
    """Deterministic small vectors: enough for the key map, no model needed."""

    name = "fixed"
    version = "1"
    dim = 8

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.array([[len(t) + i for i in range(self.dim)] for t in texts],
                        dtype=np.float32)


def test_vector_index_key_map_reads_under_an_odd_home(tmp_path: Path) -> None:
    index = VectorIndex(tmp_path / "home #3 %41" / "recall", _Fixed())
    index.open()
    index.add([("m-a", "alpha"), ("m-b", "beta text")], height=1)
    keys = [memory_key("m-a"), memory_key("m-b")]
    assert index.ids_for(keys) == {keys[0]: "m-a", keys[1]: "m-b"}
    index.close()
