"""Proofs in ABCI `ResponseQuery.proof_ops`: one op per layer of the app-hash tree.

Why two ops: a CometBFT-style client runs proof ops in order, each turning the value of
the layer below into the root of its own layer. Our commitment (docs/APP_HASH.md) has two
layers, so a proof is two ops whose `data` fields, concatenated, are exactly
`Proof.to_bytes()`:

- `ml.bucket.v1`: key = the record key, data = `u16be(bucket) || u32be(m) || entries`.
  Turns (key, value or absence) into the bucket hash.
- `ml.tree.v1`: key = `u16be(bucket)`, data = the 16 sibling hashes, leaf level first.
  Turns the bucket hash into the app hash.

This module is pure (no I/O): the node encodes with it and the light client decodes with
it, so both sides agree on one byte layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memledger.consensus.store import records
from memledger.consensus.store.commitment import (
    BUCKET_BITS,
    Proof,
    ProofFormatError,
    bucket_prefix,
)

__all__ = [
    "BUCKET_OP",
    "TREE_OP",
    "RECORD_PATHS",
    "ProofOp",
    "decode_ops",
    "encode_ops",
    "record_key",
]

BUCKET_OP = "ml.bucket.v1"
TREE_OP = "ml.tree.v1"


@dataclass(frozen=True, slots=True)
class ProofOp:
    """One proof op as carried by CometBFT (`tendermint.crypto.ProofOp`)."""

    type: str
    key: bytes
    data: bytes


def encode_ops(key: bytes, proof: Proof) -> list[ProofOp]:
    """The two ops for `proof` of `key` (see the module docstring)."""
    raw = proof.to_bytes()
    split = len(raw) - 32 * BUCKET_BITS
    return [ProofOp(BUCKET_OP, key, raw[:split]),
            ProofOp(TREE_OP, bucket_prefix(proof.bucket), raw[split:])]


def decode_ops(key: bytes, ops: Sequence[ProofOp]) -> Proof:
    """Parse ops back into a `Proof` for `key`; anything unexpected is a format error.

    The op keys must name the queried key and its bucket, so an op list cannot be reused
    for a different key than the one the client asked about.
    """
    if len(ops) != 2:
        raise ProofFormatError(f"expected 2 proof ops, got {len(ops)}")
    bucket_op, tree_op = ops
    if bucket_op.type != BUCKET_OP or tree_op.type != TREE_OP:
        raise ProofFormatError(f"unexpected op types {bucket_op.type!r}, {tree_op.type!r}")
    if bucket_op.key != key:
        raise ProofFormatError("bucket op names a different key")
    proof = Proof.from_bytes(bucket_op.data + tree_op.data)
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
    "/validators": lambda d: records.VALIDATORS,
    "/key": lambda d: bytes(d),
}


def record_key(path: str, data: bytes) -> bytes:
    """The state key a provable query path reads (KeyError for an unknown path)."""
    return RECORD_PATHS[path](data)
