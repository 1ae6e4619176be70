"""Byzantine validators on real cometbft: a differing state machine, a double signer.

1. A validator whose state machine differs stops itself; the other three go on.

Real cometbft, four validators. One node's app is restarted as a build that differs
(`--app-arg=--diverge-at=H`, memledger.consensus.faults: from height H it skips every tx
of a block), while memories keep arriving. At the first block with a tx its app hash
differs from the others'; the next header carries the majority's app hash, and that
node's cometbft refuses the block the other three committed ("+2/3 committed an invalid
block: wrong Block.Header.AppHash") and stops there. The three honest validators hold
3/4 of the power, more than 2/3: they must keep making blocks, and agree.

2. A validator key run on two nodes at once signs two different votes at one height and
round (each copy proposes its own block when the key's turn comes, and prevotes it): the
honest nodes see both, CometBFT commits the evidence and reports it in FinalizeBlock, and
the chain removes that validator itself (app version 10, docs/RULES.md "Misbehaviour"):
a `misbehaviour` event with action `removed`, and the validator set shrinks to three.
"""

from __future__ import annotations

import base64
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest

from memledger.sdk.rpc import RpcClient, RpcError
from memledger.sdk.txbuilder import TxBuilder
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import Testnet
from tests.support.chain import seeded_key

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-byz"


def _write(net: Testnet, stop: threading.Event, via: tuple[int, ...] = (0,)) -> None:
    builder = TxBuilder(seeded_key("byzantine-writer"), CHAIN)
    i = 0
    while not stop.is_set():
        i += 1
        try:
            with RpcClient(net.node(via[i % len(via)]).rpc_url, timeout=5) as rpc:
                rpc.broadcast_tx_sync(builder.submit(time.time_ns(), f"byz-{i}", f"memory {i}"))
        except (httpx.HTTPError, RpcError):
            pass
        stop.wait(0.3)


def _tear_down(net: Testnet, stop: threading.Event, writer: threading.Thread) -> None:
    """Stop the writer, then every node (the ones a test started by hand too)."""
    stop.set()
    if writer.is_alive():
        writer.join(10)
    net.down(timeout=20)
    for node in net.nodes:
        node.kill()


def test_validator_with_a_differing_state_machine_halts_alone(tmp_path: Path,
                                                              cometbft_bin: Path) -> None:
    net = Testnet.create(tmp_path / "net", 4, chain_id=CHAIN, voter=False)
    stop = threading.Event()
    writer = threading.Thread(target=_write, args=(net, stop), daemon=True)
    try:
        net.up(voter=False)
        liar = net.node(3)
        diverge = net.wait_caught_up() + 3
        liar.stop()
        liar.start(voter=False, app_args=[f"--diverge-at={diverge}"])
        writer.start()
        honest = net.nodes[:3]
        log_path = liar.node_home.logs / "cometbft.log"
        wait_until(lambda: "CONSENSUS FAILURE" in log_path.read_text(errors="replace"),
                   120, 0.5, what="the differing node to stop on the app hash")
        log = log_path.read_text(errors="replace")
        # cometbft words the stop by the path that met the block (as the proposer's
        # prevote, or as +2/3 committed it): both name the app hash
        failure = log[log.index("CONSENSUS FAILURE"):][:4000]
        assert "AppHash" in failure, failure

        stuck = liar.height()
        assert stuck is not None and stuck >= diverge, (stuck, diverge)
        net.wait_height(stuck + 8, honest, timeout=60)
        assert liar.height() == stuck, "the differing node kept committing blocks"
        report = net.check(honest, projections=False)
        assert report.divergence is None and not report.unreachable, report
    finally:
        _tear_down(net, stop, writer)


def _misbehaviour_events(rpc: RpcClient, low: int, high: int) -> list[dict[str, str]]:
    found = []
    for h in range(low, high + 1):
        for event in rpc.block_results(h).get("finalize_block_events") or []:
            if event.get("type") == "misbehaviour":
                found.append({str(a["key"]): str(a["value"])
                              for a in event.get("attributes") or []})
    return found


def test_double_signing_validator_is_removed_by_the_chain(tmp_path: Path,
                                                         cometbft_bin: Path) -> None:
    net = Testnet.create(tmp_path / "net", 4, chain_id=CHAIN, voter=False)
    net.add_node()  # node4: the twin, same key as node3, its own node id and mempool
    twin, original = net.node(4), net.node(3)
    key = "config/priv_validator_key.json"
    shutil.copyfile(original.node_home.cometbft / key, twin.node_home.cometbft / key)
    liar_key = base64.b64encode(original.validator_pubkey).decode()
    stop = threading.Event()
    writer = threading.Thread(target=_write, args=(net, stop, (0, 4)), daemon=True)
    try:
        net.up(voter=False)
        writer.start()
        deadline = time.monotonic() + 150
        seen: list[dict[str, str]] = []
        checked = 1
        with RpcClient(net.node(0).rpc_url, timeout=10) as rpc:
            while not seen and time.monotonic() < deadline:
                top = rpc.latest_height()
                seen = _misbehaviour_events(rpc, checked, top)
                checked = top + 1
                time.sleep(1)
            assert seen, "no misbehaviour reported in 150 s of a key signing on two nodes"
            assert seen[0]["kind"] == "duplicate_vote", seen
            assert seen[0]["action"] == "removed", seen
            assert seen[0]["validator"] == original.validator_pubkey.hex(), seen
            honest = net.nodes[:3]
            net.wait_height(checked + 4, honest, timeout=60)
            keys = [v["pub_key"]["value"] for v in rpc.validators()["validators"]]
        assert len(keys) == 3 and liar_key not in keys, keys
        assert net.check(honest, projections=False).divergence is None
    finally:
        _tear_down(net, stop, writer)
