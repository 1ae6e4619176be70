"""App-hash commitment: a bucketed SHA-256 Merkle tree over the canonical key/value state.

Why this shape: CometBFT wants one 32-byte app hash per block, and 5,000 writes per block
must not cost a pass over the whole state. Keys are spread over 2^16 buckets by hash; each
bucket (~n/65536 entries) is hashed flat (layout 1) or under its own small Merkle tree
(layout 2, from app version 6), and a fixed-depth binary tree over the bucket hashes turns
a block's changes into O(changes * 16) node hashes.

The byte-exact specification, golden vectors and proof format live in docs/APP_HASH.md;
this module is the reference implementation. It is pure (no I/O) and deterministic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from memledger.protocol.bucket_tree import merkle_bucket_hash

__all__ = [
    "BUCKET_BITS",
    "LAYOUTS",
    "NUM_BUCKETS",
    "TREE_SIZE",
    "ZERO_HASH",
    "MerkleTree",
    "Proof",
    "ProofFormatError",
    "bucket_hash",
    "bucket_of",
    "bucket_prefix",
    "entry_digest",
    "make_proof",
    "node_hash",
    "root_of",
    "value_hash",
    "verify_proof",
]

BUCKET_BITS = 16
NUM_BUCKETS = 1 << BUCKET_BITS
#: Heap-numbered node slots: root is 1, bucket b's leaf is NUM_BUCKETS + b, slot 0 is unused.
TREE_SIZE = 2 * NUM_BUCKETS
ZERO_HASH = bytes(32)

_ENTRY_TAG = b"\x00"
_BUCKET_TAG = b"\x01"
_NODE_TAG = b"\x02"
_MAX_KEY_LEN = 0xFFFFFFFF

_sha256 = hashlib.sha256
#: Bucket-hash layouts: 1 hashes a bucket's entries flat, 2 under a Merkle tree.
LAYOUTS = (1, 2)


def bucket_of(key: bytes) -> int:
    """Bucket index: the first two bytes of SHA-256(key), big-endian (uniform spread)."""
    d = _sha256(key).digest()
    return (d[0] << 8) | d[1]


def bucket_prefix(bucket: int) -> bytes:
    """Two-byte big-endian bucket id, the prefix of hidx keys and of the proof encoding."""
    return bucket.to_bytes(2, "big")


def value_hash(value: bytes) -> bytes:
    """SHA-256 of a value; entries commit to the value only through this digest."""
    return _sha256(value).digest()


def entry_digest(key: bytes, vhash: bytes) -> bytes:
    """Leaf digest of one entry; the length prefix makes the key/value split unambiguous."""
    if len(key) > _MAX_KEY_LEN:
        raise ValueError("key longer than 2^32-1 bytes")
    return _sha256(_ENTRY_TAG + len(key).to_bytes(4, "big") + key + vhash).digest()


def bucket_hash(entries: Iterable[tuple[bytes, bytes]], layout: int = 1) -> bytes:
    """Hash of one bucket from (key, value_hash) pairs; zero for an empty bucket.

    Layout 1 hashes the entry digests flat; layout 2 puts them under a Merkle tree
    (bucket_tree.py). Entries are sorted here so callers cannot get the order wrong; keys
    must be unique (a duplicate raises, since it can only come from a bug upstream).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown hash layout {layout}")
    ordered = sorted(entries)
    if not ordered:
        return ZERO_HASH
    sha, tag = _sha256, _ENTRY_TAG
    digests = []
    prev: bytes | None = None
    for key, vh in ordered:
        if key == prev:
            raise ValueError("duplicate key in bucket")
        if len(key) > _MAX_KEY_LEN:
            raise ValueError("key longer than 2^32-1 bytes")
        prev = key
        # Inlined entry_digest(): this loop is the hot path of every block.
        digests.append(sha(tag + len(key).to_bytes(4, "big") + key + vh).digest())
    if layout == 2:
        return merkle_bucket_hash(digests)
    return _sha256(_BUCKET_TAG + b"".join(digests)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Inner node; an all-zero pair stays all-zero so empty subtrees cost nothing."""
    if left == ZERO_HASH and right == ZERO_HASH:
        return ZERO_HASH
    return _sha256(_NODE_TAG + left + right).digest()


class MerkleTree:
    """The full fixed-depth tree (131071 nodes) kept in memory as a heap-ordered list.

    Updates are two-phase so a block's root can be computed without touching the committed
    tree: `plan()` returns the changed nodes (copy-on-write of the touched paths) and
    `apply()` installs them once the block is durably committed.
    """

    __slots__ = ("_nodes",)

    def __init__(self, nodes: list[bytes] | None = None) -> None:
        if nodes is None:
            nodes = [ZERO_HASH] * TREE_SIZE
        if len(nodes) != TREE_SIZE:
            raise ValueError(f"tree needs {TREE_SIZE} slots, got {len(nodes)}")
        self._nodes = nodes

    @classmethod
    def from_leaves(cls, leaves: Mapping[int, bytes]) -> MerkleTree:
        """Build every node from bucket hashes (bucket index -> hash; absent = zero)."""
        nodes = [ZERO_HASH] * TREE_SIZE
        for bucket in sorted(leaves):
            if not 0 <= bucket < NUM_BUCKETS:
                raise ValueError(f"bucket out of range: {bucket}")
            nodes[NUM_BUCKETS + bucket] = _check_hash(leaves[bucket])
        _fill_inner(nodes)
        return cls(nodes)

    @property
    def root(self) -> bytes:
        return self._nodes[1]

    def node(self, index: int) -> bytes:
        """Node by heap index (1 = root, NUM_BUCKETS + b = leaf of bucket b)."""
        if not 1 <= index < TREE_SIZE:
            raise IndexError(index)
        return self._nodes[index]

    def leaf(self, bucket: int) -> bytes:
        return self.node(NUM_BUCKETS + bucket)

    def plan(self, leaf_updates: Mapping[int, bytes]) -> dict[int, bytes]:
        """Nodes that change if the given buckets get new hashes; the tree is not mutated.

        Returns heap index -> new hash for every recomputed node (leaves, their ancestors and
        the root, index 1). Costs O(len(leaf_updates) * 16) hashes.
        """
        nodes = self._nodes
        changed: dict[int, bytes] = {}
        level: list[int] = []
        for bucket in sorted(leaf_updates):
            if not 0 <= bucket < NUM_BUCKETS:
                raise ValueError(f"bucket out of range: {bucket}")
            idx = NUM_BUCKETS + bucket
            changed[idx] = _check_hash(leaf_updates[bucket])
            level.append(idx)
        get = changed.get
        sha, tag, zero = _sha256, _NODE_TAG, ZERO_HASH
        while level and level[0] > 1:
            parents = sorted({i >> 1 for i in level})
            for p in parents:
                # Inlined node_hash(); 32-byte hashes are truthy, so `or` falls back only
                # when the child was not recomputed in this plan.
                left = get(2 * p) or nodes[2 * p]
                right = get(2 * p + 1) or nodes[2 * p + 1]
                if left == zero and right == zero:
                    changed[p] = zero
                else:
                    changed[p] = sha(tag + left + right).digest()
            level = parents
        return changed

    def plan_root(self, changed: Mapping[int, bytes]) -> bytes:
        """Root after a plan (the plan's root entry, or the current root for an empty plan)."""
        return changed.get(1, self._nodes[1])

    def apply(self, changed: Mapping[int, bytes]) -> None:
        """Install nodes produced by `plan()` against this same tree state."""
        nodes = self._nodes
        for idx in sorted(changed):
            nodes[idx] = changed[idx]

    def siblings(self, bucket: int) -> tuple[bytes, ...]:
        """Authentication path for a bucket leaf, leaf level first, root's child last."""
        if not 0 <= bucket < NUM_BUCKETS:
            raise ValueError(f"bucket out of range: {bucket}")
        nodes = self._nodes
        out = []
        i = NUM_BUCKETS + bucket
        while i > 1:
            out.append(nodes[i ^ 1])
            i >>= 1
        return tuple(out)

    def nonzero_nodes(self) -> list[tuple[int, bytes]]:
        """(heap index, hash) of every non-zero node, ascending index (persistence form)."""
        nodes = self._nodes
        return [(i, nodes[i]) for i in range(1, TREE_SIZE) if nodes[i] != ZERO_HASH]

    def is_consistent(self) -> bool:
        """True if every inner node equals the hash of its children (detects torn storage)."""
        expect = list(self._nodes)
        _fill_inner(expect)
        return expect == self._nodes

    def copy(self) -> MerkleTree:
        return MerkleTree(list(self._nodes))


def _check_hash(h: bytes) -> bytes:
    if type(h) is not bytes or len(h) != 32:
        raise ValueError("node hashes must be 32-byte bytes")
    return h


def _fill_inner(nodes: list[bytes]) -> None:
    for i in range(NUM_BUCKETS - 1, 0, -1):
        nodes[i] = node_hash(nodes[2 * i], nodes[2 * i + 1])


def root_of(items: Iterable[tuple[bytes, bytes]], layout: int = 1) -> bytes:
    """From-scratch root of a whole state given as (key, value) pairs with unique keys."""
    buckets: dict[int, list[tuple[bytes, bytes]]] = {}
    for key, value in items:
        buckets.setdefault(bucket_of(key), []).append((key, value_hash(value)))
    leaves = {b: bucket_hash(buckets[b], layout) for b in sorted(buckets)}
    return MerkleTree.from_leaves(leaves).root


class ProofFormatError(ValueError):
    """A proof's bytes do not parse; a malformed proof never verifies."""


@dataclass(frozen=True, slots=True)
class Proof:
    """Inclusion/exclusion proof for one key: its bucket's full entry list plus the path.

    `entries` are (key, value_hash) for every key in the bucket, sorted by key; `siblings`
    are the 16 sibling hashes from the leaf level up to the root's child; `layout` is the
    hash layout of the state it was read from (not part of the bytes: the proof op's type
    names it).
    """

    bucket: int
    entries: tuple[tuple[bytes, bytes], ...]
    siblings: tuple[bytes, ...]
    layout: int = 1

    def to_bytes(self) -> bytes:
        """Canonical encoding (see docs/APP_HASH.md, "Proof encoding")."""
        parts = [bucket_prefix(self.bucket), len(self.entries).to_bytes(4, "big")]
        for key, vh in self.entries:
            parts += [len(key).to_bytes(4, "big"), key, vh]
        parts.extend(self.siblings)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes, layout: int = 1) -> Proof:
        """Parse `to_bytes()` output; raises ProofFormatError on any trailing or short data."""
        mv = memoryview(data)
        try:
            if len(mv) < 6:
                raise ProofFormatError("short header")
            bucket = int.from_bytes(mv[0:2], "big")
            count = int.from_bytes(mv[2:6], "big")
            pos = 6
            entries = []
            for _ in range(count):
                klen = int.from_bytes(mv[pos : pos + 4], "big")
                end = pos + 4 + klen + 32
                if end > len(mv):
                    raise ProofFormatError("truncated entry")
                key = bytes(mv[pos + 4 : pos + 4 + klen])
                entries.append((key, bytes(mv[pos + 4 + klen : end])))
                pos = end
            if len(mv) - pos != 32 * BUCKET_BITS:
                raise ProofFormatError("bad sibling path length")
            sibs = tuple(bytes(mv[pos + 32 * i : pos + 32 * i + 32]) for i in range(BUCKET_BITS))
        finally:
            mv.release()
        return cls(bucket, tuple(entries), sibs, layout)


def verify_proof(root: bytes, key: bytes, value: bytes | None, proof: Proof) -> bool:
    """Check that `key` maps to `value` (or is absent when value is None) under `root`.

    Beyond recomputing the root this checks the proof is well-formed: right bucket for the
    key, every entry in that bucket, keys strictly ascending, a 16-long path of 32-byte
    hashes. Returns False rather than raising on any mismatch.
    """
    if (proof.bucket != bucket_of(key) or len(proof.siblings) != BUCKET_BITS
            or proof.layout not in LAYOUTS):
        return False
    found: bytes | None = None
    prev: bytes | None = None
    for ek, evh in proof.entries:
        if prev is not None and ek <= prev:
            return False
        if len(evh) != 32 or bucket_of(ek) != proof.bucket:
            return False
        if ek == key:
            found = evh
        prev = ek
    if value is None:
        if found is not None:
            return False
    elif found is None or found != value_hash(value):
        return False
    h = bucket_hash(proof.entries, proof.layout)
    i = NUM_BUCKETS + proof.bucket
    for sib in proof.siblings:
        if len(sib) != 32:
            return False
        h = node_hash(sib, h) if i & 1 else node_hash(h, sib)
        i >>= 1
    return h == root


def make_proof(
    bucket: int, entries: Sequence[tuple[bytes, bytes]], siblings: Sequence[bytes],
    layout: int = 1,
) -> Proof:
    """Assemble a proof from storage reads (entries are sorted here)."""
    return Proof(bucket, tuple(sorted(entries)), tuple(siblings), layout)
