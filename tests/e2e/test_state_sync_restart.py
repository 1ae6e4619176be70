"""State sync on a real net, interrupted: a joining node killed right after its restore
reached LMDB, before CometBFT saved its own state, syncs again at its next start.

Before, the store already held the restored height and answered every OfferSnapshot
ABORT: CometBFT reported "State sync failed" and the node sat at height 0 for good.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memledger.projection.writer import Projection
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import Testnet

pytestmark = pytest.mark.cometbft
SNAPSHOT_INTERVAL = 5


@pytest.fixture()
def one_validator(tmp_path: Path, cometbft_bin: Path) -> Iterator[Testnet]:
    net = Testnet.create(tmp_path / "net", 1, chain_id="memledger-sync-restart", voter=False)
    config = net.node(0).node_home.load()
    config.snapshot_interval = SNAPSHOT_INTERVAL
    config.snapshot_keep = 10
    net.node(0).node_home.save(config)
    try:
        net.node(0).start(voter=False, wait=True, timeout=120)
        yield net
    finally:
        net.down(timeout=20)
        for node in net.nodes:
            node.kill()


def test_a_node_killed_after_its_restore_syncs_again(one_validator: Testnet) -> None:
    net = one_validator
    net.node(0).wait_height(3 * SNAPSHOT_INTERVAL, timeout=120)
    net.add_node(state_sync=True)
    joined = net.nodes[-1]
    joined.start(voter=False, wait=False, app_args=["--kill-at=after_restore:0"])
    # Seen as the node's only once exec'd: before, wait_exit would find nothing to wait for.
    wait_until(lambda: "app" in joined.processes(), 60, 0.1, what="node's app process")
    joined.wait_exit(240)  # the app is SIGKILLed; the supervisor stops the rest
    app_log = joined.home / "logs" / "app.log"
    assert "SIGKILL at after_restore" in app_log.read_text()
    assert "restored height" not in app_log.read_text()  # killed before answering

    joined.start(voter=False, wait=False)
    joined.wait_ready(240)
    net.wait_caught_up([joined], timeout=240)
    with joined.rpc(30) as rpc:
        earliest = int(rpc.status()["sync_info"]["earliest_block_height"])
    assert earliest > 1, "the node replayed from genesis instead of restoring"
    text = app_log.read_text()
    assert "replacing the restore of height" in text and "restored height" in text
    headers = net.check(projections=False)
    assert headers.ok and headers.conclusive, headers.to_json()
    assert headers.first_common_height == earliest
    projection = Projection(joined.db_url)
    try:
        receipt = projection.last_receipt()
    finally:
        projection.close()
    assert receipt is not None and receipt[0] >= earliest  # built, and blocks on top
