"""The REST API's admission bounds one signer's backlog (docs/RULES.md, Nonces), on a real
node whose blocks are slow enough that what is pending stays pending.

Window 4 gives a backlog of 1 above the oldest pending tx: the second newer tx is refused
with 429 `signer_backlog_full` before it is broadcast, an older one is let in, and the
SDK waits the backlog out by signing again.
"""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger.daemon import cometbft
from memledger.daemon.home import NodeHome
from memledger.sdk import Client
from memledger.sdk.txbuilder import TxBuilder
from tests.support.chain import seeded_key
from tests.support.node import NodeRunner, wait_api_ready

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-backlog"
AGENT = seeded_key("backlog-agent")


def _tx(tx: bytes) -> dict[str, str]:
    return {"tx": base64.b64encode(tx).decode()}


def _slow_node(home: Path) -> NodeRunner:
    runner = NodeRunner(home, chain_id=CHAIN)
    node_home = NodeHome(runner.home)
    genesis = cometbft.load_genesis(node_home.cometbft)
    genesis["app_state"].setdefault("params", {})["nonce_window"] = 4
    cometbft.write_genesis(node_home.cometbft, genesis)

    def slow(cfg: Any) -> None:
        cfg["consensus"]["timeout_commit"] = "4s"

    cometbft.edit_config(node_home.cometbft, slow)
    return runner


def _in_mempool(runner: NodeRunner) -> int:
    doc = httpx.get(f"{runner.rpc_url}/num_unconfirmed_txs", timeout=10).json()
    return int(doc["result"]["n_txs"])


def _sync(api: httpx.Client, tx: bytes) -> httpx.Response:
    return api.post("/v1/txs", params={"wait": "sync"}, json=_tx(tx))


def test_a_full_backlog_is_refused_before_broadcast_and_the_sdk_waits_it_out(
    tmp_path: Path, cometbft_bin: Path,
) -> None:
    runner = _slow_node(tmp_path / "home")
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        agent = TxBuilder(AGENT, CHAIN)
        with httpx.Client(base_url=runner.api_url, timeout=30) as api:
            rpc = runner.rpc()
            height = rpc.status()["sync_info"]["latest_block_height"]
            rpc.wait_for_height(int(height) + 1)  # just committed: ~4 s before the next
            assert _sync(api, agent.submit(100, "b-100", "oldest pending")).status_code == 202
            assert _sync(api, agent.submit(101, "b-101", "one above it")).status_code == 202
            refused = _sync(api, agent.submit(102, "b-102", "a second one above it"))
            assert refused.status_code == 429, refused.text
            assert refused.headers["retry-after"] == "1"  # as the rate limit's 429
            doc = refused.json()
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert (doc["name"], doc["code"], doc["stage"]) == \
                ("signer_backlog_full", 15, "admission")
            assert "the limit is 1" in doc["detail"]
            assert _in_mempool(runner) == 2  # never broadcast
            older = _sync(api, agent.submit(99, "b-99", "older than every pending tx"))
            assert older.status_code == 202, older.text
            assert _in_mempool(runner) == 3
        started = time.monotonic()
        with Client(runner.api_url, key=AGENT, chain_id=CHAIN) as ml:
            receipt = ml.submit("b-sdk", "the SDK signs again until there is room")
        assert receipt.committed and time.monotonic() - started < 30
        with httpx.Client(base_url=runner.api_url, timeout=30) as api:
            for memory_id in ("b-99", "b-100", "b-101", "b-sdk"):
                assert api.get(f"/v1/memories/{memory_id}").status_code == 200, memory_id
            assert api.get("/v1/memories/b-102").status_code == 404
    finally:
        runner.stop()


def test_parallel_writes_of_one_signer_never_overrun_the_backlog(
    tmp_path: Path, cometbft_bin: Path,
) -> None:
    """Twenty higher nonces sent at once: each admission sees every earlier one, so one
    is acknowledged (the limit) and the others are refused with Retry-After; every
    acknowledged write is then in a block."""
    runner = _slow_node(tmp_path / "home")
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        agent = TxBuilder(AGENT, CHAIN)
        burst = [agent.submit(201 + i, f"p-{i}", f"parallel write {i}") for i in range(20)]
        limits = httpx.Limits(max_connections=40)
        with httpx.Client(base_url=runner.api_url, timeout=30, limits=limits) as api:
            rpc = runner.rpc()
            height = rpc.status()["sync_info"]["latest_block_height"]
            rpc.wait_for_height(int(height) + 1)
            assert _sync(api, agent.submit(200, "p-oldest", "oldest")).status_code == 202
            with ThreadPoolExecutor(max_workers=20) as pool:
                answers = list(pool.map(lambda tx: _sync(api, tx), burst))
            acked = [i for i, r in enumerate(answers) if r.status_code == 202]
            refused = [r for r in answers if r.status_code != 202]
            assert len(acked) == 1, [r.status_code for r in answers]
            assert all(r.status_code == 429 and r.json()["name"] == "signer_backlog_full"
                       and r.headers.get("retry-after") == "1" for r in refused)
            assert _in_mempool(runner) == 2
            deadline = time.monotonic() + 30
            wanted = ["p-oldest"] + [f"p-{i}" for i in acked]
            while time.monotonic() < deadline and not all(
                    api.get(f"/v1/memories/{m}").status_code == 200 for m in wanted):
                time.sleep(0.5)
            assert all(api.get(f"/v1/memories/{m}").status_code == 200 for m in wanted)
    finally:
        runner.stop()
