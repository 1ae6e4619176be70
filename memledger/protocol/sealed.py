"""The shape of private-domain content (app version 10+), shared by consensus and the SDK.

A memory in a private domain holds `"mlpriv1:" + base64(nonce || ciphertext)`: a 24-byte
nonce and the XChaCha20-Poly1305 ciphertext (16-byte tag included) of the plaintext under
the domain's epoch key, with `associated_data(domain, epoch, memory_id)` bound in, so a
ciphertext cannot be replayed under another memory, domain or epoch. Consensus checks only
this shape (`parse_envelope`), never the plaintext; content_hash, signatures and the app
hash cover the envelope string like any other content. Encryption lives in the SDK
(memledger.sdk.private), which alone holds keys.
"""

from __future__ import annotations

import base64
import binascii

PREFIX = "mlpriv1:"
NONCE_BYTES = 24
MAC_BYTES = 16
KEY_BYTES = 32
#: a libsodium sealed box around a 32-byte key: 32-byte ephemeral key + 16-byte MAC + 32
SEALED_KEY_BYTES = 80
_AD_PREFIX = b"memledger/private/v1\x00"


def associated_data(domain: str, epoch: int, memory_id: str) -> bytes:
    """What the AEAD binds to a private memory besides its plaintext."""
    return (_AD_PREFIX + domain.encode() + b"\x00" + epoch.to_bytes(8, "big") + b"\x00"
            + memory_id.encode())


def format_envelope(nonce: bytes, ciphertext: bytes) -> str:
    return PREFIX + base64.b64encode(nonce + ciphertext).decode("ascii")


def parse_envelope(content: str) -> tuple[bytes, bytes] | None:
    """(nonce, ciphertext) of a well-formed envelope, else None. Canonical base64 only
    (padding, no whitespace), so one envelope has one content string."""
    if not content.startswith(PREFIX):
        return None
    text = content[len(PREFIX):]
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != text:
        return None
    if len(raw) < NONCE_BYTES + MAC_BYTES + 1:
        return None
    return raw[:NONCE_BYTES], raw[NONCE_BYTES:]


def is_sealed(content: str) -> bool:
    """Whether `content` has the private-envelope shape (the indexes skip such content)."""
    return parse_envelope(content) is not None
