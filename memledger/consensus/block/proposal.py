"""How this node proposes a block: each signer's txs in nonce order.

Off the consensus path: PrepareProposal is the proposer's choice, and every validator's
ProcessProposal accepts any order (FinalizeBlock gives each tx its deterministic code).
The mempool holds one signer's concurrent txs in arrival order; proposing them in nonce
order keeps a lower nonce from landing behind a higher one in the same block, which the
v1-v2 rule punishes and the v3 window merely tolerates.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from memledger.consensus.gate.txcache import DecodedTxCache
from memledger.protocol.pb import tx_pb2


def signer_and_nonce(raw: bytes, decoded: DecodedTxCache) -> tuple[bytes, int] | None:
    """Who signed `raw` with which nonce, without verifying anything (FinalizeBlock will)."""
    signed = decoded.get(raw)
    if signed is not None:
        return signed.signer, signed.nonce
    try:
        envelope = tx_pb2.Tx.FromString(raw)
        body = tx_pb2.TxBody.FromString(envelope.body)
    except (DecodeError, ValueError, RuntimeError):
        return None
    return bytes(envelope.public_key), int(body.nonce)


def order_by_nonce(txs: list[bytes], decoded: DecodedTxCache) -> list[bytes]:
    """Sort each signer's txs by nonce into the slots that signer already holds.

    Other signers' txs keep their positions; undecodable txs keep theirs too. Stable, so
    two txs with the same signer and nonce keep their relative order.
    """
    slots: dict[bytes, list[int]] = {}
    keys: list[int] = [0] * len(txs)
    for index, raw in enumerate(txs):
        found = signer_and_nonce(raw, decoded)
        if found is None:
            continue
        slots.setdefault(found[0], []).append(index)
        keys[index] = found[1]
    ordered = list(txs)
    for positions in slots.values():
        if len(positions) < 2:
            continue
        by_nonce = sorted(positions, key=lambda i: keys[i])
        for slot, source in zip(positions, by_nonce, strict=True):
            ordered[slot] = txs[source]
    return ordered
