"""CometBFT v0.38 headers, commits and validator sets: parsing, hashing, sign bytes.

Parsed from the JSON CometBFT's RPC serves (`/commit`, `/validators`), which is untrusted
input: every field is type-checked here, and everything that matters is re-derived
(header hash, validator set hash, vote sign bytes) rather than taken from the JSON.

Protocol facts used (CometBFT v0.38):
- hashes are RFC 6962-style Merkle roots (leaf = SHA-256(0x00 || item), inner =
  SHA-256(0x01 || left || right), split at the largest power of two below n, empty =
  SHA-256 of nothing);
- a header hash is that root over its 14 fields, each protobuf-encoded (scalars wrapped
  in the well-known wrapper messages, time as a Timestamp, the block id as a BlockID);
- a validator set hash is the root over SimpleValidator{pub_key, voting_power}, in set
  order;
- a precommit signs the length-prefixed protobuf CanonicalVote.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

from memledger.sdk.light import encoding as enc
from memledger.sdk.light.errors import HeaderError

#: `BlockIDFlag` values of a CommitSig.
FLAG_ABSENT, FLAG_COMMIT, FLAG_NIL = 1, 2, 3
#: `SignedMsgType` of a precommit.
PRECOMMIT = 2
ED25519_TYPE = "tendermint/PubKeyEd25519"

_sha256 = hashlib.sha256


def merkle_root(items: list[bytes]) -> bytes:
    """RFC 6962 Merkle root as CometBFT's `merkle.HashFromByteSlices` computes it."""
    n = len(items)
    if n == 0:
        return _sha256(b"").digest()
    if n == 1:
        return _sha256(b"\x00" + items[0]).digest()
    k = 1 << ((n - 1).bit_length() - 1)
    return _sha256(b"\x01" + merkle_root(items[:k]) + merkle_root(items[k:])).digest()


@dataclass(frozen=True, slots=True)
class BlockId:
    hash: bytes
    parts_total: int
    parts_hash: bytes

    def encode(self) -> bytes:
        """`tendermint.types.BlockID` (part set header always present)."""
        psh = enc.f_varint(1, self.parts_total) + enc.f_bytes(2, self.parts_hash)
        return enc.f_bytes(1, self.hash) + enc.f_message(2, psh)

    def encode_canonical(self) -> bytes:
        """`CanonicalBlockID`, as placed in vote sign bytes."""
        psh = enc.f_varint(1, self.parts_total) + enc.f_bytes(2, self.parts_hash)
        return enc.f_bytes(1, self.hash) + enc.f_message(2, psh)


@dataclass(frozen=True, slots=True)
class Header:
    version_block: int
    version_app: int
    chain_id: str
    height: int
    time_s: int
    time_nanos: int
    last_block_id: BlockId
    last_commit_hash: bytes
    data_hash: bytes
    validators_hash: bytes
    next_validators_hash: bytes
    consensus_hash: bytes
    app_hash: bytes
    last_results_hash: bytes
    evidence_hash: bytes
    proposer_address: bytes

    @property
    def time_ns(self) -> int:
        return self.time_s * 1_000_000_000 + self.time_nanos

    def field_bytes(self) -> list[bytes]:
        """The 14 protobuf-encoded fields the header hash is the Merkle root of."""
        version = enc.f_varint(1, self.version_block) + enc.f_varint(2, self.version_app)
        return [
            version,
            enc.f_bytes(1, self.chain_id.encode()),          # StringValue
            enc.f_varint(1, self.height),                    # Int64Value
            enc.timestamp(self.time_s, self.time_nanos),     # Timestamp
            self.last_block_id.encode(),                     # BlockID
            enc.f_bytes(1, self.last_commit_hash),           # BytesValue ...
            enc.f_bytes(1, self.data_hash),
            enc.f_bytes(1, self.validators_hash),
            enc.f_bytes(1, self.next_validators_hash),
            enc.f_bytes(1, self.consensus_hash),
            enc.f_bytes(1, self.app_hash),
            enc.f_bytes(1, self.last_results_hash),
            enc.f_bytes(1, self.evidence_hash),
            enc.f_bytes(1, self.proposer_address),
        ]

    def hash(self) -> bytes:
        return merkle_root(self.field_bytes())


@dataclass(frozen=True, slots=True)
class CommitSig:
    flag: int
    validator_address: bytes
    time_s: int
    time_nanos: int
    signature: bytes


@dataclass(frozen=True, slots=True)
class Commit:
    height: int
    round: int
    block_id: BlockId
    signatures: tuple[CommitSig, ...]

    def sign_bytes(self, chain_id: str, index: int) -> bytes:
        """Length-prefixed CanonicalVote that signature `index` signed (a precommit)."""
        sig = self.signatures[index]
        block = b"" if sig.flag != FLAG_COMMIT else enc.f_message(
            4, self.block_id.encode_canonical())
        body = (enc.f_varint(1, PRECOMMIT) + enc.f_sfixed64(2, self.height)
                + enc.f_sfixed64(3, self.round) + block
                + enc.f_message(5, enc.timestamp(sig.time_s, sig.time_nanos))
                + enc.f_bytes(6, chain_id.encode()))
        return enc.uvarint(len(body)) + body


@dataclass(frozen=True, slots=True)
class Validator:
    address: bytes
    pub_key: bytes
    power: int

    def encode(self) -> bytes:
        """SimpleValidator{pub_key: PublicKey{ed25519}, voting_power}."""
        return enc.f_message(1, enc.f_bytes(1, self.pub_key)) + enc.f_varint(2, self.power)


@dataclass(frozen=True, slots=True)
class ValidatorSet:
    validators: tuple[Validator, ...]

    def hash(self) -> bytes:
        return merkle_root([v.encode() for v in self.validators])

    @property
    def total_power(self) -> int:
        return sum(v.power for v in self.validators)

    def by_address(self) -> dict[bytes, Validator]:
        return {v.address: v for v in self.validators}


@dataclass(frozen=True, slots=True)
class LightBlock:
    """A header, the commit that signs it, and the validator set that made the commit."""

    header: Header
    commit: Commit
    validators: ValidatorSet
    #: The JSON it was parsed from ({"signed_header", "validators"}), for the local store.
    raw: Any = field(default=None, compare=False, repr=False)

    @property
    def height(self) -> int:
        return self.header.height


def address_of(pub_key: bytes) -> bytes:
    """Validator address: the first 20 bytes of SHA-256 of the Ed25519 public key."""
    return _sha256(pub_key).digest()[:20]


# --- parsing untrusted JSON --------------------------------------------------------------


def _get(doc: Any, name: str) -> Any:
    if not isinstance(doc, dict) or name not in doc:
        raise HeaderError("malformed", f"missing field {name!r}")
    return doc[name]


def _hex(doc: Any, name: str, size: int | None = None) -> bytes:
    raw = _get(doc, name)
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise HeaderError("malformed", f"field {name!r} is not a hex string")
    try:
        value = bytes.fromhex(raw)
    except ValueError as exc:
        raise HeaderError("malformed", f"field {name!r} is not hex") from exc
    if value and size is not None and len(value) != size:
        raise HeaderError("malformed", f"field {name!r} has {len(value)} bytes, not {size}")
    return value


def _int(doc: Any, name: str) -> int:
    raw = _get(doc, name)
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise HeaderError("malformed", f"field {name!r} is not an integer")
    try:
        value = int(raw)
    except ValueError as exc:
        raise HeaderError("malformed", f"field {name!r} is not an integer") from exc
    if not -(1 << 63) <= value < (1 << 63):
        raise HeaderError("malformed", f"field {name!r} out of int64 range")
    return value


def _time(doc: Any, name: str) -> tuple[int, int]:
    raw = _get(doc, name)
    try:
        return enc.parse_time(raw if isinstance(raw, str) else "")
    except ValueError as exc:
        raise HeaderError("malformed", f"field {name!r}: {exc}") from exc


def _b64(doc: Any, name: str) -> bytes:
    raw = _get(doc, name)
    if raw is None:
        return b""
    try:
        return base64.b64decode(raw, validate=True)
    except (ValueError, TypeError) as exc:
        raise HeaderError("malformed", f"field {name!r} is not base64") from exc


def parse_block_id(doc: Any) -> BlockId:
    parts = _get(doc, "parts")
    return BlockId(_hex(doc, "hash", 32), _int(parts, "total"), _hex(parts, "hash", 32))


def parse_header(doc: Any) -> Header:
    version = _get(doc, "version")
    chain_id = _get(doc, "chain_id")
    if not isinstance(chain_id, str):
        raise HeaderError("malformed", "chain_id is not a string")
    time_s, time_nanos = _time(doc, "time")
    return Header(
        version_block=_int(version, "block"),
        version_app=_int(version, "app") if "app" in version else 0,
        chain_id=chain_id,
        height=_int(doc, "height"),
        time_s=time_s,
        time_nanos=time_nanos,
        last_block_id=parse_block_id(_get(doc, "last_block_id")),
        last_commit_hash=_hex(doc, "last_commit_hash", 32),
        data_hash=_hex(doc, "data_hash", 32),
        validators_hash=_hex(doc, "validators_hash", 32),
        next_validators_hash=_hex(doc, "next_validators_hash", 32),
        consensus_hash=_hex(doc, "consensus_hash", 32),
        app_hash=_hex(doc, "app_hash"),
        last_results_hash=_hex(doc, "last_results_hash", 32),
        evidence_hash=_hex(doc, "evidence_hash", 32),
        proposer_address=_hex(doc, "proposer_address", 20),
    )


def parse_commit(doc: Any) -> Commit:
    sigs_doc = _get(doc, "signatures")
    if not isinstance(sigs_doc, list):
        raise HeaderError("malformed", "commit signatures is not a list")
    sigs = []
    for s in sigs_doc:
        flag = _int(s, "block_id_flag")
        if flag == FLAG_ABSENT:
            sigs.append(CommitSig(flag, b"", 0, 0, b""))
            continue
        t_s, t_n = _time(s, "timestamp")
        sigs.append(CommitSig(flag, _hex(s, "validator_address", 20), t_s, t_n,
                              _b64(s, "signature")))
    return Commit(_int(doc, "height"), _int(doc, "round"), parse_block_id(_get(doc, "block_id")),
                  tuple(sigs))


def parse_validators(items: Any) -> ValidatorSet:
    if not isinstance(items, list) or not items:
        raise HeaderError("malformed", "validator list is empty or not a list")
    out = []
    for v in items:
        pk = _get(v, "pub_key")
        if _get(pk, "type") != ED25519_TYPE:
            raise HeaderError("malformed", f"unsupported validator key type {pk.get('type')!r}")
        pub = _b64(pk, "value")
        if len(pub) != 32:
            raise HeaderError("malformed", "validator key is not 32 bytes")
        power = _int(v, "voting_power")
        if power <= 0:
            raise HeaderError("malformed", "validator voting power must be positive")
        address = _hex(v, "address", 20)
        if address != address_of(pub):
            raise HeaderError("malformed", "validator address does not match its key")
        out.append(Validator(address, pub, power))
    return ValidatorSet(tuple(out))


def parse_light_block(signed_header: Any, validators: Any) -> LightBlock:
    """From `/commit`'s `signed_header` and `/validators`' `validators` list."""
    return LightBlock(parse_header(_get(signed_header, "header")),
                      parse_commit(_get(signed_header, "commit")), parse_validators(validators),
                      raw={"signed_header": signed_header, "validators": validators})


def genesis_validators(genesis: Any) -> ValidatorSet:
    """The validator set of a genesis document (`validators` with `power`), in set order.

    CometBFT orders a set by voting power descending, then address ascending; genesis
    files need not be in that order, so it is applied here.
    """
    items = _get(genesis, "validators")
    if not isinstance(items, list) or not items:
        raise HeaderError("malformed", "genesis has no validators")
    vals = []
    for v in items:
        pk = _get(v, "pub_key")
        if _get(pk, "type") != ED25519_TYPE:
            raise HeaderError("malformed", "unsupported genesis validator key type")
        pub = _b64(pk, "value")
        vals.append(Validator(address_of(pub), pub, _int(v, "power")))
    vals.sort(key=lambda v: (-v.power, v.address))
    return ValidatorSet(tuple(vals))
