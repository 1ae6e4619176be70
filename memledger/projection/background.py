"""A projection rebuild in a child process, fed while a state-sync restore is running.

A restore has two big jobs: storing and checking the snapshot's chunks (LMDB, the hash
tree) and building the SQL projection from the same records. Done one after the other,
the second doubles the time before a new node serves. Here the projection is built in a
child process, on the other core, from the records each stored chunk committed to LMDB,
in the rebuild's one SQL transaction (`rebuild.RebuildWriter`). Only when the restored
state has hashed to the trusted app hash does the parent ask it to finish (indexes,
receipt, commit); a rejected snapshot, or a parent that dies, rolls it back.

The child is `python -m memledger.projection.background FD`, talking over a socket pair
(not multiprocessing's spawn, which re-imports the parent's main module). Messages,
parent to child: ("open", db_url, state_dir) first (a database password stays out of
the process list), ("upto", key) after each stored chunk, then ("finish", height,
app_hash) or ("abort",); child to parent: ("done", records) or ("error", text). The
parent rebuilds in-process if the child fails.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import Any

from memledger.consensus.store.sinks import RestoreFeedError

log = logging.getLogger("memledger.projection")

#: seconds the parent waits for an aborted child before killing it
ABORT_GRACE_S = 30.0


class BackgroundRebuildError(RestoreFeedError):
    """The child failed or died; the caller rebuilds in-process instead."""


class BackgroundRebuild:
    """The parent's handle on one child rebuild of the projection at `db_url` (the
    projection's restore feed, `consensus.store.sinks.RestoreFeed`)."""

    def __init__(self, db_url: str, state_dir: str) -> None:
        ours, theirs = socket.socketpair()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "memledger.projection.background", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self._pipe = Connection(ours.detach())
        self._closed = False
        self._send(("open", db_url, state_dir))

    @property
    def pid(self) -> int:
        return self._process.pid

    def advance(self, upto: bytes) -> None:
        """Records up to and including key `upto` are committed in LMDB: add them."""
        self._send(("upto", upto))

    def finish(self, height: int, app_hash: bytes) -> int:
        """Add the rest, build the indexes, commit; returns records read."""
        self._send(("finish", height, app_hash))
        try:
            reply = self._pipe.recv()
        except (EOFError, OSError) as exc:
            raise BackgroundRebuildError(f"the rebuild process died: {exc!r}") from None
        finally:
            self._close()
        if reply[0] != "done":
            raise BackgroundRebuildError(f"the rebuild process failed: {reply[1]}")
        return int(reply[1])

    def abort(self) -> None:
        """Roll the child's transaction back and wait for it to exit."""
        if self._closed:
            return
        try:
            self._pipe.send(("abort",))
        except (BrokenPipeError, OSError):
            pass
        self._close()

    def _send(self, message: tuple[Any, ...]) -> None:
        if self._closed:
            raise BackgroundRebuildError("the rebuild process was already closed")
        try:
            self._pipe.send(message)
        except (BrokenPipeError, OSError) as exc:
            self._close()
            raise BackgroundRebuildError(f"the rebuild process is gone: {exc!r}") from None

    def _close(self) -> None:
        self._closed = True
        self._pipe.close()  # a child still reading sees the end of its input and aborts
        try:
            self._process.wait(ABORT_GRACE_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _child_main(pipe: Connection) -> None:
    """The child: read committed records from LMDB as told, write them in one transaction.

    A closed pipe (the parent died) ends it like an abort: the transaction rolls back.
    """
    from memledger.consensus.store.state import CanonicalStore
    from memledger.projection.rebuild import RebuildWriter
    from memledger.projection.schema import make_engine

    _, db_url, state_dir = pipe.recv()
    engine = make_engine(db_url)
    store = CanonicalStore(state_dir, readonly=True)
    writer: RebuildWriter | None = None
    try:
        writer = RebuildWriter(engine)
        done: bytes | None = None
        while True:
            try:
                message = pipe.recv()
            except (EOFError, OSError):
                writer.abort()
                return
            if message[0] == "abort":
                writer.abort()
                return
            with store.snapshot() as view:
                if message[0] == "upto":
                    writer.add(view.iter_range(done, message[1]), view)
                    done = message[1]
                    continue
                _, height, app_hash = message
                writer.add(view.iter_range(done, None), view)
                records = writer.finish(height, app_hash, view)
            pipe.send(("done", records))
            return
    except Exception as exc:  # reported to the parent, which rebuilds in-process
        if writer is not None:
            writer.abort()
        try:
            pipe.send(("error", repr(exc)))
        except OSError:
            pass
    finally:
        store.close()
        engine.dispose()
        pipe.close()


if __name__ == "__main__":
    _child_main(Connection(int(sys.argv[1])))
