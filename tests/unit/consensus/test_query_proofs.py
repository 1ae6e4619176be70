"""ABCI Query with prove=true: every record path answers a proof that verifies against the
app hash, inclusion and exclusion alike, and any single-byte change to the proof, the
value or the key makes verification fail. Every test runs on state hashed under both
layouts (flat buckets, app versions 1-5; Merkle buckets, from 6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from memledger.consensus.query import QueryService
from memledger.consensus.store.state import CanonicalStore
from memledger.protocol import records
from memledger.protocol.codes import QUERY_CODESPACE, QueryCode
from memledger.protocol.commitment import bucket_of, verify_proof
from memledger.protocol.pb import abci_pb2 as pb
from memledger.protocol.proofs import (
    BUCKET_OP,
    BUCKET_OP_V2,
    ENTRY_OP,
    ENTRY_OP_V2,
    GAP_OP,
    GAP_OP_V2,
    TREE_OP,
    ProofOp,
    decode_ops,
    encode_ops,
    verify_ops,
)

AGENT = bytes(range(32))
#: query path -> (query data, state key) for a present record of each provable kind.
PRESENT = {
    "/memory": (b"m-1", records.memory_key("m-1")),
    "/content": (b"m-1", records.content_key("m-1")),
    "/account": (AGENT.hex().encode(), records.account_key(AGENT)),
    "/domain": (b"general", records.domain_key("general")),
    "/scope": (b"team", records.scope_key("team")),
    "/proposal": (b"p-1", records.proposal_key("p-1")),
    "/cocommit": (b"cc-1", records.cocommit_key("cc-1")),
    "/validators": (b"", records.VALIDATORS),
    "/key": (b"grant/general\x00ab", b"grant/general\x00ab"),
}
#: Two keys in one bucket (docs/APP_HASH.md's collide vector).
COLLIDE = (b"c/127", b"c/202")
ABSENT = {
    "/memory": b"m-missing",
    "/content": b"m-missing",
    "/account": bytes(32).hex().encode(),
    "/domain": b"nowhere",
    "/scope": b"no-scope",
    "/proposal": b"p-404",
    "/cocommit": b"cc-404",
    "/key": b"nothing/here",
}


#: layout -> (entry op, gap op, full-bucket op)
OPS = {1: (ENTRY_OP, GAP_OP, BUCKET_OP), 2: (ENTRY_OP_V2, GAP_OP_V2, BUCKET_OP_V2)}


def _same_bucket(target: int, prefix: str, count: int) -> list[bytes]:
    """`count` keys starting with `prefix` that land in bucket `target`."""
    out: list[bytes] = []
    i = 0
    while len(out) < count:
        key = f"{prefix}{i}".encode()
        if bucket_of(key) == target:
            out.append(key)
        i += 1
    return out


#: A bucket of seven entries, so layout-2 paths have several levels and a promoted node.
CROWD = _same_bucket(bucket_of(b"crowd"), "crowd/", 7)


def _value(key: bytes) -> bytes:
    if key.startswith(records.ACCOUNT):
        return b'{"nonce":5}'
    return json.dumps({"key": key.decode(errors="replace"), "n": len(key)},
                      sort_keys=True).encode()


@pytest.fixture(scope="module", params=[1, 2], ids=["layout1", "layout2"])
def service(tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[QueryService]:
    store = CanonicalStore(str(Path(tmp_path_factory.mktemp("qp")) / "state"),
                           map_size=1 << 26)
    overlay = store.begin_block()
    overlay.set_layout(request.param)
    for _, key in PRESENT.values():
        overlay.put(key, _value(key))
    for key in (*COLLIDE, *CROWD):
        overlay.put(key, _value(key))
    for i in range(2000):  # enough neighbours that buckets and paths are non-trivial
        overlay.put(f"mem/filler-{i}".encode(), str(i).encode())
    store.commit(overlay, 7, overlay.app_hash(), 1)
    yield QueryService(store)
    store.close()


def _layout(service: QueryService) -> int:
    with service.store.snapshot() as snap:
        return snap.prove(b"x").layout


def _ask(service: QueryService, path: str, data: bytes, prove: bool = True) -> pb.ResponseQuery:
    return service.query(pb.RequestQuery(path=path, data=data, prove=prove))


def _ops(resp: pb.ResponseQuery) -> list[ProofOp]:
    return [ProofOp(o.type, o.key, o.data) for o in resp.proof_ops.ops]


@pytest.mark.parametrize("path", sorted(PRESENT))
def test_inclusion_proof_for_every_record_path(service: QueryService, path: str) -> None:
    data, key = PRESENT[path]
    resp = _ask(service, path, data)
    assert resp.code == 0, resp.log
    assert resp.height == 7 and resp.key == key and resp.value == _value(key)
    entry_op, _, bucket_op = OPS[_layout(service)]
    assert [o.type for o in resp.proof_ops.ops] == [entry_op, TREE_OP]
    root = service.store.last_app_hash
    assert verify_ops(root, key, resp.value, _ops(resp))
    assert not verify_ops(root, key, None, _ops(resp))  # present, so absence must fail
    # The full-bucket form proves the same inclusion, and is never smaller.
    full = encode_ops(key, service.store.prove(key), compact=False)
    assert full[0].type == bucket_op and verify_ops(root, key, resp.value, full)
    assert not verify_ops(root, key, None, full)
    assert len(full[0].data) >= len(resp.proof_ops.ops[0].data)


@pytest.mark.parametrize("path", sorted(ABSENT))
def test_exclusion_proof_for_every_record_path(service: QueryService, path: str) -> None:
    resp = _ask(service, path, ABSENT[path])
    assert resp.code == QueryCode.NOT_FOUND and resp.codespace == QUERY_CODESPACE
    assert resp.value == b"" and resp.height == 7
    assert [o.type for o in resp.proof_ops.ops] == [OPS[_layout(service)][1], TREE_OP]
    root = service.store.last_app_hash
    assert verify_ops(root, resp.key, None, _ops(resp))
    assert not verify_ops(root, resp.key, b"anything", _ops(resp))
    full = encode_ops(resp.key, service.store.prove(resp.key), compact=False)
    proof = decode_ops(resp.key, full)
    assert verify_proof(root, resp.key, None, proof)
    assert not verify_proof(root, resp.key, b"anything", proof)
    assert verify_ops(root, resp.key, None, full)


def test_absence_ops_concatenate_to_the_documented_encoding(service: QueryService) -> None:
    key = records.memory_key("m-missing")
    proof = service.store.prove(key)
    ops = encode_ops(key, proof, compact=False)
    assert [o.type for o in ops] == [OPS[_layout(service)][2], TREE_OP]
    assert b"".join(o.data for o in ops) == proof.to_bytes()
    compact = _ask(service, "/memory", b"m-missing").proof_ops.ops
    assert sum(len(o.data) for o in compact) <= len(proof.to_bytes()) + 4


def test_unproven_queries_keep_working(service: QueryService) -> None:
    resp = _ask(service, "/account", AGENT.hex().encode(), prove=False)
    assert resp.code == 0 and not resp.proof_ops.ops  # synthesized nonce answer, no proof
    assert json.loads(resp.value) == {"nonce": 5}
    resp = _ask(service, "/key", PRESENT["/key"][1], prove=False)
    assert resp.code == 0 and resp.value == _value(PRESENT["/key"][1])
    assert not resp.proof_ops.ops
    resp = _ask(service, "/memory", b"m-1", prove=False)
    assert resp.code == 0 and resp.value == _value(records.memory_key("m-1"))


def test_bad_proven_queries_are_answered_not_raised(service: QueryService) -> None:
    assert _ask(service, "/nope", b"x").code == QueryCode.UNKNOWN_PATH
    assert _ask(service, "/account", b"zz").code == QueryCode.BAD_REQUEST
    assert _ask(service, "/key", b"").code == QueryCode.BAD_REQUEST
    resp = service.query(pb.RequestQuery(path="/memory", data=b"m-1", prove=True, height=3))
    assert resp.code == QueryCode.NO_SUCH_HEIGHT


def _verifies(root: bytes, key: bytes, value: bytes | None, ops: list[ProofOp]) -> bool:
    return verify_ops(root, key, value, ops)


def _flips(data: bytes) -> Iterator[bytes]:
    for i in range(len(data)):
        yield data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
        yield data[:i] + bytes([data[i] ^ 0x80]) + data[i + 1:]


def _gap_keys() -> list[bytes]:
    """Absent keys in the shared bucket: before, between and after its two entries."""
    target = bucket_of(COLLIDE[0])
    out = []
    for prefix in ("a/", "c/15", "z/"):  # sorts before c/127, between, after c/202
        i = 0
        while bucket_of(f"{prefix}{i}".encode()) != target:
            i += 1
        out.append(f"{prefix}{i}".encode())
    assert out[0] < COLLIDE[0] < out[1] < COLLIDE[1] < out[2]
    return out


@pytest.mark.parametrize("path", ["/memory", "/validators", "absent", "full-bucket",
                                  "shared-bucket", "full-bucket-absent", "gap-0", "gap-1",
                                  "gap-2", "crowd-0", "crowd-3", "crowd-6", "crowd-gap"])
def test_every_single_byte_mutation_fails(service: QueryService, path: str) -> None:
    gap_op = OPS[_layout(service)][1]
    if path.startswith("crowd-"):  # seven entries: multi-level paths, first/middle/last
        if path == "crowd-gap":
            key, value = _same_bucket(bucket_of(CROWD[0]), "crowd/x", 1)[0], None
        else:
            key = sorted(CROWD)[int(path[-1])]
            value = _value(key)
        resp = _ask(service, "/key", key)
        ops = _ops(resp)
        assert resp.code == (0 if value is not None else QueryCode.NOT_FOUND)
    elif path == "absent":
        resp = _ask(service, "/memory", b"m-missing")
        key, value = resp.key, None
        ops = _ops(resp)
    elif path.startswith("gap-"):  # absence between / around neighbours in one bucket
        key, value = _gap_keys()[int(path[-1])], None
        resp = _ask(service, "/key", key)
        ops = _ops(resp)
        assert resp.code == QueryCode.NOT_FOUND and ops[0].type == gap_op
        assert int.from_bytes(ops[0].data[2:6], "big") == 2
        assert int.from_bytes(ops[0].data[6:10], "big") == int(path[-1])
    elif path == "full-bucket-absent":
        key, value = records.memory_key("m-missing"), None
        ops = encode_ops(key, service.store.prove(key), compact=False)
    elif path == "shared-bucket":  # compact inclusion with a neighbour before it
        key = COLLIDE[1]
        resp = _ask(service, "/key", key)
        value = resp.value
        ops = _ops(resp)
        assert int.from_bytes(ops[0].data[6:10], "big") >= 2  # really shares its bucket
        assert int.from_bytes(ops[0].data[2:6], "big") == 1
    elif path == "full-bucket":  # inclusion in the full-bucket form
        data, key = PRESENT["/memory"]
        value = _ask(service, "/memory", data).value
        ops = encode_ops(key, service.store.prove(key), compact=False)
    else:
        data, key = PRESENT[path]
        resp = _ask(service, path, data)
        value = resp.value
        ops = _ops(resp)
    root = service.store.last_app_hash
    assert _verifies(root, key, value, ops)
    for i, op in enumerate(ops):
        for bad in _flips(op.data):
            changed = list(ops)
            changed[i] = ProofOp(op.type, op.key, bad)
            assert not _verifies(root, key, value, changed), (i, bad.hex())
        for bad in _flips(op.key):
            changed = list(ops)
            changed[i] = ProofOp(op.type, bad, op.data)
            assert not _verifies(root, key, value, changed)
        changed = list(ops)
        changed[i] = ProofOp(op.type + "x", op.key, op.data)
        assert not _verifies(root, key, value, changed)
    if value is not None:
        for bad in _flips(value):
            assert not _verifies(root, key, bad, ops)
        assert not _verifies(root, key, value + b" ", ops)
        assert not _verifies(root, key, value[:-1], ops)
    for bad in _flips(key):  # the ops re-labelled for the changed key
        relabelled = [ProofOp(ops[0].type, bad, ops[0].data), ops[1]]
        assert not _verifies(root, bad, value, relabelled)
        assert not _verifies(root, bad, value, ops)
    for bad in _flips(root):
        assert not _verifies(bad, key, value, ops)
    assert not _verifies(root, key, value, ops[:1])
    assert not _verifies(root, key, value, ops + ops[1:])


def test_a_gap_proof_cannot_claim_a_present_key_absent(service: QueryService) -> None:
    from memledger.protocol import proofs

    root = service.store.last_app_hash
    for key in (*COLLIDE, *CROWD):
        proof = service.store.prove(key)
        tree = encode_ops(key, proof)[1]
        without = replace(proof, entries=tuple(e for e in proof.entries if e[0] != key))
        if proof.layout == 1:
            forged = ProofOp(GAP_OP, key, proofs._gap_data(key, proof))
            assert not verify_ops(root, key, None, [forged, tree])
            # Nor with the entry itself dropped from the bucket.
            forged = ProofOp(GAP_OP, key, proofs._gap_data(key, without))
            assert not verify_ops(root, key, None, [forged, tree])
        else:  # the gap op built as if the entry were not there
            forged = proofs._merkle_op(key, without)
            assert forged.type == GAP_OP_V2
            assert not verify_ops(root, key, None, [forged, tree])


def test_proofs_of_one_layout_never_pass_as_the_other(service: QueryService) -> None:
    """The verifier accepts both layouts' ops without knowing the version: safe only if a
    proof built under the wrong layout never hashes to the root."""
    root = service.store.last_app_hash
    gaps = [_same_bucket(bucket_of(k), "gap/", 1)[0] for k in (COLLIDE[0], CROWD[0])]
    for key in (*COLLIDE, *CROWD, *gaps):
        proof = service.store.prove(key)
        other = replace(proof, layout=3 - proof.layout)
        value = service.store.get(key)
        assert verify_ops(root, key, value, encode_ops(key, proof))
        for compact in (True, False):
            assert not verify_ops(root, key, value, encode_ops(key, other, compact=compact))
    # An empty bucket is the zero hash under both layouts, so either proof of absence
    # states the same true fact.
    empty = records.memory_key("m-missing")
    proof = service.store.prove(empty)
    assert not proof.entries
    assert verify_ops(root, empty, None, encode_ops(empty, replace(proof, layout=1)))
    assert verify_ops(root, empty, None, encode_ops(empty, replace(proof, layout=2)))
