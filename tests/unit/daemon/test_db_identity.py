"""`projection rebuild` locks the home when its target is the node's own database, however
the target URL spells it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memledger.daemon.db_identity import same_database
from memledger.sqlite_uri import sqlite_url


def test_one_sqlite_file_spelled_three_ways(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "data" / "projection.db"
    db.parent.mkdir()
    db.touch()
    (tmp_path / "link").symlink_to(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    own = sqlite_url(db)
    assert same_database("sqlite:///./data/projection.db", own)
    assert same_database(f"sqlite:///{tmp_path}/link/projection.db", own)
    assert same_database(f"sqlite:///{tmp_path}//data/../data/projection.db", own)
    assert not same_database(f"sqlite:///{tmp_path}/data/other.db", own)
    assert not same_database("sqlite://", own)


def test_one_postgres_database_spelled_three_ways() -> None:
    own = "postgresql://memledger:secret@127.0.0.1:5432/node0"
    assert same_database("postgresql+psycopg://other@localhost/node0", own)
    assert same_database("postgresql:///node0", own)
    assert same_database("postgresql:///node0?host=/var/run/postgresql", own)
    assert not same_database("postgresql://127.0.0.1:5433/node0", own)
    assert not same_database("postgresql://127.0.0.1/node1", own)
    assert not same_database("postgresql://db.example:5432/node0", own)
    assert not same_database(sqlite_url(os.path.join("/tmp", "node0")), own)


def test_a_host_alias_of_the_same_server_is_the_same_database(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`vm` in /etc/hosts for 127.0.0.1: compared as strings, a rebuild into the node's
    own PostgreSQL database ran without the lock and wiped a block flushed meanwhile."""
    import socket

    real = socket.getaddrinfo

    def resolve(host: str, *args: object, **kwargs: object) -> object:
        if host == "vm":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]
        if host == "db.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", 0))]
        if host == "db-alias.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", 0))]
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    own = "postgresql+psycopg://ml@127.0.0.1:5432/node0"
    assert same_database("postgresql+psycopg://postgres@vm/node0", own)
    assert same_database("postgresql+psycopg://ml@127.0.0.2/node0", own)  # loopback too
    assert same_database("postgresql://db-alias.example/node0", "postgresql://db.example/node0")
    assert not same_database("postgresql://db.example/node0", own)
    assert not same_database("postgresql://no-such-host.invalid/node0", own)


def test_rebuild_into_the_own_projection_spelled_otherwise_waits_for_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A running node (its home lock held) keeps `projection rebuild` out of its own
    projection even when --db-url spells it relative to the working directory."""
    from click.testing import CliRunner

    from memledger.cli.main import main
    from memledger.daemon.home import NodeHome

    home = tmp_path / "home"
    runner = CliRunner()
    assert runner.invoke(main, ["init", "--home", str(home)]).exit_code == 0
    held = NodeHome(home).lock()  # what `memledger start` holds for the node's life
    try:
        monkeypatch.chdir(home)
        result = runner.invoke(main, ["projection", "rebuild", "--home", str(home),
                                      "--db-url", "sqlite:///./data/projection.db"])
    finally:
        if held is not None:
            held.close()
    assert result.exit_code == 1
    assert "is running" in result.stderr and "stop it first" in result.stderr
