"""Start the ABCI application process: open the stores, serve the socket."""

from __future__ import annotations

import logging
from pathlib import Path

from abci.app import FaultPlan, MemLedgerApp
from abci.projection import Projection
from abci.rules import SUPPORTED_APP_VERSIONS
from abci.server import run
from abci.state import CanonicalStore

log = logging.getLogger("memledger.abci")


def serve(
    state_dir: Path,
    db_url: str,
    address: str,
    faults: FaultPlan | None = None,
    supported_versions: frozenset[int] = SUPPORTED_APP_VERSIONS,
    verify_helper: bool = False,
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
    app = MemLedgerApp(store, projection, faults=faults, supported_versions=supported_versions,
                       verify_helper=verify_helper)
    try:
        run(app, address)
    finally:
        app.verifier.close()
        projection.close()
        store.close()
