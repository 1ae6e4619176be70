"""The auto-voter's notes: which decision it broadcast on which memory, and why.

Before app version 5 a vote on chain says accept/reject/abstain, not why (from v5 the
vote carries its reason, and the voter writes no note). The auto-voter decides by fixed
baseline checks (memledger.daemon.voter.decide), so on an older chain it writes its reason
here, in the node home (HOME/data/voter-notes.db, SQLite), and the REST API folds it into a memory's
`status_reason`. Off the consensus path and per node: another node's API knows its own
voter's reasons only. Never written by anything but the voter process; a missing or
unreadable file means "no notes", not an error.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memledger.sqlite_uri import readonly_uri

NOTES_FILE = Path("data") / "voter-notes.db"
_SCHEMA = ("CREATE TABLE IF NOT EXISTS notes (memory_id TEXT NOT NULL, voter TEXT NOT NULL, "
           "decision TEXT NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (memory_id, voter))")


@dataclass(frozen=True)
class VoterNote:
    voter: str
    decision: str
    reason: str


def notes_path(home: Path) -> Path:
    return Path(home) / NOTES_FILE


class NotesWriter:
    """The voter's side: one row per (memory, voter key), replaced if it votes again."""

    def __init__(self, home: Path) -> None:
        path = notes_path(home)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=5.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        self._db.commit()

    def record(self, memory_id: str, voter: str, decision: str, reason: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?)",
                         (memory_id, voter, decision, reason))
        self._db.commit()

    def close(self) -> None:
        self._db.close()


_local = threading.local()


def _reader(path: Path) -> sqlite3.Connection | None:
    """A read-only connection per thread and file, kept open (reads are on the hot path)."""
    cache: dict[str, sqlite3.Connection] = _local.__dict__.setdefault("conns", {})
    conn = cache.get(str(path))
    if conn is None:
        try:
            conn = sqlite3.connect(readonly_uri(path), uri=True, timeout=2.0)
        except sqlite3.Error:
            return None
        cache[str(path)] = conn
    return conn


def read_notes(home: Path, memory_ids: Iterable[str]) -> dict[str, dict[str, VoterNote]]:
    """memory id -> voter key -> note, for the ids that have notes."""
    path = notes_path(home)
    ids = list(dict.fromkeys(memory_ids))
    if not ids or not path.exists():
        return {}
    db = _reader(path)
    if db is None:
        return {}
    out: dict[str, dict[str, VoterNote]] = {}
    try:
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            rows = db.execute("SELECT memory_id, voter, decision, reason FROM notes "
                              f"WHERE memory_id IN ({marks})", chunk)  # noqa: S608 - marks only
            for memory_id, voter, decision, reason in rows:
                out.setdefault(memory_id, {})[voter] = VoterNote(voter, decision, reason)
    except sqlite3.Error:
        return out
    return out
