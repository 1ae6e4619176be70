"""Run the ABCI application in this process: open the store, serve the socket, close.

The commit sink (the node's SQL projection) is the caller's: `open_sink` gets the opened
store and returns it ready, caught up with that store. `memledger.daemon.appproc` wires
the projection in; consensus itself imports nothing from the serving side.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

from memledger.consensus.app import MemLedgerApp
from memledger.consensus.faults import FaultPlan
from memledger.consensus.store.sinks import CommitSink
from memledger.consensus.store.snapshots import SnapshotStore
from memledger.consensus.store.state import DEFAULT_MAP_SIZE, CanonicalStore
from memledger.consensus.versions import SUPPORTED_APP_VERSIONS
from memledger.consensus.wire.server import run

#: young-generation allocations between cyclic collections in the app process (default 700)
GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """Make the cyclic garbage collector cheap for a long-lived ABCI process.

    Why: every tx allocates hundreds of short-lived objects, so at the default thresholds
    the collector runs thousands of times a second and regularly walks the whole heap,
    caches included: 10-15% of the app's CPU under load. Startup objects (modules,
    protobuf descriptors) are moved out of its reach and collections are spaced out.
    Nothing the app computes depends on when garbage is collected.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, max(older, 20), max(oldest, 20))


def serve(
    state_dir: Path,
    open_sink: Callable[[CanonicalStore], CommitSink],
    address: str,
    faults: FaultPlan | None = None,
    supported_versions: frozenset[int] = SUPPORTED_APP_VERSIONS,
    verify_helper: bool = False,
    snapshots_dir: Path | None = None,
    snapshot_interval: int = 0,
    snapshot_keep: int = 2,
    retain_blocks: int = 0,
    state_map_bytes: int = DEFAULT_MAP_SIZE,
) -> None:
    """Block serving ABCI on `address` until SIGINT/SIGTERM."""
    state_dir.mkdir(parents=True, exist_ok=True)
    store = CanonicalStore(str(state_dir), map_size=state_map_bytes)
    sink = open_sink(store)
    snapshots = None if snapshots_dir is None else SnapshotStore(snapshots_dir, snapshot_keep)
    app = MemLedgerApp(store, sink, faults=faults, supported_versions=supported_versions,
                       verify_helper=verify_helper, snapshots=snapshots,
                       snapshot_interval=snapshot_interval, retain_blocks=retain_blocks)
    tune_gc()
    try:
        run(app, address)
    finally:
        app.statesync.close()
        if app.snapshot_taker is not None:
            app.snapshot_taker.wait()  # its read transaction must end before the store
        app.verifier.close()
        sink.close()
        store.close()
