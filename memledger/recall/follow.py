"""What both index followers share: which memories are new since a watermark, and the
thread that keeps an index at the projection's height."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa

from memledger.priority import run_in_background
from memledger.projection.schema import memories, receipts

log = logging.getLogger("memledger.recall")

#: memories read from the projection per step
CHUNK = 2000


def projection_height(conn: sa.Connection) -> int:
    """Height of the last block flushed into the projection (0 before the first)."""
    value = conn.execute(sa.select(sa.func.max(receipts.c.height))).scalar_one_or_none()
    return int(value or 0)


def submitted_between(lo: int, hi: int) -> sa.ColumnElement[bool]:
    """Memories with content submitted at `lo < height <= hi`: what an index at
    watermark `lo` lacks of a projection at height `hi`."""
    return sa.and_(memories.c.submitted_height > lo, memories.c.submitted_height <= hi,
                   memories.c.content.is_not(None))


def new_memories(conn: sa.Connection, lo: int, hi: int, chunk: int = CHUNK
                 ) -> Iterator[tuple[list[sa.Row[Any]], int]]:
    """Memories with content and `lo < submitted_height <= hi`, a chunk at a time in
    (height, id) order, each chunk with the watermark it allows: a height moves only
    once all of its rows are handed out, so the last mark is always `hi` (an empty
    chunk carries it when the rows fill the chunks exactly)."""
    after: tuple[int, str] | None = None
    while True:
        query = sa.select(memories.c.id, memories.c.content, memories.c.tags,
                          memories.c.submitted_height).where(submitted_between(lo, hi))
        if after is not None:
            query = query.where(memories.c.submitted_height >= after[0], sa.or_(
                memories.c.submitted_height > after[0], memories.c.id > after[1]))
        rows = list(conn.execute(query.order_by(memories.c.submitted_height, memories.c.id)
                                 .limit(chunk)).all())
        if not rows:
            if after is not None:
                yield [], hi  # the last chunk was full: only now is every row handed out
            return
        last = rows[-1]
        done = len(rows) < chunk
        yield rows, hi if done else max(lo, int(last.submitted_height) - 1)
        if done:
            return
        after = (int(last.submitted_height), str(last.id))


class FollowerThread:
    """Calls `step` in a daemon thread until stopped: again at once while it reports more
    to do, else after `poll_s`. A failed step is logged and retried later: a follower that
    stopped would leave searches behind the projection for good."""

    def __init__(self, name: str, step: Callable[[], bool], poll_s: float) -> None:
        self._step = step
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._paused = threading.Event()
        self._woken = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> FollowerThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        run_in_background()  # inherited by the threads it starts (tantivy's writer)
        while not self._stop.is_set():
            if self._paused.is_set():
                self._stop.wait(self._poll_s)
                continue
            caught_up = True
            self._woken.clear()  # a wake during the step is kept: the wait below returns
            try:
                caught_up = self._step()
            except sa.exc.OperationalError as exc:
                log.warning("projection not readable by %s: %s", self._thread.name, exc.orig)
            except Exception:  # noqa: BLE001 - the follower must keep following
                log.exception("%s step failed", self._thread.name)
            if caught_up:
                self._woken.wait(self._poll_s)

    def wake(self) -> None:
        """Take the next step now instead of at the next poll (a search saw memories the
        index lacks)."""
        self._woken.set()

    def pause(self) -> None:
        """Take no further step until `resume` (a step under way finishes). For
        measurements that compare a node's costs with and without its followers."""
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        self._woken.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)


class Following:
    """What an index owner that runs a FollowerThread (`_follower`) offers about it."""

    _follower: FollowerThread | None

    def pause(self, paused: bool = True) -> None:
        """Hold (or, with False, release) the follower between steps; searches go on."""
        if self._follower is not None:
            (self._follower.pause if paused else self._follower.resume)()
