"""App-hash commitment: golden vectors, incremental == from-scratch, proofs.

The reference root below is written independently of memledger/protocol/commitment.py
(level-by-level
over a flat list, straight from docs/APP_HASH.md) so a shared bug cannot hide.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memledger.protocol.commitment import (
    NUM_BUCKETS,
    ZERO_HASH,
    MerkleTree,
    Proof,
    ProofFormatError,
    bucket_hash,
    bucket_of,
    entry_digest,
    make_proof,
    node_hash,
    root_of,
    value_hash,
    verify_proof,
)


def _h(*parts: bytes) -> bytes:
    return hashlib.sha256(b"".join(parts)).digest()


def _ref_root(state: dict[bytes, bytes]) -> bytes:
    """Independent from-scratch app hash, following docs/APP_HASH.md literally."""
    buckets: dict[int, list[bytes]] = {}
    for key in state:
        buckets.setdefault(int.from_bytes(_h(key)[:2], "big"), []).append(key)
    level = [bytes(32)] * 65536
    for b, keys in buckets.items():
        digests = [_h(b"\x00", len(k).to_bytes(4, "big"), k, _h(state[k])) for k in sorted(keys)]
        level[b] = _h(b"\x01", *digests)
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level), 2):
            left, right = level[i], level[i + 1]
            both_zero = left == bytes(32) and right == bytes(32)
            nxt.append(bytes(32) if both_zero else _h(b"\x02", left, right))
        level = nxt
    return level[0]


FEW = {b"alpha": b"1", b"beta": b"2", b"gamma": b"3", b"empty-value": b""}
COLLIDE = {b"c/127": b"x", b"c/202": b"y"}

GOLDEN = [
    ("empty", {}, "00" * 32),
    ("one", {b"key": b"value"}, "52dd387835750d180badc0ba0d86f6d4c5dffb2478ce1c5964ac5317d17712f2"),
    ("few", FEW, "2009ec2e858c24784281d728f4f3849b86986b220e8652d9372574258580227a"),
    (
        "few-minus-beta",
        {k: v for k, v in FEW.items() if k != b"beta"},
        "553d996180df1d254e1010f3d2d6a72c7de4756e219bdc1fa2f382cb14600380",
    ),
    ("collide", COLLIDE, "2d7c8c88a90208315e2e12d01447a96f34a0933a7c7afce26c072698ed494e06"),
    (
        "collide-minus-c127",
        {b"c/202": b"y"},
        "1e975416b2a80e09f428148cae83326aa1132ae7013134c606c924304937c6e4",
    ),
    (
        "few+collide",
        {**FEW, **COLLIDE},
        "ff5c85e17ff0610652fdd92a9c9c09e02fd7d57c7dcf33851c13d040b574e6c6",
    ),
]


class _Model:
    """Incrementally maintained tree (plan/apply) plus the plain dict it must match."""

    def __init__(self) -> None:
        self.tree = MerkleTree()
        self.state: dict[bytes, bytes] = {}

    def apply_batch(self, ops: Sequence[tuple[bytes, bytes | None]]) -> bytes:
        for key, value in ops:
            if value is None:
                self.state.pop(key, None)
            else:
                self.state[key] = value
        touched = {bucket_of(k) for k, _ in ops}
        leaves = {b: bucket_hash(self._bucket(b)) for b in touched}
        before = self.tree.root
        plan = self.tree.plan(leaves)
        assert self.tree.root == before, "plan() must not mutate the tree"
        self.tree.apply(plan)
        assert self.tree.root == self.tree.plan_root(plan)
        return self.tree.root

    def _bucket(self, b: int) -> list[tuple[bytes, bytes]]:
        return [(k, value_hash(v)) for k, v in self.state.items() if bucket_of(k) == b]

    def proof(self, key: bytes) -> Proof:
        b = bucket_of(key)
        return make_proof(b, self._bucket(b), self.tree.siblings(b))


# -- golden vectors -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "state", "expected"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_vectors(name: str, state: dict[bytes, bytes], expected: str) -> None:
    assert root_of(state.items()).hex() == expected
    assert _ref_root(state).hex() == expected
    model = _Model()
    assert model.apply_batch(list(state.items())).hex() == expected


def test_golden_intermediate_values() -> None:
    key, value = b"key", b"value"
    b = bucket_of(key)
    assert b == 0x2C70
    vh = value_hash(value)
    assert vh.hex() == "cd42404d52ad55ccfa9aca4adc828aa5800ad9d385a0671fbcbf724118320619"
    assert entry_digest(key, vh).hex() == (
        "f4b7682f5009a300c19d6dd25b11cb26d2efcb30fa0af29cc7c8efdaa1312bc7"
    )
    leaf = bucket_hash([(key, vh)])
    assert leaf.hex() == "438a933d5ac4841aea3c82db169452f673be7497612ef8535f62e474ecfeb196"
    tree = MerkleTree.from_leaves({b: leaf})
    assert tree.node(38456).hex() == (
        "d1cbe7140ea9ee7997135b0ffb4823ca6f6ae4218005de54e1c7e76b18a3be78"
    )
    assert tree.leaf(b) == leaf


def test_golden_bucket_assignments() -> None:
    assert {k: bucket_of(k) for k in FEW} == {
        b"alpha": 36563,
        b"beta": 62542,
        b"empty-value": 16145,
        b"gamma": 48797,
    }
    assert bucket_of(b"c/127") == bucket_of(b"c/202") == 31945


def test_delete_equals_never_inserted() -> None:
    model = _Model()
    model.apply_batch(list({**FEW, **COLLIDE}.items()))
    root = model.apply_batch([(b"beta", None), (b"c/127", None)])
    rest = {k: v for k, v in {**FEW, **COLLIDE}.items() if k not in (b"beta", b"c/127")}
    assert root == _ref_root(rest)
    assert model.apply_batch([(k, None) for k in rest]) == ZERO_HASH


def test_node_zero_rule() -> None:
    a = _h(b"a")
    assert node_hash(ZERO_HASH, ZERO_HASH) == ZERO_HASH
    assert node_hash(a, ZERO_HASH) == _h(b"\x02", a, ZERO_HASH)
    assert node_hash(ZERO_HASH, a) == _h(b"\x02", ZERO_HASH, a)
    assert node_hash(a, ZERO_HASH) != node_hash(ZERO_HASH, a)


def test_bucket_hash_sorts_and_rejects_duplicates() -> None:
    e1, e2 = (b"a", value_hash(b"1")), (b"b", value_hash(b"2"))
    assert bucket_hash([e2, e1]) == bucket_hash([e1, e2])
    assert bucket_hash([]) == ZERO_HASH
    with pytest.raises(ValueError):
        bucket_hash([e1, (b"a", value_hash(b"other"))])


def test_tree_consistency_check_detects_tampering() -> None:
    tree = MerkleTree.from_leaves({5: _h(b"x"), 60000: _h(b"y")})
    assert tree.is_consistent()
    nodes = [tree.node(i) if i else ZERO_HASH for i in range(2 * NUM_BUCKETS)]
    nodes[(NUM_BUCKETS + 5) >> 3] = _h(b"tampered")
    assert not MerkleTree(nodes).is_consistent()


# -- incremental vs from scratch ----------------------------------------------------

_KEYS = [b"alpha", b"beta", b"gamma", b"c/127", b"c/202", b"", b"\x00", b"\xff" * 40]
_key_st = st.one_of(st.sampled_from(_KEYS), st.binary(min_size=1, max_size=6))
_op_st = st.tuples(_key_st, st.one_of(st.none(), st.binary(max_size=8)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_op_st, max_size=12), min_size=1, max_size=4))
def test_incremental_root_equals_from_scratch(batches: list[list[tuple]]) -> None:
    model = _Model()
    for batch in batches:
        # Within a batch the last write to a key wins, as in a block overlay.
        effective = dict(batch)
        root = model.apply_batch(list(effective.items()))
        assert root == _ref_root(model.state)
        assert root == root_of(model.state.items())
    assert model.tree.is_consistent()


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(_key_st, st.binary(max_size=8), max_size=12).flatmap(
        lambda d: st.tuples(st.just(d), st.permutations(sorted(d.items())))
    ),
    st.integers(min_value=1, max_value=4),
)
def test_insert_order_and_batching_do_not_matter(
    case: tuple[dict[bytes, bytes], list[tuple[bytes, bytes]]], n_batches: int
) -> None:
    state, shuffled = case
    one_shot = _Model().apply_batch(sorted(state.items()))
    model = _Model()
    for i in range(n_batches):
        model.apply_batch(shuffled[i::n_batches])
    assert model.tree.root == one_shot == root_of(reversed(shuffled))


def test_large_random_sequence_matches_scratch() -> None:
    rng = random.Random(1234)
    model = _Model()
    for _ in range(6):
        ops: dict[bytes, bytes | None] = {}
        for _ in range(300):
            key = b"k%d" % rng.randrange(2000)
            ops[key] = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(20))
        model.apply_batch(list(ops.items()))
    assert model.tree.root == root_of(model.state.items())
    assert model.tree.is_consistent()


# -- proofs -------------------------------------------------------------------------


def _proof_state() -> _Model:
    model = _Model()
    model.apply_batch(list({**FEW, **COLLIDE}.items()))
    return model


def test_proof_golden_vectors() -> None:
    model = _proof_state()
    root = model.tree.root
    p = model.proof(b"c/127")
    raw = p.to_bytes()
    assert len(raw) == 600
    assert hashlib.sha256(raw).hexdigest() == (
        "d13745d711258ce7467f17fc48eca8b8d47216a2672f418e901a11d825c81362"
    )
    assert [i for i, s in enumerate(p.siblings) if s != ZERO_HASH] == [14, 15]
    assert verify_proof(root, b"c/127", b"x", p)
    absent = model.proof(b"c/999")
    assert absent.bucket == 11173 and absent.entries == ()
    assert hashlib.sha256(absent.to_bytes()).hexdigest() == (
        "feddaa262114f239988e4924d0c625f0e834bc53d57cfd89db3d9d794c175511"
    )
    assert verify_proof(root, b"c/999", None, absent)


def test_every_key_proves_and_roundtrips() -> None:
    model = _proof_state()
    root = model.tree.root
    for key, value in model.state.items():
        p = model.proof(key)
        assert verify_proof(root, key, value, p)
        assert not verify_proof(root, key, None, p), "present key must not prove absent"
        again = Proof.from_bytes(p.to_bytes())
        assert again == p and verify_proof(root, key, value, again)


def test_tampered_proofs_fail() -> None:
    model = _proof_state()
    root = model.tree.root
    key, value = b"c/127", b"x"
    good = model.proof(key)
    assert verify_proof(root, key, value, good)
    (k1, v1), (k2, v2) = good.entries
    sibs = list(good.siblings)
    flipped = bytes([sibs[15][0] ^ 1]) + sibs[15][1:]
    bad_proofs = [
        Proof(good.bucket, good.entries, (*sibs[:15], flipped)),
        Proof(good.bucket, ((k1, v2), (k2, v2)), good.siblings),  # wrong value hash
        Proof(good.bucket, ((k2, v2), (k1, v1)), good.siblings),  # unsorted
        Proof(good.bucket, ((k1, v1),), good.siblings),  # dropped neighbour
        Proof(good.bucket, ((k1, v1), (k1, v1), (k2, v2)), good.siblings),  # duplicate
        Proof(good.bucket ^ 1, good.entries, good.siblings),  # wrong bucket
        Proof(good.bucket, good.entries, tuple(sibs[:15])),  # short path
        Proof(good.bucket, good.entries, tuple(reversed(sibs))),  # path order
    ]
    for bad in bad_proofs:
        assert not verify_proof(root, key, value, bad), bad
    assert not verify_proof(root, key, b"y", good), "wrong value"
    assert not verify_proof(_h(b"other root"), key, value, good)
    # Absence claims cannot be forged by dropping the key from the entry list.
    assert not verify_proof(root, key, None, Proof(good.bucket, ((k2, v2),), good.siblings))


def test_absence_proof_for_key_in_occupied_bucket() -> None:
    model = _proof_state()
    target = next(
        b"c/%d" % i
        for i in range(1_000_000)
        if bucket_of(b"c/%d" % i) == 31945 and b"c/%d" % i not in COLLIDE
    )
    p = model.proof(target)
    assert len(p.entries) == 2
    assert verify_proof(model.tree.root, target, None, p)
    assert not verify_proof(model.tree.root, target, b"x", p)


def test_proof_decoding_rejects_malformed_bytes() -> None:
    raw = _proof_state().proof(b"alpha").to_bytes()
    for broken in (raw[:-1], raw + b"\x00", raw[:5], b""):
        with pytest.raises(ProofFormatError):
            Proof.from_bytes(broken)


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(_key_st, st.binary(max_size=8), min_size=1, max_size=10), _key_st)
def test_random_state_proofs(state: dict[bytes, bytes], probe: bytes) -> None:
    model = _Model()
    model.apply_batch(list(state.items()))
    root = model.tree.root
    p = model.proof(probe)
    if probe in state:
        assert verify_proof(root, probe, state[probe], p)
        assert not verify_proof(root, probe, state[probe] + b"!", p)
    else:
        assert verify_proof(root, probe, None, p)
        assert not verify_proof(root, probe, b"", p)
