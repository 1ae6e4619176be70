"""Proofs in ABCI `ResponseQuery.proof_ops`: one op per layer of the app-hash tree.

Why two ops: a CometBFT-style client runs proof ops in order, each turning the value of
the layer below into the root of its own layer. Our commitment (docs/APP_HASH.md) has two
layers, so a proof is two ops:

- `ml.gap.v1` (absence): key = the record key, data = `u16be(bucket) || u32be(m) ||
  u32be(i) || left || right || (m - full) entry digests`. `i` is where the key would
  sort among the bucket's m entries; `left` (entry i-1, if i > 0) and `right` (entry i,
  if i < m) are given in full (`u32be(len k) || k || value hash`), every other entry as
  its digest, in bucket order. The bucket hash commits to its entries sorted by key
  (docs/APP_HASH.md), so two adjacent committed keys around the asked one prove there is
  nothing between them.
- `ml.bucket.v1` (the full form, either case): key = the record key, data =
  `u16be(bucket) || u32be(m) || entries` (every key with its value hash), exactly
  `Proof.to_bytes()` without the path. Served only when asked for (`compact=False`).
- `ml.entry.v1` (inclusion): key = the record key, data = `u16be(bucket) || u32be(i) ||
  u32be(m) || (m-1) entry digests`, the other entries of the bucket as 32-byte digests
  in bucket order, the proven entry going at position i. Turns (key, value) into the
  bucket hash at 32 bytes per neighbour instead of 36 + key length; still, a proof grows
  with its bucket (2.2 KB at the worst at 1M memories), which is why layout 2 exists.
  Sound because the bucket hash commits to the exact digest sequence, and an entry
  digest commits to its key and value hash.
- `ml.tree.v1`: key = `u16be(bucket)`, data = the 16 sibling hashes, leaf level first.
  Turns the bucket hash into the app hash.

State hashed under layout 2 (app version 6 on; docs/APP_HASH.md) gets the v2 ops, which
prove a position in the bucket's Merkle tree instead of listing the bucket:

- `ml.entry.v2`: data = `u16be(bucket) || u32be(i) || u32be(m) || path`, the audit path
  of entry i among m (bucket_tree.path_length(i, m) digests, bottom level first).
- `ml.gap.v2`: data = `u16be(bucket) || u32be(m) || u32be(i)`, then for entry i-1 (if
  i > 0) and entry i (if i < m): the entry in full and its audit path. Two adjacent
  positions around the asked key prove nothing lies between them.
- `ml.bucket.v2`: the full form, as `ml.bucket.v1` but hashed under layout 2.

Layout 2's tags differ from layout 1's, so a verifier accepts either kind of op against
any root without knowing the chain's version: no proof of one layout hashes to a leaf of
the other.

This module is pure (no I/O): the node encodes with it and the light client decodes with
it, so both sides agree on one byte layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from hashlib import sha256

from memledger.protocol import records
from memledger.protocol.bucket_tree import audit_path, from_top, path_length, top_from_path
from memledger.protocol.commitment import (
    BUCKET_BITS,
    NUM_BUCKETS,
    ZERO_HASH,
    Proof,
    ProofFormatError,
    bucket_of,
    bucket_prefix,
    entry_digest,
    node_hash,
    value_hash,
    verify_proof,
)

__all__ = [
    "BUCKET_OP",
    "BUCKET_OP_V2",
    "ENTRY_OP",
    "ENTRY_OP_V2",
    "GAP_OP",
    "GAP_OP_V2",
    "TREE_OP",
    "RECORD_PATHS",
    "ProofOp",
    "decode_ops",
    "encode_ops",
    "record_key",
    "verify_ops",
]

BUCKET_OP = "ml.bucket.v1"
ENTRY_OP = "ml.entry.v1"
GAP_OP = "ml.gap.v1"
BUCKET_OP_V2 = "ml.bucket.v2"
ENTRY_OP_V2 = "ml.entry.v2"
GAP_OP_V2 = "ml.gap.v2"
TREE_OP = "ml.tree.v1"
#: full-bucket op type -> the hash layout it proves under
_BUCKET_OPS = {BUCKET_OP: 1, BUCKET_OP_V2: 2}


@dataclass(frozen=True, slots=True)
class ProofOp:
    """One proof op as carried by CometBFT (`tendermint.crypto.ProofOp`)."""

    type: str
    key: bytes
    data: bytes


def encode_ops(key: bytes, proof: Proof, *, compact: bool = True) -> list[ProofOp]:
    """The two ops for `proof` of `key` (see the module docstring).

    A present key gets the compact entry op and an absent one the gap op (v1 or v2 by the
    proof's layout), unless `compact` is False (the full bucket).
    """
    raw = proof.to_bytes()
    split = len(raw) - 32 * BUCKET_BITS
    tree = ProofOp(TREE_OP, bucket_prefix(proof.bucket), raw[split:])
    if not compact:
        kind = BUCKET_OP_V2 if proof.layout == 2 else BUCKET_OP
        return [ProofOp(kind, key, raw[:split]), tree]
    if proof.layout == 2:
        return [_merkle_op(key, proof), tree]
    keys = [k for k, _ in proof.entries]
    if key in keys:
        i = keys.index(key)
        others = b"".join(entry_digest(k, vh) for j, (k, vh) in enumerate(proof.entries)
                          if j != i)
        data = (bucket_prefix(proof.bucket) + i.to_bytes(4, "big")
                + len(keys).to_bytes(4, "big") + others)
        return [ProofOp(ENTRY_OP, key, data), tree]
    return [ProofOp(GAP_OP, key, _gap_data(key, proof)), tree]


def _merkle_op(key: bytes, proof: Proof) -> ProofOp:
    """`ml.entry.v2` for a present key, `ml.gap.v2` for an absent one."""
    entries = proof.entries
    digests = [entry_digest(k, vh) for k, vh in entries]
    count = len(entries).to_bytes(4, "big")
    i = sum(1 for k, _ in entries if k < key)
    if i < len(entries) and entries[i][0] == key:
        head = bucket_prefix(proof.bucket) + i.to_bytes(4, "big") + count
        return ProofOp(ENTRY_OP_V2, key, head + b"".join(audit_path(digests, i)))
    parts = [bucket_prefix(proof.bucket), count, i.to_bytes(4, "big")]
    for j in (i - 1, i):
        if 0 <= j < len(entries):
            parts += [_full_entry(*entries[j]), *audit_path(digests, j)]
    return ProofOp(GAP_OP_V2, key, b"".join(parts))


def _full_entry(key: bytes, vh: bytes) -> bytes:
    return len(key).to_bytes(4, "big") + key + vh


def _gap_data(key: bytes, proof: Proof) -> bytes:
    entries = proof.entries
    i = sum(1 for k, _ in entries if k < key)
    full = {j for j in (i - 1, i) if 0 <= j < len(entries)}
    parts = [bucket_prefix(proof.bucket), len(entries).to_bytes(4, "big"), i.to_bytes(4, "big")]
    parts += [_full_entry(*entries[j]) for j in sorted(full)]
    parts += [entry_digest(*entries[j]) for j in range(len(entries)) if j not in full]
    return b"".join(parts)


def verify_ops(root: bytes, key: bytes, value: bytes | None, ops: Sequence[ProofOp]) -> bool:
    """Check ops proving `key` -> `value` (absent if None) against `root`; never raises."""
    try:
        if len(ops) == 2 and ops[0].type == ENTRY_OP:
            return value is not None and _verify_entry(root, key, value, ops[0], ops[1])
        if len(ops) == 2 and ops[0].type == GAP_OP:
            return value is None and _verify_gap(root, key, ops[0], ops[1])
        if len(ops) == 2 and ops[0].type == ENTRY_OP_V2:
            return value is not None and _verify_entry_v2(root, key, value, ops[0], ops[1])
        if len(ops) == 2 and ops[0].type == GAP_OP_V2:
            return value is None and _verify_gap_v2(root, key, ops[0], ops[1])
        return verify_proof(root, key, value, decode_ops(key, ops))
    except ProofFormatError:
        return False


def _climb(root: bytes, bucket: int, leaf: bytes, tree: ProofOp) -> bool:
    """Bucket hash -> root through the tree op's 16 siblings."""
    if tree.type != TREE_OP or tree.key != bucket_prefix(bucket) \
            or len(tree.data) != 32 * BUCKET_BITS:
        return False
    h = leaf
    i = NUM_BUCKETS + bucket
    for j in range(BUCKET_BITS):
        sib = tree.data[32 * j:32 * j + 32]
        h = node_hash(sib, h) if i & 1 else node_hash(h, sib)
        i >>= 1
    return h == root


def _gap_header(key: bytes, op: ProofOp) -> tuple[int, int, int] | None:
    """(bucket, m, i) of a gap op that names `key` and its bucket, else None."""
    data = op.data
    if op.key != key or len(data) < 10:
        return None
    bucket = int.from_bytes(data[0:2], "big")
    count = int.from_bytes(data[2:6], "big")
    index = int.from_bytes(data[6:10], "big")
    if bucket != bucket_of(key) or index > count:
        return None
    return bucket, count, index


def _neighbour(data: bytes, pos: int, key: bytes, bucket: int, left: bool
               ) -> tuple[bytes, int] | None:
    """The entry given in full at `pos`: its digest and where it ends, if it is in the
    bucket and on its side of `key` (`left`: before it), else None."""
    if pos + 4 > len(data):
        return None
    klen = int.from_bytes(data[pos:pos + 4], "big")
    end = pos + 4 + klen + 32
    if end > len(data):
        return None
    k, vh = data[pos + 4:pos + 4 + klen], data[pos + 4 + klen:end]
    if bucket_of(k) != bucket or not (k < key if left else key < k):
        return None
    return entry_digest(k, vh), end


@dataclass(frozen=True, slots=True)
class _Gap:
    """A parsed gap op: the bucket, m, i, the neighbours given in full (position, entry
    digest, audit path; no path under layout 1) and where their bytes end."""

    bucket: int
    count: int
    index: int
    neighbours: list[tuple[int, bytes, list[bytes]]]
    end: int


def _parse_gap(key: bytes, op: ProofOp, with_paths: bool) -> _Gap | None:
    """Entries i-1 and i (where they exist) around `key`, each followed by its audit path
    when `with_paths` (layout 2); None for anything malformed or on the wrong side."""
    header = _gap_header(key, op)
    if header is None:
        return None
    bucket, count, index = header
    data, pos = op.data, 10
    neighbours = []
    for j in (index - 1, index):
        if not 0 <= j < count:
            continue
        found = _neighbour(data, pos, key, bucket, j < index)
        if found is None:
            return None
        digest, pos = found
        end = pos + 32 * (path_length(j, count) if with_paths else 0)
        if end > len(data):
            return None
        neighbours.append((j, digest, [data[p:p + 32] for p in range(pos, end, 32)]))
        pos = end
    return _Gap(bucket, count, index, neighbours, pos)


def _verify_gap(root: bytes, key: bytes, op: ProofOp, tree: ProofOp) -> bool:
    """Absence: the neighbours around `key` are adjacent committed entries of its bucket."""
    gap = _parse_gap(key, op, with_paths=False)
    if gap is None:
        return False
    full = {j: digest for j, digest, _ in gap.neighbours}
    rest = op.data[gap.end:]
    if len(rest) != 32 * (gap.count - len(full)):
        return False
    digests = []
    it = 0
    for j in range(gap.count):
        if j in full:
            digests.append(full[j])
        else:
            digests.append(rest[32 * it:32 * it + 32])
            it += 1
    leaf = sha256(b"\x01" + b"".join(digests)).digest() if gap.count else ZERO_HASH
    return _climb(root, gap.bucket, leaf, tree)


def _verify_entry(root: bytes, key: bytes, value: bytes, op: ProofOp, tree: ProofOp) -> bool:
    data = op.data
    if op.key != key or tree.type != TREE_OP or len(data) < 10:
        return False
    bucket = int.from_bytes(data[0:2], "big")
    index = int.from_bytes(data[2:6], "big")
    count = int.from_bytes(data[6:10], "big")
    if (bucket != bucket_of(key) or not 0 <= index < count
            or len(data) != 10 + 32 * (count - 1)
            or tree.key != bucket_prefix(bucket) or len(tree.data) != 32 * BUCKET_BITS):
        return False
    others = data[10:]
    mine = entry_digest(key, value_hash(value))
    leaf = sha256(b"\x01" + others[:32 * index] + mine + others[32 * index:]).digest()
    return _climb(root, bucket, leaf, tree)


def _verify_entry_v2(root: bytes, key: bytes, value: bytes, op: ProofOp, tree: ProofOp
                     ) -> bool:
    """Inclusion under layout 2: the entry's audit path gives the bucket's tree top."""
    data = op.data
    if op.key != key or len(data) < 10:
        return False
    bucket = int.from_bytes(data[0:2], "big")
    index = int.from_bytes(data[2:6], "big")
    count = int.from_bytes(data[6:10], "big")
    if bucket != bucket_of(key) or not 0 <= index < count \
            or len(data) != 10 + 32 * path_length(index, count):
        return False
    path = [data[p:p + 32] for p in range(10, len(data), 32)]
    top = top_from_path(entry_digest(key, value_hash(value)), index, count, path)
    return top is not None and _climb(root, bucket, from_top(count, top), tree)


def _verify_gap_v2(root: bytes, key: bytes, op: ProofOp, tree: ProofOp) -> bool:
    """Absence under layout 2: entries i-1 and i sit around `key`, adjacent in one tree."""
    gap = _parse_gap(key, op, with_paths=True)
    if gap is None or gap.end != len(op.data):
        return False
    if gap.count == 0:
        return _climb(root, gap.bucket, ZERO_HASH, tree)
    tops = {top_from_path(digest, j, gap.count, path) for j, digest, path in gap.neighbours}
    if len(tops) != 1 or None in tops:
        return False
    top = tops.pop()
    return top is not None and _climb(root, gap.bucket, from_top(gap.count, top), tree)


def decode_ops(key: bytes, ops: Sequence[ProofOp]) -> Proof:
    """Parse full-bucket ops back into a `Proof` for `key`; anything else is a format error.

    The op keys must name the queried key and its bucket, so an op list cannot be reused
    for a different key than the one the client asked about.
    """
    if len(ops) != 2:
        raise ProofFormatError(f"expected 2 proof ops, got {len(ops)}")
    bucket_op, tree_op = ops
    if bucket_op.type not in _BUCKET_OPS or tree_op.type != TREE_OP:
        raise ProofFormatError(f"unexpected op types {bucket_op.type!r}, {tree_op.type!r}")
    if bucket_op.key != key:
        raise ProofFormatError("bucket op names a different key")
    proof = Proof.from_bytes(bucket_op.data + tree_op.data, _BUCKET_OPS[bucket_op.type])
    if tree_op.key != bucket_prefix(proof.bucket) or len(tree_op.data) != 32 * BUCKET_BITS:
        raise ProofFormatError("tree op does not match the bucket op")
    return proof


def _hex_key(data: bytes) -> bytes:
    return bytes.fromhex(data.decode())


#: Query path -> (state key from the query data). One line per provable record path; the
#: value answered is the raw canonical record (docs/VERIFIED_READS.md).
RECORD_PATHS: dict[str, Callable[[bytes], bytes]] = {
    "/memory": lambda d: records.MEMORY + d,
    "/content": lambda d: records.CONTENT + d,
    "/account": lambda d: records.account_key(_hex_key(d)),
    "/domain": lambda d: records.DOMAIN + d,
    "/scope": lambda d: records.SCOPE + d,
    "/proposal": lambda d: records.PROPOSAL + d,
    "/cocommit": lambda d: records.COCOMMIT + d,
    "/validators": lambda d: records.VALIDATORS,
    "/key": lambda d: bytes(d),
}


def record_key(path: str, data: bytes) -> bytes:
    """The state key a provable query path reads (KeyError for an unknown path)."""
    return RECORD_PATHS[path](data)
