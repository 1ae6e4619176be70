"""The signature cache never accepts what libsodium would reject."""

from __future__ import annotations

from nacl.signing import SigningKey

from memledger.consensus.gate.sigverify import SignatureVerifier


def test_cache_hits_only_for_identical_triples() -> None:
    key = SigningKey(b"\x05" * 32)
    pk = bytes(key.verify_key)
    sig = key.sign(b"body one").signature
    verifier = SignatureVerifier(cache_size=2)
    assert verifier(pk, b"body one", sig)
    assert verifier(pk, b"body one", sig) and verifier.hits == 1
    # The same signature over another body, or under another key, is verified afresh.
    assert not verifier(pk, b"body two", sig)
    other = bytes(SigningKey(b"\x06" * 32).verify_key)
    assert not verifier(other, b"body one", sig)
    assert not verifier(pk, b"body one", bytes(64))


def test_cache_is_bounded() -> None:
    key = SigningKey(b"\x07" * 32)
    pk = bytes(key.verify_key)
    verifier = SignatureVerifier(cache_size=3)
    for i in range(10):
        msg = f"m{i}".encode()
        assert verifier(pk, msg, key.sign(msg).signature)
    assert len(verifier._verified) == 3
