"""Private-domain cryptography on the member's machine (app version 10+).

A private domain has one 32-byte key per epoch. The owner seals each epoch key to every
member: a libsodium sealed box to the X25519 key derived from the member's Ed25519 key
(`crypto_sign_ed25519_pk_to_curve25519`), and publishes the sealed copies on chain. A
member opens its copy with its own signing key, and seals or opens content with
XChaCha20-Poly1305 (libsodium's IETF AEAD), binding domain, epoch and memory id as
associated data (memledger.protocol.sealed). Keys and plaintext never leave this process
and are never logged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import nacl.utils
from nacl.bindings import (
    crypto_aead_xchacha20poly1305_ietf_decrypt,
    crypto_aead_xchacha20poly1305_ietf_encrypt,
)
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox
from nacl.signing import SigningKey, VerifyKey

from memledger.protocol import sealed
from memledger.sdk.errors import MemLedgerError

__all__ = ["EpochKeyMissing", "Keyring", "open_content", "open_epoch_key", "seal_content",
           "seal_epoch_key", "new_epoch_key", "sealed_copies"]


class EpochKeyMissing(MemLedgerError):
    """This key holds no sealed copy of the epoch key a private memory needs."""

    def __init__(self, domain: str, epoch: int) -> None:
        super().__init__(f"no epoch key for private domain {domain!r} epoch {epoch}: this "
                         "key is not a member then (ask the owner to grant it and hand it "
                         "the key: `memledger grant`)", name="epoch_key_missing")
        self.domain = domain
        self.epoch = epoch


def new_epoch_key() -> bytes:
    return nacl.utils.random(sealed.KEY_BYTES)


def seal_epoch_key(epoch_key: bytes, member: bytes) -> bytes:
    """The epoch key in a sealed box only `member` (an Ed25519 public key) can open."""
    box = SealedBox(VerifyKey(member).to_curve25519_public_key())
    return bytes(box.encrypt(epoch_key))


def sealed_copies(epoch_key: bytes, members: Iterable[bytes]) -> list[tuple[bytes, bytes]]:
    """(recipient, sealed key) for each member, by ascending recipient."""
    return [(m, seal_epoch_key(epoch_key, m)) for m in sorted(set(members))]


def open_epoch_key(sealed_key: bytes, key: SigningKey) -> bytes:
    private: PrivateKey = key.to_curve25519_private_key()
    return bytes(SealedBox(private).decrypt(sealed_key))


def seal_content(epoch_key: bytes, domain: str, epoch: int, memory_id: str,
                 plaintext: str) -> str:
    """The envelope a private memory's content holds."""
    nonce = nacl.utils.random(sealed.NONCE_BYTES)
    ad = sealed.associated_data(domain, epoch, memory_id)
    ciphertext = crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext.encode(), ad, nonce,
                                                            epoch_key)
    return sealed.format_envelope(nonce, ciphertext)


def open_content(epoch_key: bytes, domain: str, epoch: int, memory_id: str,
                 envelope: str) -> str:
    """The plaintext of a private memory; CryptoError when it is not this key's."""
    parts = sealed.parse_envelope(envelope)
    if parts is None:
        raise CryptoError("not a sealed envelope")
    nonce, ciphertext = parts
    ad = sealed.associated_data(domain, epoch, memory_id)
    plain: bytes = crypto_aead_xchacha20poly1305_ietf_decrypt(ciphertext, ad, nonce, epoch_key)
    return plain.decode()


def _public(key: SigningKey) -> PublicKey:
    return key.verify_key.to_curve25519_public_key()


class Keyring:
    """The epoch keys one signing key can open, per domain, from domain records read off
    the chain (cached: an epoch's key never changes once published)."""

    def __init__(self, key: SigningKey | None) -> None:
        self._key = key
        self._keys: dict[tuple[str, int], bytes] = {}

    @property
    def me(self) -> str | None:
        return None if self._key is None else bytes(self._key.verify_key).hex()

    def learn(self, domain: str, record: Mapping[str, Any] | None) -> None:
        """Open every sealed copy addressed to this key in a domain record."""
        private = None if record is None else record.get("private")
        if self._key is None or not isinstance(private, Mapping):
            return
        for epoch in private.get("epochs", []):
            number = int(epoch["epoch"])
            copy = epoch.get("keys", {}).get(self.me)
            if copy is None or (domain, number) in self._keys:
                continue
            try:
                self._keys[(domain, number)] = open_epoch_key(bytes.fromhex(copy), self._key)
            except (CryptoError, ValueError):
                continue  # a copy that does not open is no key; reads say which epoch

    def get(self, domain: str, epoch: int) -> bytes | None:
        return self._keys.get((domain, epoch))

    def require(self, domain: str, epoch: int) -> bytes:
        found = self.get(domain, epoch)
        if found is None:
            raise EpochKeyMissing(domain, epoch)
        return found


def current_epoch(record: Mapping[str, Any] | None) -> int:
    """A domain record's current epoch (0: not private)."""
    private = None if record is None else record.get("private")
    if not isinstance(private, Mapping) or not private.get("epochs"):
        return 0
    return int(private["epochs"][-1]["epoch"])


def members_of(record: Mapping[str, Any]) -> list[bytes]:
    """Who holds a private domain's keys: its owner and every grantee in its grant index
    (as consensus counts them: an expired grant reads until it is revoked)."""
    found = [record["owner"]] if record.get("owner") else []
    return sorted(bytes.fromhex(m) for m in {*found, *record.get("grantees", [])})
