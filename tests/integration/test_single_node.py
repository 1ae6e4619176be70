"""The ledger engine against the real cometbft binary, one validator."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from memledger.daemon import cometbft
from memledger.protocol.codes import Code
from memledger.protocol.pb import tx_pb2
from memledger.sdk.txbuilder import TxBuilder
from tests.support.chain import seeded_key
from tests.support.node import NodeRunner, memledger

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-it"
AGENT = seeded_key("it-agent")
STRANGER = seeded_key("it-stranger")
REJECT_AGENT = seeded_key("it-reject-agent")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[NodeRunner]:
    runner = NodeRunner(tmp_path_factory.mktemp("single") / "home", chain_id=CHAIN)
    runner.start("--no-api")
    yield runner
    runner.stop()


def _projection(node: NodeRunner) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{node.home / 'data' / 'projection.db'}")


def _memory_row(node: NodeRunner, memory_id: str) -> dict[str, object] | None:
    engine = _projection(node)
    with engine.connect() as conn:
        row = conn.execute(sa.text("select * from memories where id = :i"), {"i": memory_id})
        found = row.mappings().first()
    engine.dispose()
    return None if found is None else dict(found)


def _validator(node: NodeRunner) -> TxBuilder:
    return TxBuilder(cometbft.validator_signing_key(node.home / "cometbft"), CHAIN)


def test_submit_vote_commit_and_app_hash_in_next_header(node: NodeRunner) -> None:
    agent = TxBuilder(AGENT, CHAIN)
    with node.rpc() as rpc:
        submitted = rpc.broadcast_tx_commit(agent.submit(1, "it-1", "CometBFT runs our app"))
        assert submitted.code == 0, submitted
        assert _memory_row(node, "it-1")["status"] == "proposed"  # type: ignore[index]
        voted = rpc.broadcast_tx_commit(_validator(node).vote(1, "it-1", "accept"))
        assert voted.code == 0, voted
        row = _memory_row(node, "it-1")
        assert row is not None and row["status"] == "committed"
        assert row["content"] == "CometBFT runs our app"
        engine = _projection(node)
        with engine.connect() as conn:
            votes = conn.execute(
                sa.text("select voter, decision from votes where memory_id='it-1'"))
            assert [tuple(v) for v in votes] == [
                (cometbft.validator_pubkey(node.home / "cometbft").hex(), "accept")]
        engine.dispose()
        height = voted.height
        rpc.wait_for_height(height + 1, timeout=30)
        finalized = rpc.block_results(height)["app_hash"]
        header = rpc.block(height + 1)["block"]["header"]["app_hash"]
        assert finalized and base64.b64decode(finalized).hex().upper() == header.upper() or \
            finalized.upper() == header.upper()


def _forged(tx: bytes) -> bytes:
    env = tx_pb2.Tx.FromString(tx)
    env.signature = bytes(63) + b"\x07"
    return env.SerializeToString(deterministic=True)


def test_check_tx_rejections_over_rpc(node: NodeRunner) -> None:
    # Its own signer, memory and validator nonces: the state it needs (a used nonce, a vote
    # already cast), built here rather than left by the test before it.
    agent = TxBuilder(REJECT_AGENT, CHAIN)
    with node.rpc() as rpc:
        assert rpc.broadcast_tx_commit(agent.submit(1, "rj-1", "rejections")).code == 0
        assert rpc.broadcast_tx_commit(_validator(node).vote(100, "rj-1", "accept")).code == 0
    cases = {
        "forged": (_forged(agent.submit(50, "x-1", "forged")), Code.BAD_SIGNATURE),
        "wrong chain": (TxBuilder(REJECT_AGENT, "other").submit(51, "x-2", "c"),
                        Code.WRONG_CHAIN_ID),
        "replayed nonce": (agent.submit(1, "x-3", "replay"), Code.NONCE_REPLAYED),
        "nonce zero": (agent.submit(0, "x-4", "zero"), Code.NONCE_ZERO),
        "non-canonical": (agent.submit(52, "x-5", "nc") + b"\x20\x01", Code.TX_NOT_CANONICAL),
        "oversized": (agent.submit(53, "x-6", "x" * (1 << 20)), Code.TX_TOO_LARGE),
        "non-validator vote": (TxBuilder(STRANGER, CHAIN).vote(1, "rj-1"), Code.NOT_A_VALIDATOR),
        "double vote": (_validator(node).vote(101, "rj-1", "reject"), Code.ALREADY_VOTED),
    }
    with node.rpc() as rpc:
        for name, (tx, code) in cases.items():
            result = rpc.broadcast_tx_sync(tx)
            assert result.code == code, (name, result)


def _info(node: NodeRunner) -> dict[str, object]:
    with node.rpc() as rpc:
        return rpc.abci_info()


@pytest.mark.parametrize("hook", ["--fail-flush-height", "--exit-before-commit-height"])
def test_halt_then_restart_replays_block(tmp_path: Path, cometbft_bin: Path, hook: str) -> None:
    runner = NodeRunner(tmp_path / "home", chain_id=CHAIN)
    agent = TxBuilder(AGENT, CHAIN)
    runner.start("--no-api")
    with runner.rpc() as rpc:
        assert rpc.broadcast_tx_commit(agent.submit(1, "h-1", "before the fault")).code == 0
    runner.stop()
    with runner.rpc() as rpc:
        pass
    # Restart with the fault armed a few blocks ahead, keep submitting until it fires.
    state_height = int(json.loads((runner.home / "cometbft" / "data" / "priv_validator_state.json")
                                  .read_text())["height"])
    fault_height = state_height + 3
    runner.start("--no-api", "--app-arg", f"{hook}={fault_height}", wait=False)
    code = runner.wait_exit(timeout=90)
    assert code != 0
    assert "app exited with code 3" in runner.output, runner.output
    app_log = (runner.home / "logs" / "app.log").read_text()
    assert "HALT" in app_log and f"{fault_height}" in app_log
    # The app never committed the faulty height.
    from memledger.consensus.store.state import CanonicalStore

    store = CanonicalStore(str(runner.home / "data" / "state"), readonly=True)
    assert store.last_height == fault_height - 1
    store.close()
    # Restart without the fault: the handshake replays, the chain moves on.
    runner.start("--no-api")
    with runner.rpc() as rpc:
        rpc.wait_for_height(fault_height + 2, timeout=60)
        assert rpc.broadcast_tx_commit(agent.submit(2, "h-2", "after the fault")).code == 0
        h = rpc.latest_height()
        rpc.wait_for_height(h + 1)
        header_hash = rpc.block(h + 1)["block"]["header"]["app_hash"]
        results_hash = rpc.block_results(h)["app_hash"]
    runner.stop()
    assert header_hash
    del results_hash
    # Projection equals a rebuild from canonical state; the node's state is intact.
    rebuilt = tmp_path / "rebuilt.db"
    out = memledger("projection", "rebuild", "--home", str(runner.home), "--db-url",
                    f"sqlite:///{rebuilt}", "--json")
    assert json.loads(out.stdout)["records"] > 0
    from memledger.projection.writer import Projection

    live = Projection(f"sqlite:///{runner.home / 'data' / 'projection.db'}")
    again = Projection(f"sqlite:///{rebuilt}")
    assert live.dump() == again.dump()
    ids = [row[0] for row in live.dump()["memories"]]
    assert ids == ["h-1", "h-2"]
    live.close()
    again.close()
    time.sleep(0)
