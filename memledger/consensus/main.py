"""Start the ABCI application process: open the stores, serve the socket."""

from __future__ import annotations

import logging
from pathlib import Path

from memledger.consensus.app import MemLedgerApp
from memledger.consensus.faults import FaultPlan
from memledger.consensus.store.snapshots import SnapshotStore
from memledger.consensus.store.state import CanonicalStore
from memledger.consensus.versions import SUPPORTED_APP_VERSIONS
from memledger.consensus.wire.server import run
from memledger.projection.writer import Projection

log = logging.getLogger("memledger.abci")


def serve(
    state_dir: Path,
    db_url: str,
    address: str,
    faults: FaultPlan | None = None,
    supported_versions: frozenset[int] = SUPPORTED_APP_VERSIONS,
    verify_helper: bool = False,
    snapshots_dir: Path | None = None,
    snapshot_interval: int = 0,
    snapshot_keep: int = 2,
) -> None:
    """Block serving ABCI on `address` until SIGINT/SIGTERM."""
    state_dir.mkdir(parents=True, exist_ok=True)
    store = CanonicalStore(str(state_dir))
    projection = Projection(db_url)
    receipt = projection.last_receipt()
    log.info(
        "canonical state at height %d (app hash %s); projection receipt %s",
        store.last_height, store.last_app_hash.hex(), receipt,
    )
    snapshots = None if snapshots_dir is None else SnapshotStore(snapshots_dir, snapshot_keep)
    app = MemLedgerApp(store, projection, faults=faults, supported_versions=supported_versions,
                       verify_helper=verify_helper, snapshots=snapshots,
                       snapshot_interval=snapshot_interval)
    try:
        run(app, address)
    finally:
        if app.snapshot_taker is not None:
            app.snapshot_taker.wait()  # its read transaction must end before the store
        app.verifier.close()
        projection.close()
        store.close()
