"""A clean stop keeps what the API acknowledged, and a stop during startup is prompt
(real cometbft).

CometBFT does not keep its mempool across a restart: a tx acknowledged with wait=sync
and still in the mempool when the node stopped was gone after the restart, on a node
whose peers did not hold it. A stop now lets the node make blocks until its mempool is
empty (at most supervisor.DRAIN_S) once the API no longer takes txs.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger.daemon import cometbft
from memledger.daemon.home import NodeHome
from memledger.sdk.rpc import RpcClient
from memledger.sdk.txbuilder import TxBuilder
from memledger.sdk.waiting import wait_until
from memledger.testnet.procs import node_processes
from tests.support.chain import seeded_key
from tests.support.node import NodeRunner, statuses_after_start, wait_api_ready

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-clean-stop"
AGENT = seeded_key("clean-stop-agent")


def _slow_blocks(cfg: Any) -> None:
    """A 4 s gap between blocks: acknowledged txs wait in the mempool."""
    cfg["consensus"]["timeout_commit"] = "4s"


def test_a_clean_stop_commits_what_was_acknowledged_first(tmp_path: Path,
                                                         cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id=CHAIN)
    cometbft.edit_config(NodeHome(runner.home).cometbft, _slow_blocks)
    runner.start()
    agent = TxBuilder(AGENT, CHAIN)
    try:
        wait_api_ready(runner.api_url)
        rpc = runner.rpc()
        rpc.wait_for_height(rpc.latest_height() + 1)  # just committed: ~4 s to the next
        with httpx.Client(base_url=runner.api_url, timeout=30) as api:
            for i in range(3):
                tx = base64.b64encode(agent.submit(10 + i, f"s-{i}", f"acked {i}")).decode()
                answer = api.post("/v1/txs", params={"wait": "sync"}, json={"tx": tx})
                assert answer.status_code == 202 and answer.json()["status"] == "accepted"
        assert runner.stop() == 0
        assert statuses_after_start(runner, [f"s-{i}" for i in range(3)]) == [200] * 3
    finally:
        runner.stop()


@pytest.mark.parametrize("victim", ["voter", "api"])
def test_a_dead_voter_or_api_stops_the_node_with_what_was_acknowledged(
        victim: str, tmp_path: Path, cometbft_bin: Path) -> None:
    """cometbft and the app are healthy when the voter or the REST API dies: the node
    stops (exit 1) but first commits the txs the API acknowledged, as a Ctrl-C does."""
    runner = NodeRunner(tmp_path / "home", chain_id=CHAIN, voter=True)
    cometbft.edit_config(NodeHome(runner.home).cometbft, _slow_blocks)
    runner.start()
    agent = TxBuilder(AGENT, CHAIN)
    ids = [f"d-{i}" for i in range(3)]
    try:
        wait_api_ready(runner.api_url)
        rpc = runner.rpc()
        rpc.wait_for_height(rpc.latest_height() + 1)  # just committed: ~4 s to the next
        with httpx.Client(base_url=runner.api_url, timeout=30) as api:
            for i, memory_id in enumerate(ids):
                tx = base64.b64encode(agent.submit(30 + i, memory_id, f"acked {i}")).decode()
                answer = api.post("/v1/txs", params={"wait": "sync"}, json={"tx": tx})
                assert answer.status_code == 202 and answer.json()["status"] == "accepted"
        os.kill(node_processes(runner.home)[victim][0], signal.SIGKILL)
        assert runner.wait_exit(60) == 1
        assert f"{victim} exited with code -9" in runner.output, runner.output
        assert statuses_after_start(runner, ids) == [200] * 3
    finally:
        runner.stop()


def test_txs_arriving_during_the_stop_do_not_keep_it_waiting(tmp_path: Path,
                                                             cometbft_bin: Path) -> None:
    """Txs sent to cometbft's RPC directly keep its mempool from ever emptying: the stop
    waits for the txs that were there when it began (first in, first out), not for an
    empty mempool, and what the API acknowledged is committed."""
    runner = NodeRunner(tmp_path / "home", chain_id=CHAIN)
    runner.start()
    agent, flood = TxBuilder(AGENT, CHAIN), TxBuilder(seeded_key("clean-stop-flood"), CHAIN)
    stop_flood = threading.Event()

    def flooding() -> None:
        nonce = 1
        with RpcClient(runner.rpc_url, timeout=5) as rpc:
            while not stop_flood.is_set():
                with contextlib.suppress(Exception):
                    rpc.broadcast_tx_async(flood.submit(nonce, f"f-{nonce}", f"flood {nonce}"))
                nonce += 1
                time.sleep(0.005)

    flooder = threading.Thread(target=flooding, daemon=True)
    try:
        wait_api_ready(runner.api_url)
        flooder.start()
        with httpx.Client(base_url=runner.api_url, timeout=30) as api:
            for i in range(3):
                tx = base64.b64encode(agent.submit(20 + i, f"t-{i}", f"acked {i}")).decode()
                assert api.post("/v1/txs", params={"wait": "sync"},
                                json={"tx": tx}).status_code == 202
        assert runner.stop() == 0
        assert "still in the mempool" not in runner.output, runner.output
        stop_flood.set()
        flooder.join(10)
        assert statuses_after_start(runner, [f"t-{i}" for i in range(3)]) == [200] * 3
    finally:
        stop_flood.set()
        runner.stop()


def test_a_stop_during_startup_stops_at_once(tmp_path: Path, cometbft_bin: Path) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id=CHAIN)
    runner.start(wait=False)
    assert runner.proc is not None
    try:
        wait_until(lambda: "app" in node_processes(runner.home), 30, 0.05,
                   what="the app process")
        app_pid = node_processes(runner.home)["app"][0]
        os.kill(app_pid, signal.SIGSTOP)  # a slow start (a long projection catch-up)
        try:
            started = time.monotonic()
            runner.proc.send_signal(signal.SIGTERM)
            time.sleep(1.0)
        finally:
            os.kill(app_pid, signal.SIGCONT)
        code = runner.proc.wait(30)
        took = time.monotonic() - started
        output = runner.proc.stdout.read() if runner.proc.stdout else ""
    finally:
        runner.stop()
    assert code == 0, output
    assert took < 20, took
    assert "node running" not in output, output
    assert not (runner.home / "logs" / "cometbft.log").exists()
