"""Bundle verification on a synthetic chain: real Ed25519 commits, a real state
commitment (layout 2) and its proof ops; what a real node makes is checked in
tests/integration/test_bundle_node.py."""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from memledger.protocol.commitment import (
    MerkleTree,
    bucket_hash,
    bucket_of,
    make_proof,
    root_of,
    value_hash,
)
from memledger.protocol.proofs import encode_ops, record_key
from memledger.sdk.bundle import BundleError, read_bundle
from memledger.sdk.bundle.format import (
    end_line,
    header_line,
    light_block_doc,
    memory_line,
)
from memledger.sdk.bundle.verify import bundle_count, bundle_params
from memledger.sdk.light import GenesisRoot, PinnedRoot
from memledger.sdk.light.header import LightBlock, parse_light_block
from tests.unit.sdk.test_light import CHAIN, GENESIS_NS, Chain, keys

MEMORIES = {"m-1": ("infra", "The staging database listens on port 5433"),
            "m-2": ("infra", "Deploys happen on Tuesdays"),
            "m-3": ("ops", "Maria is on call")}


def _state() -> dict[bytes, bytes]:
    state = {}
    for mid, (domain, content) in MEMORIES.items():
        record = {"id": mid, "domain": domain, "author": "ab" * 32, "type": "fact",
                  "content_hash": hashlib.sha256(content.encode()).hexdigest(),
                  "confidence_ppm": 900_000, "tags": [], "status": "committed"}
        state[record_key("/memory", mid.encode())] = json.dumps(record).encode()
        state[record_key("/content", mid.encode())] = content.encode()
    state[b"acct/other"] = b"unrelated"
    return state


def _ops(state: dict[bytes, bytes], key: bytes) -> list:  # type: ignore[type-arg]
    buckets: dict[int, list[tuple[bytes, bytes]]] = {}
    for k, v in state.items():
        buckets.setdefault(bucket_of(k), []).append((k, value_hash(v)))
    tree = MerkleTree.from_leaves({b: bucket_hash(e, 2) for b, e in buckets.items()})
    bucket = bucket_of(key)
    return encode_ops(key, make_proof(bucket, buckets[bucket], tree.siblings(bucket), 2))


def _light_block(app_hash: bytes, chain_id: str = CHAIN) -> tuple[Chain, LightBlock]:
    chain = Chain({1: keys("bundle", 4)}, 3, chain_id=chain_id)
    lb = chain.blocks[3]
    header = replace(lb.header, app_hash=app_hash)
    commit = chain.sign(header, replace(lb.commit.block_id, hash=header.hash()), lb.validators,
                        chain_id)
    return chain, LightBlock(header, commit, lb.validators)


def _bundle(chain_id: str = CHAIN) -> tuple[bytes, LightBlock]:
    state = _state()
    _, lb = _light_block(root_of(state.items(), 2), chain_id)
    lines = [header_line(chain_id, 2, lb)]
    for n, mid in enumerate(sorted(MEMORIES)):
        mk, ck = record_key("/memory", mid.encode()), record_key("/content", mid.encode())
        lines.append(memory_line(n, mid, state[mk], state[ck], _ops(state, mk), _ops(state, ck)))
    lines.append(end_line(len(MEMORIES)))
    return b"".join(line + b"\n" for line in lines), lb


def _read(data: bytes, trust: GenesisRoot | PinnedRoot) -> list[str]:
    return [m.memory_id for m in read_bundle(io.BytesIO(data), trust)]


def _refused(data: bytes, trust: GenesisRoot | PinnedRoot) -> BundleError:
    with pytest.raises(BundleError) as caught:
        _read(data, trust)
    return caught.value


def _genesis(lb: LightBlock, chain_id: str = CHAIN) -> GenesisRoot:
    return GenesisRoot(chain_id, lb.validators, 1, genesis_time_ns=GENESIS_NS)


def test_light_block_survives_its_canonical_form() -> None:
    _, lb = _light_block(b"\x01" * 32)
    doc = json.loads(json.dumps(light_block_doc(lb)))
    again = parse_light_block(doc["signed_header"], doc["validators"])
    assert again == lb and again.header.hash() == lb.header.hash()


def test_a_bundle_verifies_against_its_header_or_the_genesis_set() -> None:
    data, lb = _bundle()
    for trust in (PinnedRoot(3, lb.header.hash()), _genesis(lb)):
        assert _read(data, trust) == ["m-1", "m-2", "m-3"]


def test_every_flipped_byte_is_refused_naming_its_memory() -> None:
    data, lb = _bundle()
    trust = PinnedRoot(3, lb.header.hash())
    owner: list[str | None] = []
    for line in data.split(b"\n")[:-1]:
        mid = json.loads(line).get("id")
        owner += [mid] * (len(line) + 1)
    for i in range(len(data)):
        err = _refused(data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1:], trust)
        if owner[i] is not None:
            assert err.memory_id == owner[i], (i, str(err))


def test_truncation_reordering_and_trailing_lines_name_the_line() -> None:
    data, lb = _bundle()
    trust = PinnedRoot(3, lb.header.hash())
    lines = data.split(b"\n")[:-1]
    assert _refused(b"\n".join(lines[:3]) + b"\n", trust).line == 4
    assert _refused(data[:-5], trust).line == 5
    err = _refused(b"\n".join([lines[0], lines[2], lines[1], *lines[3:]]) + b"\n", trust)
    assert (err.line, err.memory_id) == (2, "m-2") and "out of order" in str(err)
    assert _refused(data + lines[1] + b"\n", trust).line == 6
    assert _refused(b"", trust).line == 1


def test_a_bundle_of_another_chain_or_height_is_refused_on_line_one() -> None:
    data, lb = _bundle("other-chain")
    err = _refused(data, _genesis(lb))
    assert err.line == 1 and "other-chain" in str(err)
    assert "pin header 3" in str(_refused(data, PinnedRoot(2, lb.header.hash())))
    _, my_lb = _bundle()
    assert _refused(data, PinnedRoot(3, my_lb.header.hash())).line == 1


def test_bundle_count_and_params(tmp_path: Path) -> None:
    data, _ = _bundle()
    path = tmp_path / "b.jsonl"
    path.write_bytes(data)
    assert bundle_count(path) == 3
    path.write_bytes(data[:-30])
    assert bundle_count(path) == -1
    assert bundle_params("d", None, None, None, ["a", "b"]) == {"domain": "d", "tag": ["a", "b"]}
    with pytest.raises(TypeError):
        bundle_params(None, None, None, None, "ab")
