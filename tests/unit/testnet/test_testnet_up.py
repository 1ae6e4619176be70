"""A failed `testnet up` stops only the nodes it started.

node0 of a 2-node net is running; node1 cannot start (here: its home's lock is held, so
its `memledger start` exits at once). The failed `up` must leave node0 running: it was not
this `up`'s to stop. node0 is stood in for by a process whose command line names it as
node0's supervisor (how the net finds a node's processes), so no consensus runs here.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memledger.cli.main import main
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import NodeError, Testnet


@pytest.fixture()
def net_with_node0_up(tmp_path: Path) -> Iterator[tuple[Testnet, subprocess.Popen[bytes]]]:
    net = Testnet.create(tmp_path / "net", 2, voter=False)
    node0 = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", "memledger.cli.main", "start",
         "--home", str(net.node(0).home)], start_new_session=True)
    held = net.node(1).node_home.lock()  # node1's `memledger start` refuses: home in use
    try:
        wait_until(lambda: net.node(0).running, 10, 0.05, what="the stand-in for node0")
        yield net, node0
    finally:
        node0.kill()
        node0.wait()
        if held is not None:
            held.close()
        net.node(1).kill()


def test_a_failed_up_leaves_the_nodes_it_did_not_start_running(
        net_with_node0_up: tuple[Testnet, subprocess.Popen[bytes]]) -> None:
    net, node0 = net_with_node0_up
    with pytest.raises(NodeError, match="node1 exited with 1 while starting"):
        net.up(timeout=30)
    assert node0.poll() is None, "the failed up stopped node0, which it had not started"
    assert net.node(0).processes() == {"supervisor": [node0.pid]}
    assert not net.node(1).running


def test_a_failed_testnet_up_command_leaves_running_nodes_running(
        net_with_node0_up: tuple[Testnet, subprocess.Popen[bytes]]) -> None:
    net, node0 = net_with_node0_up
    result = CliRunner().invoke(main, ["testnet", "up", str(net.root), "--no-api",
                                       "--timeout", "30"])
    assert result.exit_code == 1, result.output
    assert "memledger: error: node1 exited with 1 while starting" in result.stderr
    assert "starting node1" in result.stderr and "starting node0" not in result.stderr
    assert node0.poll() is None, "the failed up stopped node0, which it had not started"
    assert not net.node(1).running


def test_a_new_test_net_serves_snapshots_while_young(tmp_path: Path) -> None:
    """With a node's defaults (a snapshot every 1,000 blocks) a net younger than that had
    none, and the README's `testnet add-node NET --state-sync` never joined."""
    net = Testnet.create(tmp_path / "net", 2, voter=False)
    for node in net.nodes:
        config = node.node_home.load()
        assert (config.snapshot_interval, config.snapshot_keep) == (25, 10)
