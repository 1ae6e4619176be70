"""One agent key, 16 threads, 2,000 submits with wait="sync" on a real single node.

Under the v2 rule (strictly increasing nonces) acknowledged writes could be lost to nonce
ordering; after the upgrade to v3 (the nonce window) none is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memledger.daemon import cometbft
from memledger.daemon.home import NodeHome
from memledger.devtools.burst import missing, run_burst, wait_mempool_empty
from tests.support.chain import seeded_key
from tests.support.node import NodeRunner, memledger, wait_api_ready

pytestmark = pytest.mark.cometbft
WRITERS, TOTAL = 16, 2000
AGENT = seeded_key("one-agent-many-threads")


def prepare(runner: NodeRunner) -> None:
    """Quick upgrades, and no REST rate limit: one client host sends the whole burst."""
    home = NodeHome(runner.home)
    genesis = cometbft.load_genesis(home.cometbft)
    genesis["app_state"]["params"] = {"gov_min_upgrade_delay": 4, "gov_voting_period": 30}
    cometbft.write_genesis(home.cometbft, genesis)
    config = home.load()
    config.extra["api_rate_limit_per_s"] = "0"
    home.save(config)


def upgrade_to_v3(home: str) -> None:
    out = memledger("gov", "propose", "upgrade", "order-free-nonces", "--app-version", "3",
                    "--home", home, "--yes", "--json")
    pid = json.loads(out.stdout)["proposal_id"]
    memledger("gov", "vote", pid, "yes", "--home", home, "--yes")
    watched = memledger("gov", "watch", pid, "--home", home, "--timeout", "120", "--json")
    assert json.loads(watched.stdout)["watch_state"] == "activated"


def test_no_acknowledged_write_lost_after_the_nonce_window_upgrade(
    tmp_path: Path, cometbft_bin: Path,
) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id="burst-it", app_version=2)
    prepare(runner)
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        urls = [runner.api_url]
        old = run_burst(urls, AGENT, writers=WRITERS, total=TOTAL, label="v2")
        wait_mempool_empty(runner.rpc_url)
        # Under v2, CheckTx acknowledged writes the block then refused for nonce order.
        # Since the API admits one signer's txs one at a time, they reach CheckTx nearly
        # in nonce order and v2 rarely loses one through one node: the count is reported,
        # not required. What v3 must show is below.
        lost_old = missing(runner.api_url, list(old.acknowledged))

        upgrade_to_v3(str(runner.home))
        new = run_burst(urls, AGENT, writers=WRITERS, total=TOTAL, label="v3")
        wait_mempool_empty(runner.rpc_url)
        assert new.refused == {} and len(new.acknowledged) == TOTAL, new.refused
        assert missing(runner.api_url, list(new.acknowledged)) == []
        print(f"v2: {len(lost_old)} of {len(old.acknowledged)} acknowledged lost; "
              f"v3: 0 of {len(new.acknowledged)} ({TOTAL / new.elapsed_s:.0f} submits/s)")
    finally:
        runner.stop()
