"""The node's app process: the ABCI app wired to the node's SQL projection.

Consensus knows the projection only as a commit sink (`consensus.store.sinks`); this is
where the two meet. `memledger app` (started by the supervisor) runs `serve`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from memledger.consensus import main as consensus_main
from memledger.consensus.faults import FaultPlan
from memledger.consensus.store.state import DEFAULT_MAP_SIZE, CanonicalStore
from memledger.consensus.versions import SUPPORTED_APP_VERSIONS
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
    retain_blocks: int = 0,
    state_map_bytes: int = DEFAULT_MAP_SIZE,
) -> None:
    """Block serving ABCI on `address`, flushing to the projection at `db_url`, until
    SIGINT/SIGTERM."""
    consensus_main.serve(
        state_dir, lambda store: open_projection(db_url, store), address, faults,
        supported_versions, verify_helper=verify_helper, snapshots_dir=snapshots_dir,
        snapshot_interval=snapshot_interval, snapshot_keep=snapshot_keep,
        retain_blocks=retain_blocks, state_map_bytes=state_map_bytes)


def open_projection(db_url: str, store: CanonicalStore) -> Projection:
    """The projection at `db_url`, caught up with the opened canonical `store`."""
    projection = Projection(db_url)
    receipt = projection.last_receipt()
    log.info(
        "canonical state at height %d (app hash %s)%s; projection receipt %s",
        store.last_height, store.last_app_hash.hex(),
        " restored by state sync, no block on it yet" if store.restore_unconfirmed else "",
        receipt,
    )
    catch_up_projection(store, projection)
    return projection


def catch_up_projection(store: CanonicalStore, projection: Projection) -> bool:
    """Rebuild a projection that is behind canonical state before serving anything.

    Commit writes the projection before LMDB, so a projection is never behind in normal
    running. It is when a node died between a state-sync restore and the end of its
    projection rebuild, or its database was lost or replaced: serving it would silently
    hide committed memories, and replaying blocks cannot fill it (they are not ours to
    replay). It is derived data, so it is rebuilt from the committed records.
    Returns whether it rebuilt.
    """
    receipt = projection.last_receipt()
    if store.last_height == 0:
        return False
    behind = receipt is None or receipt[0] < store.last_height
    if not behind and not projection.has_gaps():
        return False
    why = "is behind" if behind else "lost blocks below its last one"
    log.warning("projection %s canonical state (receipt %s, state at height %d): "
                "rebuilding it from canonical state", why, receipt, store.last_height)
    count = projection.rebuild_committed(store)
    log.info("projection rebuilt from %d records at height %d", count, store.last_height)
    return True
