"""Governance on a real 4-validator net: an upgrade made with the CLI (to v6, which also
rehashes the state under Merkle buckets), an old binary halting at activation, and
validator add / remove by proposal."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memledger.daemon import cometbft
from memledger.protocol.proofs import ProofOp, verify_ops
from memledger.sdk.txbuilder import TxBuilder
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import Testnet, TestnetNode
from tests.support.chain import seeded_key
from tests.support.node import memledger

pytestmark = pytest.mark.cometbft
# The upgrade lands >= 25 blocks after its proposal: room for three CLI votes on a loaded box.
APP_STATE = {"params": {"gov_voting_period": 40, "gov_min_upgrade_delay": 20}}


@pytest.fixture(scope="module")
def gnet(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[Testnet]:
    net = Testnet.create(tmp_path_factory.mktemp("gov-net"), 4, chain_id="memledger-gov",
                         app_state=APP_STATE, voter=False)
    try:
        for node in net.nodes[:3]:
            node.start(voter=False, wait=False)
        # node3 runs a binary that only knows app version 1.
        net.node(3).start(voter=False, wait=False, app_args=["--max-app-version=1"])
        for node in net.nodes:
            node.wait_ready(120)
        yield net
    finally:
        net.down(timeout=20)
        for node in net.nodes:
            node.kill()


def gov(node: TestnetNode, *args: str) -> dict:  # type: ignore[type-arg]
    confirm = ["--yes"] if args[0] in ("propose", "vote", "cancel") else []
    out = memledger("gov", *args, "--home", str(node.home), *confirm, "--json", timeout=300)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _app_hash(node: TestnetNode, height: int) -> str:
    with node.rpc(30) as rpc:
        return str(rpc.block(height)["block"]["header"]["app_hash"])


def test_upgrade_by_cli_activates_everywhere_and_old_binary_halts(gnet: Testnet) -> None:
    n0, n1, n2, n3 = gnet.nodes
    agent, other = TxBuilder(seeded_key("g-a"), gnet.chain_id), \
        TxBuilder(seeded_key("g-b"), gnet.chain_id)
    with n0.rpc(60) as rpc:
        assert rpc.broadcast_tx_commit(agent.submit(1, "pre-1", "proposed before v2")).code == 0
        assert rpc.broadcast_tx_commit(other.corroborate(1, "pre-1")).code == 0  # v1 rule
    # Straight to v6: the v2 rule and, from the first block under v6, the Merkle-bucket
    # app hash, which every node must compute alike (a whole-state rehash in one block).
    proposal = gov(n0, "propose", "upgrade", "memledger-v6", "--app-version", "6")
    pid = proposal["proposal_id"]
    for node in (n0, n1, n2):  # 3 of 4 equal validators: 30 of 40 > 2/3
        gov(node, "vote", pid, "yes")
    watched = gov(n0, "watch", pid, "--timeout", "240")
    assert watched["watch_state"] == "activated"
    activation = int(watched["payload"]["activation_height"])
    # The old binary halts before executing the first block under the new rules.
    assert n3.wait_exit(120) not in (None, 0)
    app_log = (n3.home / "logs" / "app.log").read_text()
    assert "upgrade required: memledger-v6" in app_log
    # The other three move on under v6: same app version in Info and headers.
    gnet.wait_height(activation + 3, nodes=[n0, n1, n2], timeout=120)
    for node in (n0, n1, n2):
        with node.rpc(30) as rpc:
            assert int(rpc.abci_info()["response"]["app_version"]) == 6
            header = rpc.block(activation + 2)["block"]["header"]
            assert header["version"]["app"] == "6"
            before = rpc.block(activation)["block"]["header"]
            assert before["version"]["app"] == "1"
    hashes = {_app_hash(node, activation + 2) for node in (n0, n1, n2)}
    assert len(hashes) == 1
    # Proofs now come as Merkle-bucket paths, and verify against the next header.
    with n0.rpc(30) as rpc:
        answer = rpc.abci_query("/memory", b"pre-1", prove=True)
        ops = [ProofOp(o["type"], base64.b64decode(o["key"]), base64.b64decode(o["data"]))
               for o in answer.raw["proofOps"]["ops"]]
        rpc.wait_for_height(answer.height + 1, timeout=60)
        next_header = rpc.block(answer.height + 1)["block"]["header"]
    assert ops[0].type == "ml.entry.v2"
    assert verify_ops(bytes.fromhex(next_header["app_hash"]), answer.key, answer.value, ops)
    # The gated rule changed behaviour from the block after activation.
    with n0.rpc(60) as rpc:
        assert rpc.broadcast_tx_commit(agent.submit(2, "post-1", "proposed under v2")).code == 0
        assert rpc.broadcast_tx_sync(other.corroborate(2, "post-1")).code == 61
    # Restarted with a binary that supports v6, node3 catches up to the same app hash.
    n3.start(voter=False, wait=True, timeout=120)
    with n0.rpc(30) as rpc:
        target = rpc.latest_height()
    gnet.wait_height(target, nodes=[n3], timeout=180)
    assert _app_hash(n3, target) == _app_hash(n0, target)
    report = gnet.check(projections=False)
    assert report.ok, report


def _validator_keys(node: TestnetNode, height: int | None = None) -> set[str]:
    with node.rpc(30) as rpc:
        result = rpc.validators(height)
    return {base64.b64decode(v["pub_key"]["value"]).hex() for v in result["validators"]}


def test_validator_added_by_governance_joins_signs_and_counts(gnet: Testnet) -> None:
    n0, n1, n2, n3 = gnet.nodes[:4]
    pubkey = gnet.add_node()
    newcomer = gnet.nodes[-1]
    newcomer.start(voter=False, wait=True, timeout=120)
    # node3 halted in the upgrade test: 30 of 40 sign, and the newcomer (not in the set)
    # signs nothing yet, so the CLI must be told its node runs (10 more of 50 not signing)
    proposal = gov(n0, "propose", "validator", "--pubkey", pubkey.hex(), "--power", "10",
                   "--force")
    pid = proposal["proposal_id"]
    for node in (n0, n1, n2):
        gov(node, "vote", pid, "yes")
    watched = gov(n0, "watch", pid, "--timeout", "120")
    assert watched["status"] == "executed"
    executed = int(watched["executed_height"])
    gnet.wait_height(executed + 3, nodes=[n0], timeout=120)
    assert pubkey.hex() not in _validator_keys(n0, executed + 1)
    assert pubkey.hex() in _validator_keys(n0, executed + 2)
    # It signs blocks: its address appears in a later block's commit signatures.
    address = cometbft.validator_address(pubkey)
    def signed() -> bool:
        with n0.rpc(30) as rpc:
            sigs = rpc.block(rpc.latest_height())["block"]["last_commit"]["signatures"]
        return any(s.get("validator_address") == address and s.get("signature") for s in sigs)

    wait_until(signed, 60, 0.5, what="the new validator to sign a block")
    # Its votes count in memory quorums: 5 × 10 power, 4 accepts needed (3·40 > 2·50).
    agent = TxBuilder(seeded_key("g-c"), gnet.chain_id)
    with n0.rpc(60) as rpc:
        assert rpc.broadcast_tx_commit(agent.submit(1, "quorum-5", "needs the newcomer")).code \
            == 0
        for node in (n0, n1, n2):
            voter = TxBuilder(cometbft.validator_signing_key(node.node_home.cometbft),
                              gnet.chain_id)
            assert rpc.broadcast_tx_commit(voter.vote(time.time_ns(), "quorum-5")).code == 0
        newbie = TxBuilder(cometbft.validator_signing_key(newcomer.node_home.cometbft),
                           gnet.chain_id)
        result = rpc.broadcast_tx_commit(newbie.vote(time.time_ns(), "quorum-5"))
        assert result.code == 0
        record = json.loads(rpc.abci_query("/key", b"mem/quorum-5").value)
    assert record["status"] == "committed"
    # Removal takes effect at H+2.
    proposal = gov(n0, "propose", "validator", "--pubkey", pubkey.hex(), "--power", "0")
    pid = proposal["proposal_id"]
    for node in (n0, n1, n2, n3):
        gov(node, "vote", pid, "yes")
    watched = gov(n0, "watch", pid, "--timeout", "120")
    executed = int(watched["executed_height"])
    gnet.wait_height(executed + 3, nodes=[n0], timeout=120)
    assert pubkey.hex() in _validator_keys(n0, executed + 1)
    assert pubkey.hex() not in _validator_keys(n0, executed + 2)
