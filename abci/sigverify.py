"""Ed25519 verification cached by exact (key, signature, message).

A tx usually reaches FinalizeBlock after CheckTx already verified its signature in this
process; the cache lets the block skip that second libsodium call. Verification is a
pure function of its inputs, so the cache can never change an outcome, only how fast it
is known. The key hashes key, signature *and* message: a cache keyed on the signature
alone would let a valid signature be replayed over a different body. Only libsodium
ever verifies, so every node accepts exactly the same signatures.

Parallel verification was measured and dropped: PyNaCl holds the GIL during
verification, and on the 2-vCPU reference machine two worker processes each ran at half
speed (the vCPUs share one physical core), so it bought nothing for its complexity.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from abci.tx import PUBLIC_KEY_LEN, SIGNATURE_LEN, verify_signature


class SignatureVerifier:
    """Callable like `verify_signature`, remembering the signatures that verified."""

    def __init__(self, cache_size: int = 200_000) -> None:
        self._verified: OrderedDict[bytes, None] = OrderedDict()
        self._cache_size = cache_size
        self.hits = 0

    def __call__(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        # Fixed lengths make key ‖ signature ‖ message unambiguous; without this check a
        # longer "signature" could absorb a prefix of the message and hit a cached entry.
        if len(public_key) != PUBLIC_KEY_LEN or len(signature) != SIGNATURE_LEN:
            return False
        key = hashlib.sha256(public_key + signature + message).digest()
        if key in self._verified:
            self.hits += 1
            self._verified.move_to_end(key)
            return True
        ok = verify_signature(public_key, message, signature)
        if ok:
            self._verified[key] = None
            if len(self._verified) > self._cache_size:
                self._verified.popitem(last=False)
        return ok
