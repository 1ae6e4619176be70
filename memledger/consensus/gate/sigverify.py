"""Ed25519 verification cached by exact (key, signature, message).

A tx usually reaches FinalizeBlock after CheckTx already verified its signature in this
process; the cache lets the block skip that second libsodium call. Verification is a
pure function of its inputs, so the cache can never change an outcome, only how fast it
is known. The key hashes key, signature *and* message: a cache keyed on the signature
alone would let a valid signature be replayed over a different body. Only libsodium
ever verifies, so every node accepts exactly the same signatures.

A block's uncached signatures can also be handed to a helper process in advance
(`prefetch`, memledger.consensus.gate.verifypool) so they are checked on another core while the
block
executes; the verdicts are the same libsodium answers, consumed in block order.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Container, Sequence

from google.protobuf.message import DecodeError

from memledger.consensus.gate.envelope import verify_signature
from memledger.consensus.gate.verifypool import Triple, VerifyPool
from memledger.protocol.envelope import PUBLIC_KEY_LEN, SIGNATURE_LEN, sign_bytes
from memledger.protocol.limits import MAX_TX_BYTES
from memledger.protocol.pb import tx_pb2


def envelope_triple(raw: bytes) -> Triple | None:
    """What decode_tx would hand to the verifier for this tx, if it gets that far."""
    if len(raw) > MAX_TX_BYTES:
        return None
    envelope = tx_pb2.Tx()
    try:
        envelope.ParseFromString(raw)
    except (DecodeError, ValueError, RuntimeError):
        return None
    public_key, signature = envelope.public_key, envelope.signature
    if len(public_key) != PUBLIC_KEY_LEN or len(signature) != SIGNATURE_LEN:
        return None
    return public_key, sign_bytes(envelope.body), signature


def _cache_key(public_key: bytes, message: bytes, signature: bytes) -> bytes:
    return hashlib.sha256(public_key + signature + message).digest()


class SignatureVerifier:
    """Callable like `verify_signature`, remembering the signatures that verified."""

    def __init__(self, cache_size: int = 200_000, pool: VerifyPool | None = None,
                 min_batch: int = 128) -> None:
        self._verified: OrderedDict[bytes, None] = OrderedDict()
        self._cache_size = cache_size
        self._pool = pool
        self._min_batch = min_batch  # below this, the hand-off costs more than it saves
        self._pending: dict[bytes, tuple[int, int]] = {}
        self.hits = 0
        self.prefetched = 0

    def prefetch(self, txs: Sequence[bytes], known: Container[bytes] = ()) -> None:
        """Start checking a block's uncached signatures on the helper, if there is one.

        `known` holds txs already through the gate (memledger.consensus.gate.txcache): nothing to
        check.
        """
        self._pending = {}
        pool = self._pool
        if pool is None or len(txs) < self._min_batch or not pool.usable:
            return
        wanted: dict[bytes, Triple] = {}  # by cache key, in block order
        for raw in txs:
            if raw in known:
                continue
            triple = envelope_triple(raw)
            if triple is None:
                continue
            key = _cache_key(*triple)
            if key not in self._verified:
                wanted.setdefault(key, triple)
        if len(wanted) < self._min_batch:
            return
        self._pending = dict(zip(wanted, pool.submit(list(wanted.values())), strict=True))
        self.prefetched += len(wanted)

    def end_block(self) -> None:
        """Forget the block's unused tickets (their txs failed before the signature)."""
        self._pending = {}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()

    def __call__(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        # Fixed lengths make key ‖ signature ‖ message unambiguous; without this check a
        # longer "signature" could absorb a prefix of the message and hit a cached entry.
        if len(public_key) != PUBLIC_KEY_LEN or len(signature) != SIGNATURE_LEN:
            return False
        key = _cache_key(public_key, message, signature)
        if key in self._verified:
            self.hits += 1
            self._verified.move_to_end(key)
            return True
        ticket = self._pending.pop(key, None)
        ok = None if ticket is None or self._pool is None else self._pool.answer(ticket)
        if ok is None:
            ok = verify_signature(public_key, message, signature)
        if ok:
            self._verified[key] = None
            if len(self._verified) > self._cache_size:
                self._verified.popitem(last=False)
        return ok
