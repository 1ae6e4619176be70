"""The v4 ballot-expiry rule activated mid-run on a real 4-validator net.

At v3 a scope member that never votes keeps a pinned ballot open, and while it is open
the member cannot be removed as a validator. The upgrade to v4 (made and voted with the
CLI) ends both: the member is removed while two of its ballots are open, and once
governance shortens `ballot_expiry`, both ballots expire, on every node alike.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memledger.daemon import cometbft
from memledger.protocol.codes import Code
from memledger.sdk.txbuilder import TxBuilder, validator_proposal
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import Testnet, TestnetNode
from tests.support.node import memledger

pytestmark = pytest.mark.cometbft
# Generous: each CLI call takes seconds on a loaded box, blocks come every ~0.4 s.
APP_STATE = {"app_version": 3, "params": {"gov_voting_period": 400, "gov_min_upgrade_delay": 60}}
EXPIRY = 10


@pytest.fixture(scope="module")
def enet(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[Testnet]:
    net = Testnet.create(tmp_path_factory.mktemp("expiry-net"), 4, chain_id="memledger-exp",
                         app_state=APP_STATE, voter=False)
    try:
        for node in net.nodes:
            node.start(voter=False, wait=False)
        for node in net.nodes:
            node.wait_ready(120)
        net.wait_height(2, timeout=120)  # CheckTx reads committed state: genesis must be in
        yield net
    finally:
        net.down(timeout=20)
        for node in net.nodes:
            node.kill()


def gov(node: TestnetNode, *args: str) -> dict[str, Any]:
    confirm = ["--yes"] if args[0] in ("propose", "vote") else []
    out = memledger("gov", *args, "--home", str(node.home), *confirm, "--json", timeout=300)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def passed(net: Testnet, proposer: TestnetNode, *proposal: str) -> dict[str, Any]:
    """Propose with the CLI, vote yes from three of four validators, wait for the outcome."""
    pid = gov(proposer, "propose", *proposal)["proposal_id"]
    for node in net.nodes[:3] if proposer is not net.nodes[3] else net.nodes[1:]:
        gov(node, "vote", pid, "yes")
    return gov(proposer, "watch", pid, "--timeout", "240")


def signer(node: TestnetNode, chain_id: str) -> TxBuilder:
    return TxBuilder(cometbft.validator_signing_key(node.node_home.cometbft), chain_id)


def memory(node: TestnetNode, memory_id: str) -> dict[str, Any]:
    with node.rpc(30) as rpc:
        return json.loads(rpc.abci_query("/key", b"mem/" + memory_id.encode()).value)  # type: ignore[no-any-return]


def validator_keys(node: TestnetNode, height: int) -> set[str]:
    with node.rpc(30) as rpc:
        result = rpc.validators(height)
    return {base64.b64decode(v["pub_key"]["value"]).hex() for v in result["validators"]}


def test_ballots_expire_and_a_pinned_member_is_removed_after_the_upgrade(enet: Testnet) -> None:
    n0, n1, n2, n3 = enet.nodes
    k0, k1 = signer(n0, enet.chain_id), signer(n1, enet.chain_id)
    member0, member1 = k0.public_key.hex(), k1.public_key.hex()
    watched = passed(enet, n3, "scope", "create", "ops", "--domain", "ops",
                     "--member", f"{member0}:1", "--member", f"{member1}:1")
    assert watched["status"] == "executed", watched
    # A pinned ballot n1 never votes on: 1 of 2 weight accepts, 3·1 > 2·2 fails, so it
    # stays open for as long as n1 stays silent.
    with n0.rpc(60) as rpc:
        assert rpc.broadcast_tx_commit(k0.submit(time.time_ns(), "old", "pinned at v3",
                                                 domain="ops")).code == 0
        assert rpc.broadcast_tx_commit(k0.vote(time.time_ns(), "old")).code == 0
        refused = rpc.broadcast_tx_commit(
            k0.propose(time.time_ns(), validator_proposal(k1.public_key, 0)))
    assert refused.code == Code.GOV_VALIDATOR_PINNED  # the v3 loophole
    assert memory(n0, "old")["status"] == "proposed"

    # the CLI's default height waits out the whole (long) voting period: name a nearer
    # one, past the minimum delay, with room for three CLI votes
    with n0.rpc(30) as rpc:
        height = rpc.latest_height() + 60 + 100
    upgrade = passed(enet, n0, "upgrade", "ballot-expiry", "--app-version", "4",
                     "--height", str(height))
    assert upgrade["watch_state"] == "activated", upgrade
    activation = int(upgrade["payload"]["activation_height"])
    enet.wait_height(activation + 2, timeout=120)
    assert memory(n0, "old")["expiry_from"] == activation  # the full window from activation

    # v4: removing n1 no longer waits for the ballots naming it; open a second one first.
    with n0.rpc(60) as rpc:
        assert rpc.broadcast_tx_commit(k0.submit(time.time_ns(), "new", "pinned at v4",
                                                 domain="ops")).code == 0
    removal = passed(enet, n0, "validator", "--pubkey", member1, "--power", "0")
    assert removal["status"] == "executed", removal
    removed_at = int(removal["executed_height"]) + 2
    enet.wait_height(removed_at + 1, nodes=[n0, n2, n3], timeout=120)
    assert member1 not in validator_keys(n0, removed_at)
    assert memory(n0, "old")["status"] == "proposed"
    assert memory(n0, "new")["status"] == "proposed"  # removed while both were open

    # Governance shortens the window (the three remaining validators vote); both expire.
    pid = gov(n0, "propose", "param", "ballot_expiry", str(EXPIRY))["proposal_id"]
    for node in (n0, n2, n3):
        gov(node, "vote", pid, "yes")
    executed = gov(n0, "watch", pid, "--timeout", "240")
    assert executed["status"] == "executed", executed

    def expired() -> bool:
        return all(memory(n0, m)["status"] == "deprecated" for m in ("old", "new"))

    wait_until(expired, 120, 1.0, what="both pinned ballots to expire")
    old, new = memory(n0, "old"), memory(n0, "new")
    assert old["expired_height"] >= activation + EXPIRY
    assert new["expired_height"] >= new["expiry_from"] + EXPIRY
    # Every node, the removed validator included, holds the same state and projections.
    with n0.rpc(30) as rpc:
        target = rpc.latest_height()
    enet.wait_height(target, timeout=120)
    report = enet.check()
    assert report.ok, report
