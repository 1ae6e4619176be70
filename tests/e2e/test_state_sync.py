"""State sync on a real net: four validators holding 50,000 memories and a governance
change; a fifth node restores a snapshot (one peer serves corrupted chunks), catches up,
and every node agrees from the height it joined at."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from memledger.devtools.fill import fill
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import Testnet, TestnetNode
from tests.support.node import memledger

pytestmark = pytest.mark.cometbft
MEMORIES = 50_000
APP_STATE = {"app_version": 3, "params": {"gov_voting_period": 200}}
SNAPSHOT_INTERVAL = 25


@pytest.fixture()
def snapnet(tmp_path: Path, cometbft_bin: Path) -> Iterator[Testnet]:
    net = Testnet.create(tmp_path / "net", 4, chain_id="memledger-sync", app_state=APP_STATE,
                         voter=False)
    for node in net.nodes:
        config = node.node_home.load()
        config.snapshot_interval = SNAPSHOT_INTERVAL
        config.snapshot_keep = 10  # blocks are fast here: keep snapshots alive while fetched
        node.node_home.save(config)
    try:
        for node in net.nodes[:3]:
            node.start(voter=False, wait=False)
        # node3 serves every snapshot chunk with a flipped byte.
        net.node(3).start(voter=False, wait=False, app_args=["--corrupt-snapshot-chunks"])
        for node in net.nodes:
            node.wait_ready(120)
        yield net
    finally:
        net.down(timeout=20)
        for node in net.nodes:
            node.kill()


def _memories(db_url: str) -> int:
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM memories")).scalar_one())
    finally:
        engine.dispose()


def _wait_snapshot_after(net: Testnet, height: int, timeout: float = 240) -> None:
    """Until the honest validators all serve a snapshot above `height`."""
    def served(node: TestnetNode) -> bool:
        found = [int(p.name) for p in node.node_home.snapshots_dir.glob("[0-9]*")
                 if p.name.isdigit()]
        return bool(found) and max(found) > height

    wait_until(lambda: all(served(node) for node in net.nodes[:3]), timeout, 1,
               what=f"a snapshot above height {height} on the three honest validators")


def test_a_new_node_state_syncs_past_a_corrupt_peer_and_agrees(snapnet: Testnet) -> None:
    report = fill(snapnet.rpc_urls(snapnet.nodes[:3]), snapnet.chain_id, MEMORIES)
    print(f"filled {report.memories} memories in {report.seconds:.0f}s "
          f"({report.per_s:.0f}/s over 4 validators)")
    assert _memories(snapnet.node(0).db_url) >= MEMORIES

    def gov(i: int, *args: str) -> dict:  # type: ignore[type-arg]
        confirm = ["--yes"] if args[0] in ("propose", "vote") else []
        out = memledger("gov", *args, "--home", str(snapnet.node(i).home), *confirm, "--json",
                        timeout=300)
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    pid = gov(0, "propose", "param", "nonce_window", "128")["proposal_id"]
    for i in (0, 1, 2):
        gov(i, "vote", pid, "yes")
    executed = gov(0, "watch", pid, "--timeout", "120")
    assert executed["status"] == "executed"
    _wait_snapshot_after(snapnet, int(executed["executed_height"]))

    snapnet.add_node(state_sync=True)
    joined = snapnet.nodes[-1]
    joined.start(voter=False, wait=False)
    joined.wait_ready(300)
    snapnet.wait_caught_up([joined], timeout=300)
    with joined.rpc(30) as rpc:
        sync = rpc.status()["sync_info"]
    earliest = int(sync["earliest_block_height"])
    assert earliest > 1, "the new node replayed from genesis instead of restoring"
    app_log = (joined.home / "logs" / "app.log").read_text()
    assert "restored height" in app_log
    refetched = app_log.count("does not match its hash")
    print(f"joined at height {earliest}; chunks refused from the corrupt peer: {refetched}")
    assert _memories(joined.db_url) >= MEMORIES
    params = json.loads(memledger("gov", "list", "--home", str(joined.home), "--json").stdout)
    assert [p["status"] for p in params if p["id"] == pid] == ["executed"]
    # Headers and FinalizeBlock app hashes of all five, from the height node4 joined at.
    headers = snapnet.check(projections=False)
    assert headers.ok and headers.conclusive, headers.to_json()
    assert headers.first_common_height == earliest and len(headers.heights) == 5
    # Projections: a dump of 100k rows takes longer than a block, so halt the chain (two
    # of four equal validators down) and compare node4's projection with the two others
    # still up; then swap which two are down, so all five are compared with node4.
    n0, n1, n2, n3 = snapnet.nodes[:4]
    for halves in (((n2, n3), (n0, n1)), ((n0, n1), (n2, n3))):
        down, up = halves
        for node in down:
            node.stop(timeout=30)
        for node in up:
            if not node.running:
                node.start(voter=False, wait=True)
        snapnet.wait_caught_up([*up, joined], timeout=180)
        check = snapnet.check([*up, joined], timeout=120)
        assert check.ok and check.conclusive, check.to_json()
        assert check.projection_height is not None
        assert check.projection_height >= earliest
