"""`memledger init --join <rpc url>`: a second node joins a running one by state sync.

The source prunes its blocks (`retain_blocks`): the join restores from a pruned node,
and the pruning holds its bounds on real cometbft (docs/OPERATIONS.md, "Block pruning").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from memledger.daemon.home import NodeHome
from memledger.sdk import Client
from memledger.sdk.light import GenesisRoot, PinnedRoot, TrustError
from memledger.sdk.waiting import wait_until
from tests.support.chain import seeded_key
from tests.support.node import REPO, NodeRunner, free_base_port, memledger, wait_api_ready

pytestmark = pytest.mark.cometbft
INTERVAL = 10
RETAIN = 100  # the smallest allowed: pruning starts at height ~110


def _sync_info(rpc_url: str) -> dict:  # type: ignore[type-arg]
    return httpx.get(f"{rpc_url}/status", timeout=5).json()["result"]["sync_info"]  # type: ignore[no-any-return]


def test_init_join_restores_a_snapshot_and_follows_the_chain(tmp_path: Path,
                                                             cometbft_bin: Path) -> None:
    source = NodeRunner(tmp_path / "source", chain_id="join-it")
    home = NodeHome(source.home)
    config = home.load()
    config.snapshot_interval = INTERVAL
    config.snapshot_keep = 20  # blocks are fast here: keep snapshots alive while fetched
    config.retain_blocks = RETAIN
    home.save(config)
    source.start()
    joiner: subprocess.Popen[str] | None = None
    try:
        wait_api_ready(source.api_url)
        with Client(source.api_url, key=seeded_key("joiner-test")) as client:
            for i in range(5):
                client.submit(f"before-join-{i}", f"written before the second node existed {i}")
        _check_pruning(source, home)
        target = _sync_info(source.rpc_url)["latest_block_height"]
        wait_until(lambda: any(p.name.isdigit() and int(p.name) > int(target)  # not NN.tmp
                               for p in home.snapshots_dir.glob("[0-9]*")),
                   60, 0.5, what=f"a snapshot above height {target}")

        second = tmp_path / "second"
        out = memledger("init", "--home", str(second), "--join", source.rpc_url,
                        "--base-port", str(free_base_port()))
        assert "join-it" in out.stdout
        joined = NodeHome(second).load()
        assert joined.chain_id == "join-it" and joined.voter is False
        toml = (second / "cometbft" / "config" / "config.toml").read_text()
        assert "enable = true" in toml and source.rpc_url.removeprefix("http://") in toml
        env = dict(os.environ, PYTHONPATH=str(REPO))
        joiner = subprocess.Popen([sys.executable, "-m", "memledger.cli.main", "start", "--home",
                                   str(second), "--no-api"], env=env, cwd=REPO,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True)
        rpc = f"http://127.0.0.1:{int(joined.rpc_laddr.rsplit(':', 1)[1])}"

        def caught_up() -> dict[str, Any] | None:
            assert joiner.poll() is None, (second / "logs" / "app.log").read_text()[-2000:]
            info = _sync_info(rpc)
            done = int(info["latest_block_height"]) > int(target) + 2 and \
                not info["catching_up"]
            return info if done else None

        info = wait_until(caught_up, 120, 0.5, what="the joined node to catch up",
                          ignore=(httpx.HTTPError, KeyError, ValueError))
        assert int(info["earliest_block_height"]) > 1  # restored, not replayed
        assert "restored height" in (second / "logs" / "app.log").read_text()
        engine = sa.create_engine(NodeHome(second).db_url(joined))
        with engine.connect() as conn:
            ids = {r[0] for r in conn.execute(sa.text("SELECT id FROM memories"))}
        engine.dispose()
        assert {f"before-join-{i}" for i in range(5)} <= ids
        # --voter keeps the auto-voter on: it votes once governance makes the node a
        # validator (before, --join turned it off whatever was asked)
        third = tmp_path / "third"
        memledger("init", "--home", str(third), "--join", source.rpc_url, "--voter",
                  "--base-port", str(free_base_port()))
        assert NodeHome(third).load().voter is True
        # A bad --join address is one clear line, not a traceback.
        bad = memledger("init", "--home", str(tmp_path / "bad"), "--join",
                        "http://127.0.0.1:9", check=False)
        assert bad.returncode == 1 and "cannot read genesis" in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    finally:
        if joiner is not None:
            joiner.terminate()
            joiner.wait(60)
        source.stop()


def _snapshot_heights(home: NodeHome) -> list[int]:
    return sorted(int(p.name) for p in home.snapshots_dir.glob("[0-9]*") if p.name.isdigit())


def _check_pruning(source: NodeRunner, home: NodeHome) -> None:
    """Old blocks go, the node goes on, the bound holds and reads still verify."""
    def pruned() -> dict[str, Any] | None:
        info = _sync_info(source.rpc_url)
        done = int(info["earliest_block_height"]) > 1 and \
            int(info["latest_block_height"]) >= RETAIN + 2 * INTERVAL
        return info if done else None

    info = wait_until(pruned, 180, 0.5, what="the source to prune its first blocks")
    earliest, latest = int(info["earliest_block_height"]), int(info["latest_block_height"])
    oldest = _snapshot_heights(home)[0]  # read after `earliest`: snapshots only move up
    # Snapshots reach back 20 x 10 blocks, further than the last 100 blocks: the oldest
    # snapshot (10, whose restore needs blocks 10-12) is where pruning stops.
    assert earliest <= oldest and earliest < latest - RETAIN + 1, (earliest, oldest, latest)
    assert earliest == oldest == INTERVAL
    gone = httpx.get(f"{source.rpc_url}/block", params={"height": "1"}, timeout=5).json()
    assert "lowest height is" in gone["error"]["data"]
    light = httpx.get(f"{source.api_url}/v1/light", params={"height": "1"}, timeout=5)
    assert light.status_code == 410 and light.json()["lowest_height"] == earliest
    wait_until(lambda: int(_sync_info(source.rpc_url)["latest_block_height"]) > latest + 2,
               30, 0.2, what="blocks after pruning")
    # Verified reads: a header pinned above the pruned blocks verifies; the genesis root
    # (which needs block 1) fails at once, saying so.
    block = httpx.get(f"{source.rpc_url}/block", params={"height": str(latest)},
                      timeout=5).json()["result"]
    pin = PinnedRoot(latest, bytes.fromhex(block["block_id"]["hash"]))
    with Client(source.api_url, trust=pin) as reader:
        assert reader.get("before-join-0", verify=True).verified_height is not None
    genesis = GenesisRoot.from_file(source.home / "cometbft" / "config" / "genesis.json")
    with Client(source.api_url, trust=genesis) as reader, pytest.raises(TrustError) as err:
        reader.get("before-join-0", verify=True)
    assert err.value.reason == "root_pruned" and "PinnedRoot" in err.value.message
