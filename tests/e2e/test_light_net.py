"""The light client on a real 4-validator net: real headers and commits verify, tampered
ones do not, a governance validator-set change is crossed (skipping, sequential and
backwards), CometBFT's own light client (`cometbft light` proxy) agrees on every header,
and a verified SDK read works after the change."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from memledger.sdk import Client
from memledger.sdk.keys import Agent
from memledger.sdk.light import GenesisRoot, LightClient, PinnedRoot
from memledger.sdk.light.errors import CommitError
from memledger.sdk.light.header import FLAG_ABSENT, FLAG_COMMIT, CommitSig, LightBlock
from memledger.sdk.light.provider import RpcProvider
from memledger.testnet.net import Testnet, TestnetNode
from tests.support.node import memledger

pytestmark = pytest.mark.cometbft
CHAIN = "memledger-light"
STATE: dict[str, int] = {}


@pytest.fixture(scope="module")
def lnet(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[Testnet]:
    net = Testnet.create(tmp_path_factory.mktemp("light-net"), 4, chain_id=CHAIN,
                         app_state={"params": {"gov_voting_period": 60}})
    try:
        net.node(0).start(api=True, voter=True, wait=False)
        for node in net.nodes[1:]:
            node.start(voter=True, wait=False)
        for node in net.nodes:
            node.wait_ready(120)
        net.wait_height(3, timeout=120)
        yield net
    finally:
        net.down(timeout=20)
        for node in net.nodes:
            node.kill()


def root_of(net: Testnet) -> GenesisRoot:
    return GenesisRoot.from_file(net.node(0).node_home.cometbft / "config" / "genesis.json")


def latest(node: TestnetNode) -> int:
    with node.rpc(30) as rpc:
        return rpc.latest_height()


def gov(node: TestnetNode, *args: str) -> dict:  # type: ignore[type-arg]
    confirm = ["--yes"] if args[0] in ("propose", "vote") else []
    out = memledger("gov", *args, "--home", str(node.home), *confirm, "--json", timeout=300)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _without(lb: LightBlock, indexes: set[int]) -> LightBlock:
    sigs = tuple(CommitSig(FLAG_ABSENT, b"", 0, 0, b"") if i in indexes else s
                 for i, s in enumerate(lb.commit.signatures))
    return replace(lb, commit=replace(lb.commit, signatures=sigs))


def test_real_four_validator_commits_verify_and_tampering_fails(lnet: Testnet) -> None:
    provider = RpcProvider(lnet.node(1).rpc_url)
    lc = LightClient(provider, root_of(lnet), wait_s=10)
    target = latest(lnet.node(1)) - 1
    lb = lc.verify_to(target)
    assert len(lb.validators.validators) == 4
    assert lb.header.hash() == provider.light_block(target).header.hash()

    fresh = provider.light_block(target + 1)
    from memledger.sdk.light.verify import verify_step

    def step(candidate: LightBlock) -> None:
        verify_step(CHAIN, lb, candidate, time.time_ns(), lc.options)

    step(fresh)  # the untouched block passes
    # A real commit carries 3 or 4 of the 4 precommits (a late one may be missing).
    signed = [i for i, s in enumerate(fresh.commit.signatures) if s.flag == FLAG_COMMIT]
    assert len(signed) >= 3
    step(_without(fresh, set(signed[3:])))  # 30 of 40 is still more than 2/3
    with pytest.raises(CommitError) as err:
        step(_without(fresh, set(signed[2:])))  # 20 of 40 is not
    assert err.value.reason == "insufficient_power"
    sigs = list(fresh.commit.signatures)
    sigs[signed[1]] = replace(sigs[signed[1]], signature=bytes(64))
    with pytest.raises(CommitError) as err:
        step(replace(fresh, commit=replace(fresh.commit, signatures=tuple(sigs))))
    assert err.value.reason == "bad_signature"


def test_governance_validator_change_is_crossed(lnet: Testnet) -> None:
    n0, n1, n2, n3 = lnet.nodes
    provider = RpcProvider(n0.rpc_url)
    before = latest(n0)
    skipping = LightClient(provider, root_of(lnet), wait_s=10)
    skipping.verify_to(before)
    proposal = gov(n0, "propose", "validator", "--pubkey", n3.validator_pubkey.hex(),
                   "--power", "30")
    for node in (n0, n1, n2):
        gov(node, "vote", proposal["proposal_id"], "yes")
    watched = gov(n0, "watch", proposal["proposal_id"], "--timeout", "180")
    assert watched["status"] == "executed"
    executed = int(watched["executed_height"])
    lnet.wait_height(executed + 4, nodes=[n0], timeout=120)
    old, new = provider.light_block(executed + 1), provider.light_block(executed + 2)
    assert old.header.validators_hash != new.header.validators_hash
    assert new.validators.total_power == 60
    STATE.update(before=before, executed=executed)

    # Skipping from before the change to after it (the old set still vouches > 1/3).
    after = skipping.verify_to(executed + 3)
    assert after.validators.total_power == 60
    # Sequentially, height by height, across the change (the next-validators rule).
    sequential = LightClient(provider, root_of(lnet), wait_s=10)
    for h in range(executed - 1, executed + 4):
        sequential.verify_to(h)
    # Backwards: pinned after the change, down through hash links to before it.
    pinned = LightClient(provider, PinnedRoot(executed + 3, after.header.hash()), wait_s=10)
    assert pinned.verify_to(before).header.hash() == provider.light_block(before).header.hash()


def _free_port() -> int:
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port")


def test_cometbft_light_proxy_agrees(lnet: Testnet, cometbft_bin: Path,
                                     tmp_path: Path) -> None:
    if "executed" not in STATE:
        pytest.skip("needs the validator change of the previous test")
    n0, n1 = lnet.node(0), lnet.node(1)
    genesis_hash = RpcProvider(n0.rpc_url).light_block(1).header.hash().hex()
    port = _free_port()
    proxy = subprocess.Popen(
        [str(cometbft_bin), "light", CHAIN, "-p", n0.rpc_url, "-w", n1.rpc_url,
         "--height", "1", "--hash", genesis_hash, "--laddr", f"tcp://127.0.0.1:{port}",
         "--home-dir", str(tmp_path / "light"), "--log_level", "error"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/health", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "cometbft light proxy did not start"
                assert proxy.poll() is None, proxy.stdout.read() if proxy.stdout else ""
                time.sleep(0.5)
        executed = STATE["executed"]
        heights = [2, STATE["before"], executed + 1, executed + 2, executed + 3]
        ours = LightClient(RpcProvider(n1.rpc_url), root_of(lnet), wait_s=10)
        through_proxy = LightClient(RpcProvider(url, timeout=60), root_of(lnet), wait_s=10)
        for h in heights:
            verified = httpx.get(f"{url}/commit", params={"height": str(h)}, timeout=60).json()
            theirs = verified["result"]["signed_header"]["commit"]["block_id"]["hash"]
            assert ours.verify_to(h).header.hash().hex().upper() == theirs
            assert through_proxy.verify_to(h).header.hash().hex().upper() == theirs
    finally:
        proxy.terminate()
        proxy.wait(20)


def test_verified_sdk_read_after_the_change(lnet: Testnet) -> None:
    n0 = lnet.node(0)
    with Client(n0.api_url, key=Agent.generate(), trust=root_of(lnet)) as ml:
        receipt = ml.submit(None, f"read after a validator change {time.time_ns()}")
        assert receipt.memory_id
        memory = ml.get(receipt.memory_id, verify=True)
        assert memory.verified_height is not None
        assert memory.verified_height >= (receipt.height or 0)
