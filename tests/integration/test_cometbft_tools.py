"""The node.cometbft/node.rpc tooling against the real binary and its built-in kvstore app."""

from __future__ import annotations

from pathlib import Path

import pytest
from nacl.signing import SigningKey

from memledger.daemon import cometbft
from memledger.daemon.cometbft import CometProcess
from memledger.sdk.rpc import RpcError
from memledger.sdk.waiting import wait_until
from tests.support.comet import init_node

pytestmark = pytest.mark.cometbft


def test_init_configure_start_tx_query(tmp_path: Path, cometbft_bin: Path) -> None:
    home = tmp_path / "home"
    spec = init_node(home, proxy_app="kvstore", chain_id="tools-test", moniker="solo")

    genesis = cometbft.load_genesis(home)
    assert genesis["chain_id"] == "tools-test"
    assert genesis["consensus_params"]["abci"]["vote_extensions_enable_height"] == "0"
    cfg = cometbft.config_path(home).read_text()
    assert 'indexer = "kv"' in cfg and "allow_duplicate_ip = true" in cfg

    pub = cometbft.validator_pubkey(home)
    key = cometbft.validator_signing_key(home)
    assert isinstance(key, SigningKey) and bytes(key.verify_key) == pub
    assert genesis["validators"][0]["address"] == cometbft.validator_address(pub)
    assert len(cometbft.node_id(home)) == 40

    proc = CometProcess(home, binary=cometbft_bin)
    assert proc.rpc_url == spec.rpc_url
    with proc:
        status = proc.wait_ready(timeout=30)
        assert status["node_info"]["network"] == "tools-test"
        assert proc.wait_for_height(3, timeout=30) >= 3
        with proc.client() as client:
            res = client.broadcast_tx_commit(b"k=v")
            assert res.ok, res
            assert res.height > 0
            query = client.abci_query("", b"k")
            assert query.code == 0
            assert query.value == b"v"
            # CometBFT's tx indexer writes after the block's events, which is also when
            # broadcast_tx_commit answers: the lookup may need a moment
            found = wait_until(lambda: client.tx(res.hash), 10, 0.1,
                               what="the tx indexer to index the tx", ignore=(RpcError,))
            assert int(found["height"]) == res.height
            results = client.block_results(res.height)
            assert len(results["txs_results"]) == 1
    assert not proc.running
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()
