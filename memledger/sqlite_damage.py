"""Damaged SQLite files of derived data: telling them apart, and clearing them away.

The vector index's key map and the SQLite projection are derived data: a file SQLite
calls corrupt (SQLITE_CORRUPT, "database disk image is malformed": truncated, a page
overwritten) or not a database at all (SQLITE_NOTADB, "file is not a database") never
heals by itself and would stop the node at every start, while what it held can be built
again. Only those two codes count: a locked, unreadable (permissions) or full-disk file
is an operator matter, and deleting it would lose nothing but hide the cause.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

#: SQLite's primary result codes for a damaged file (extended codes share the low byte)
DAMAGE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
#: the files a database is: itself, then the ones SQLite keeps beside it
SUFFIXES = ("", "-wal", "-shm", "-journal")


def is_damaged(exc: BaseException) -> bool:
    """Whether `exc` (sqlite3's own, or SQLAlchemy's wrapping one as `.orig`) says the
    database file is damaged, not merely locked or unopenable."""
    orig = getattr(exc, "orig", exc)
    if not isinstance(orig, sqlite3.DatabaseError):
        return False
    code = getattr(orig, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in DAMAGE_CODES


def database_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files of the database at `path` that exist (it, its WAL, its shared memory)."""
    base = os.fspath(path)
    return [Path(base + suffix) for suffix in SUFFIXES if Path(base + suffix).exists()]


def remove_database(path: str | os.PathLike[str]) -> None:
    """Delete the database at `path` with its WAL and shared memory: a WAL left behind
    would be replayed into the new file."""
    for file in database_files(path):
        with contextlib.suppress(FileNotFoundError):
            file.unlink()


def move_aside(path: str | os.PathLike[str]) -> Path:
    """Rename the database at `path` (and its WAL, shared memory) to the first free
    `<name>.corrupt-<n>` (`<name>.corrupt-<n>-wal`, ...), kept together as evidence that
    SQLite can still open; returns the new name of the database itself."""
    base = os.fspath(path)
    n = 1
    while any(Path(f"{base}.corrupt-{n}{suffix}").exists() for suffix in SUFFIXES):
        n += 1
    for suffix in SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            os.replace(base + suffix, f"{base}.corrupt-{n}{suffix}")
    return Path(f"{base}.corrupt-{n}")
