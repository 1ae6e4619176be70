"""Transaction envelope: decode, canonical-form gate and signature check (the bytes signed
are defined in `memledger.protocol.envelope`).

Everything here is a pure function of the tx bytes and the chain id, so CheckTx and
FinalizeBlock apply exactly the same gate. The nonce check needs state and lives in
`memledger.consensus.families.accounts.nonces`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import DecodeError, Message
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from memledger.consensus import versions
from memledger.consensus.gate.schema import body_class
from memledger.protocol.codes import Code, TxError
from memledger.protocol.envelope import PUBLIC_KEY_LEN, SIGNATURE_LEN, sign_bytes, tx_hash
from memledger.protocol.limits import MAX_TX_BYTES
from memledger.protocol.pb import tx_pb2


@dataclass(slots=True)
class SignedTx:
    """A tx that passed the stateless gate: decoded, canonical, signed, on this chain.

    Not frozen: a frozen dataclass pays object.__setattr__ per field on every tx.
    """

    raw: bytes
    tx_hash: bytes
    signer: bytes
    nonce: int
    body: tx_pb2.TxBody
    kind: str
    #: the lowest app version whose rules know every field the message sets
    fields_version: int = 1

    @property
    def signer_hex(self) -> str:
        return self.signer.hex()


def is_canonical(message: Message, raw: bytes) -> bool:
    """True when `raw` is exactly the deterministic encoding of what it decodes to.

    Unknown fields, duplicated singular fields, repeated oneof members, unpacked
    repeated scalars, explicit default values and non-minimal varints all change the
    re-encoding, so each signed action has exactly one byte string and one tx hash.
    """
    message.DiscardUnknownFields()
    reencoded: bytes = message.SerializeToString(deterministic=True)
    return reencoded == raw


def parse_canonical(cls: type[Message], raw: bytes, decode_code: Code, canon_code: Code) -> Message:
    """Decode `raw` as `cls`, rejecting undecodable or non-canonical bytes."""
    message = cls()
    try:
        message.ParseFromString(raw)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise TxError(decode_code, f"{cls.__name__} does not decode: {exc}") from None
    if not is_canonical(message, raw):
        raise TxError(canon_code)
    return message


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Strict Ed25519 verification (libsodium rejects non-canonical S and small order)."""
    if len(public_key) != PUBLIC_KEY_LEN or len(signature) != SIGNATURE_LEN:
        return False
    try:
        VerifyKey(public_key).verify(message, signature)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


SignatureCheck = Callable[[bytes, bytes, bytes], bool]


def check_fields_version(fields_version: int, app_version: int) -> None:
    """A field newer than the chain's rules: refused as the binaries that predate it
    refused it (memledger.consensus.versions.FIELDS).

    For a tx that already passed the gate under a later version's schema (the decoded-tx
    cache): its body decoded and was canonical there, so under the older schema the newer
    fields are unknown ones, which always decode, and the body is not canonical: this code.
    """
    if fields_version > app_version:
        raise TxError(Code.BODY_NOT_CANONICAL,
                      f"the message sets a field that needs app version {fields_version}; "
                      f"the chain is at v{app_version}")


def decode_tx(raw: bytes, chain_id: str, check: SignatureCheck | None = None,
              app_version: int | None = None) -> SignedTx:
    """Apply the stateless gate in spec order: size, decode, canonical, chain, signature.

    With `app_version`, the body is decoded with the schema that version's binaries had
    (memledger.consensus.gate.schema): a field newer than the chain is an unknown field, as
    it was to them, whatever its bytes, so the body gets exactly the code it got then.
    `check` may be a cached/parallel verifier (memledger.consensus.gate.sigverify); it must
    answer exactly what `verify_signature` would.
    """
    if len(raw) > MAX_TX_BYTES:
        raise TxError(Code.TX_TOO_LARGE, f"tx is {len(raw)} bytes, limit {MAX_TX_BYTES}")
    envelope = parse_canonical(tx_pb2.Tx, raw, Code.TX_DECODE, Code.TX_NOT_CANONICAL)
    assert isinstance(envelope, tx_pb2.Tx)
    schema = body_class(app_version)
    body = parse_canonical(schema, envelope.body, Code.BODY_DECODE, Code.BODY_NOT_CANONICAL)
    if schema is not tx_pb2.TxBody:  # canonical under a subset of tx.proto: the same fields
        body = tx_pb2.TxBody.FromString(envelope.body)
    assert isinstance(body, tx_pb2.TxBody)
    kind = body.WhichOneof("msg")
    needs = 1 if kind is None else versions.fields_version(kind, getattr(body, kind))
    if body.chain_id != chain_id:
        raise TxError(Code.WRONG_CHAIN_ID, f"tx is for chain {body.chain_id!r}, not {chain_id!r}")
    if len(envelope.public_key) != PUBLIC_KEY_LEN:
        raise TxError(Code.BAD_PUBLIC_KEY)
    verify = check or verify_signature
    if not verify(envelope.public_key, sign_bytes(envelope.body), envelope.signature):
        raise TxError(Code.BAD_SIGNATURE)
    if body.nonce == 0:
        raise TxError(Code.NONCE_ZERO)
    if kind is None:
        raise TxError(Code.EMPTY_MESSAGE)
    return SignedTx(
        raw=raw,
        tx_hash=tx_hash(raw),
        signer=bytes(envelope.public_key),
        nonce=body.nonce,
        body=body,
        kind=kind,
        fields_version=needs,
    )


def peek_signer_nonce(raw: bytes) -> tuple[bytes, int] | None:
    """Signer and nonce of tx bytes, without the gate (None when they do not parse).

    For the REST API's backlog admission only: it trusts nothing it reads here, since
    CheckTx still applies the whole gate to the same bytes.
    """
    if len(raw) > MAX_TX_BYTES:
        return None
    try:
        envelope = tx_pb2.Tx.FromString(raw)
        body = tx_pb2.TxBody.FromString(envelope.body)
    except DecodeError:
        return None
    if len(envelope.public_key) != PUBLIC_KEY_LEN or body.nonce == 0:
        return None
    return bytes(envelope.public_key), int(body.nonce)
