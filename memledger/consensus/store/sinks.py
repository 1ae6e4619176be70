"""Where committed blocks go besides LMDB: the interface the app writes through.

The app makes a block durable in a fixed order, the commit sink first (the node's SQL
projection, with its receipt), then LMDB, and halts rather than answer a Commit either
could not take. The consensus core only knows this interface; the process that starts
the app (`memledger.daemon.appproc`) passes in the projection, which implements it. So
consensus imports nothing from the serving side, and a test can pass its own sink.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from memledger.consensus.store.state import CanonicalStore


class RestoreFeedError(RuntimeError):
    """A restore feed failed or died; the sink is rebuilt in-process after the restore."""


class RestoreFeed(Protocol):
    """A sink being filled while a state-sync restore stores its chunks (in another
    process), finished only once the restored state matched the trusted app hash."""

    @property
    def pid(self) -> int:
        """The process doing the work (tests kill it)."""
        ...

    def advance(self, upto: bytes) -> None:
        """Records up to and including key `upto` are committed in LMDB: take them."""
        ...

    def finish(self, height: int, app_hash: bytes) -> int:
        """Take the rest and commit at `height`; returns records read (RestoreFeedError
        if it failed)."""
        ...

    def abort(self) -> None:
        """Drop what was taken and stop."""
        ...


class CommitSink(Protocol):
    """What the app calls at Commit, during and after a state-sync restore, and at exit."""

    def flush(
        self,
        height: int,
        app_hash: bytes,
        changes: Iterable[tuple[bytes, bytes | None]],
        before_commit: Callable[[], None] | None = None,
        follows: int = 0,
    ) -> bool:
        """Take one block's changes durably, before LMDB commits them; False if this
        height was already taken (a replayed block). `follows` is the height LMDB
        committed last, which the sink must hold (0: unchecked); `before_commit` is a
        test hook run inside the sink's transaction. Raises on any failure."""
        ...

    def restore_feed(self, state_dir: str) -> RestoreFeed | None:
        """A feed for a restore into the LMDB store at `state_dir`, or None when this
        sink cannot be filled from another process (OSError/RuntimeError if it fails to
        start: the restore then rebuilds in-process)."""
        ...

    def rebuild_committed(self, store: CanonicalStore) -> int:
        """Rebuild from the store's committed state; returns records read."""
        ...

    def close(self) -> None:
        ...
