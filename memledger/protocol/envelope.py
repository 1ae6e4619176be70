"""The signed transaction envelope, as both sides see it: what a signature covers and how a
client builds a canonical `Tx`.

The node's gate (`memledger.consensus.gate.envelope`) decodes and checks envelopes against
exactly these bytes; the SDK builds them here, so the two cannot drift apart.
"""

from __future__ import annotations

import hashlib

from nacl.signing import SigningKey

from memledger.protocol.pb import tx_pb2

#: Domain separation: a tx signature can never be replayed as another protocol's signature.
TX_SIGN_PREFIX = b"memledger/tx/v1\x00"
PUBLIC_KEY_LEN = 32
SIGNATURE_LEN = 64


def tx_hash(raw: bytes) -> bytes:
    """CometBFT's tx hash: SHA-256 of the raw tx bytes."""
    return hashlib.sha256(raw).digest()


def sign_bytes(body: bytes) -> bytes:
    """The exact bytes an Ed25519 tx signature covers."""
    return TX_SIGN_PREFIX + body


def encode_tx(body: tx_pb2.TxBody, signing_key: SigningKey) -> bytes:
    """Sign `body` and wrap it in a canonical `Tx` (deterministic protobuf encoding)."""
    body_bytes = body.SerializeToString(deterministic=True)
    signature = signing_key.sign(sign_bytes(body_bytes)).signature
    envelope = tx_pb2.Tx(
        body=body_bytes,
        public_key=bytes(signing_key.verify_key),
        signature=signature,
    )
    encoded: bytes = envelope.SerializeToString(deterministic=True)
    return encoded
