"""CPU priority of background work in the REST process.

On a small machine the REST process shares its cores with the ABCI process (whose Commit
may not wait) and with cometbft. Work that may lag a little runs at a lower priority:
the index followers and the reads. Writes, health and readiness run on the event loop
and the shared worker threads at the normal priority, so that they never queue for a
core behind reads, and an index follower gets the same share of a core as the searches
that would otherwise do its work for it (docs/ARCHITECTURE.md, "Threads and their
priority")."""

from __future__ import annotations

import contextlib
import os
import threading

#: Nice value of background threads (Linux nice values are per thread; threads a thread
#: starts inherit it). Raised only: an unprivileged process cannot lower it back.
BACKGROUND_NICE = 10


def run_in_background() -> None:
    """Lower the calling thread's CPU priority to BACKGROUND_NICE. Best effort: a no-op
    where threads have no nice value of their own."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
