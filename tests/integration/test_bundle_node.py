"""Verifiable export and import on real nodes (cometbft, app, REST).

An export verifies offline against a pinned header and against the genesis; every
single flipped byte makes verification fail, naming the memory when the byte is in a
memory's line; truncated, reordered and other-chain bundles are refused naming the first
bad line; 10k memories (filled by pre-signed batched broadcasts) export and verify; an
import into a fresh chain re-submits the memories with their origin as provenance.
Voters are off and embedders none: memories stay `proposed`, which proves as well as
`committed`, and 10k votes would only slow the fill.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memledger.devtools.fill import fill
from memledger.protocol.pb import tx_pb2
from memledger.sdk import Client
from memledger.sdk.bundle import BundleError, read_bundle, verify_bundle
from memledger.sdk.keys import Agent
from memledger.sdk.light import GenesisRoot, PinnedRoot
from tests.support.node import NodeRunner, memledger, wait_api_ready

pytestmark = pytest.mark.cometbft

MEMORIES = [("b-port", "infra", "The staging database listens on port 5433", ["db"]),
            ("b-cache", "infra", "The build cache lives in the .cache directory", ["build"]),
            ("b-lunch", "office", "Catering arrives at noon every Friday", [])]


def _node(root: Path, chain_id: str) -> NodeRunner:
    runner = NodeRunner(root / "home", chain_id=chain_id)
    config = runner.config
    config["embedder"] = "none"
    (runner.home / "config.json").write_text(json.dumps(config))
    runner.start()
    wait_api_ready(runner.api_url)
    return runner


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[NodeRunner]:
    runner = _node(tmp_path_factory.mktemp("bundle-a"), "memledger-bundle-a")
    try:
        with Client(runner.api_url, key=Agent.generate("bundle-author")) as ml:
            for mid, domain, content, tags in MEMORIES:
                ml.submit(mid, content, domain=domain, tags=tags)
        yield runner
    finally:
        runner.stop()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[NodeRunner]:
    runner = _node(tmp_path_factory.mktemp("bundle-b"), "memledger-bundle-b")
    try:
        yield runner
    finally:
        runner.stop()


def _genesis(node: NodeRunner) -> GenesisRoot:
    return GenesisRoot.from_file(node.home / "cometbft" / "config" / "genesis.json")


def _pin(node: NodeRunner, bundle: Path) -> PinnedRoot:
    """The header the bundle names, as the node's cometbft reports its block id: what a
    reader would obtain from a source they trust."""
    height = json.loads(bundle.read_bytes().split(b"\n", 1)[0])["height"] + 1
    with node.rpc() as rpc:
        commit = rpc.call("commit", {"height": str(height)})
    return PinnedRoot(height, bytes.fromhex(commit["signed_header"]["commit"]["block_id"]["hash"]))


def _refusal(data: bytes, trust: GenesisRoot | PinnedRoot) -> BundleError:
    import io

    with pytest.raises(BundleError) as caught:
        for _ in read_bundle(io.BytesIO(data), trust):
            pass
    return caught.value


def test_export_verifies_offline_and_every_flipped_byte_is_caught(
        source: NodeRunner, tmp_path: Path) -> None:
    bundle = tmp_path / "infra.jsonl"
    with Client(source.api_url) as ml:
        assert ml.export(bundle, domain="infra") == 2
    pin, genesis = _pin(source, bundle), _genesis(source)
    for trust in (pin, genesis):
        summary = verify_bundle(bundle, trust)
        assert (summary.chain_id, summary.count) == ("memledger-bundle-a", 2)
    memories = list(read_bundle(bundle.open("rb"), pin))
    assert [m.memory_id for m in memories] == ["b-cache", "b-port"]
    assert memories[1].content == MEMORIES[0][2] and memories[1].record["tags"] == ["db"]
    data = bundle.read_bytes()
    lines = data.split(b"\n")
    owner = []  # line number and memory id of every byte
    for number, line in enumerate(lines, start=1):
        mid = json.loads(line)["id"] if number in (2, 3) else None
        owner += [(number, mid)] * (len(line) + 1)
    for i in range(len(data)):
        flipped = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
        err = _refusal(flipped, pin)
        number, mid = owner[i]
        if mid is not None:
            assert err.memory_id == mid, (i, str(err))
        else:
            assert err.line in (number, number + 1), (i, str(err))


def test_truncated_reordered_and_foreign_bundles_name_the_first_bad_line(
        source: NodeRunner, target: NodeRunner, tmp_path: Path) -> None:
    bundle = tmp_path / "all.jsonl"
    with Client(source.api_url) as ml:
        assert ml.export(bundle) == 3
    pin = _pin(source, bundle)
    lines = bundle.read_bytes().split(b"\n")[:-1]
    assert len(lines) == 5
    cut = b"\n".join(lines[:4]) + b"\n"
    assert "without its end line" in str(_refusal(cut, pin)) and _refusal(cut, pin).line == 5
    half = b"\n".join(lines[:2]) + b"\n" + lines[2][:40]
    assert _refusal(half, pin).line == 3
    swapped = b"\n".join([lines[0], lines[2], lines[1], *lines[3:]]) + b"\n"
    err = _refusal(swapped, pin)
    assert err.line == 2 and "out of order" in str(err)
    dropped = b"\n".join([lines[0], lines[1], lines[3], lines[4]]) + b"\n"
    assert _refusal(dropped, pin).line == 3
    other = tmp_path / "other.jsonl"
    with Client(target.api_url) as ml:
        ml.export(other)
    err = _refusal(other.read_bytes(), _genesis(source))
    assert err.line == 1 and "memledger-bundle-b" in str(err)
    err = _refusal(other.read_bytes(), pin)
    assert err.line == 1


def test_import_into_a_fresh_chain_keeps_provenance(
        source: NodeRunner, target: NodeRunner, tmp_path: Path) -> None:
    bundle = tmp_path / "infra.jsonl"
    with Client(source.api_url) as ml:
        ml.export(bundle, domain="infra")
        author = ml.get_memory("b-port").author
    height = json.loads(bundle.read_bytes().split(b"\n", 1)[0])["height"]
    importer = Agent.generate("bundle-importer")
    with Client(target.api_url, key=importer) as ml:
        result = ml.import_bundle(bundle, _pin(source, bundle))
        assert len(result.submitted) == 2 and result.skipped == []
        copy = ml.get_memory("b-port")
        assert copy.content == MEMORIES[0][2] and copy.author == importer.public_key_hex
        assert copy.domain == "infra" and copy.tags == ["db"]
        assert copy.origin == {"chain_id": "memledger-bundle-a", "height": height,
                               "memory_id": "b-port", "author": author}
    with target.rpc() as rpc:
        raw = base64.b64decode(rpc.tx(copy.tx)["tx"])
    body = tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(raw).body)
    origin = body.memory_submit.origin
    assert (origin.chain_id, origin.height, origin.memory_id, origin.author) == (
        "memledger-bundle-a", height, "b-port", author)
    # another key importing again: the ids are taken, so nothing is sent twice
    with Client(target.api_url, key=Agent.generate("bundle-importer-2")) as ml:
        again = ml.import_bundle(bundle, _pin(source, bundle))
    assert again.submitted == [] and again.skipped == ["b-cache", "b-port"]


def test_ten_thousand_memories_export_and_verify(source: NodeRunner, tmp_path: Path) -> None:
    with source.rpc() as rpc:
        chain_id = rpc.status()["node_info"]["network"]
    fill([source.rpc_url], chain_id, 10_000, agents=8, label="tenk")
    bundle = tmp_path / "tenk.jsonl"
    with Client(source.api_url) as ml:
        count = ml.export(bundle, domain="general")
    assert count >= 10_000
    assert verify_bundle(bundle, _pin(source, bundle)).count == count


def test_cli_export_verify_and_import(source: NodeRunner, target: NodeRunner,
                                      tmp_path: Path) -> None:
    bundle = tmp_path / "office.jsonl"
    out = memledger("export", str(bundle), "--domain", "office", "--api", source.api_url)
    assert out.stdout.strip() == f"exported 1 memories to {bundle}"
    pin = _pin(source, bundle)
    trust = f"{pin.height}:{pin.hash.hex()}"
    ok = memledger("verify-bundle", str(bundle), "--trust", trust, "--json")
    assert json.loads(ok.stdout)["count"] == 1
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0x01  # inside the memory's line
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(bytes(data))
    refused = memledger("verify-bundle", str(bad), "--trust", trust, check=False)
    assert refused.returncode == 3
    assert refused.stderr.startswith("memledger: error: bundle does not verify: line 2 "
                                     "(memory b-lunch)"), refused.stderr
    usage = memledger("verify-bundle", str(bundle), check=False)
    assert usage.returncode == 2 and "--trust HEIGHT:HASH" in usage.stderr
    key = tmp_path / "importer.json"
    memledger("keys", "new", str(key))
    done = memledger("import", str(bundle), "--trust", trust, "--key", str(key),
                     "--api", target.api_url)
    assert done.stdout.strip() == f"submitted 1 memories from {bundle}"
    with Client(target.api_url) as ml:
        assert ml.get_memory("b-lunch").content == MEMORIES[2][2]
