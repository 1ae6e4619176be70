"""A field newer than the chain's app version gets exactly the code the older binaries gave.

Those binaries had no such field: they kept its bytes as an unknown field (whatever they
were: UTF-8 or not, any wire type) and refused the body as not canonical (code 5). A
parser that knows the field checks it while it parses, so a `string` field holding
bytes that are not UTF-8 failed the decode (code 4) instead, and a node could not replay
a v4 chain holding such a tx (CometBFT's LastResultsHash covers every tx's code). The
gate now parses below a field's version with the schema of that time
(memledger.consensus.gate.schema).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import cast

import pytest
from nacl.signing import SigningKey

from memledger.consensus import versions
from memledger.consensus.block.execute import process_tx
from memledger.consensus.families.context import BlockInfo, KeyValueView
from memledger.consensus.gate.envelope import SignedTx, decode_tx
from memledger.consensus.gate.schema import body_class
from memledger.consensus.gate.txcache import DecodedTxCache
from memledger.protocol.codes import Code, TxError
from memledger.protocol.envelope import sign_bytes
from memledger.protocol.pb import tx_pb2
from tests.support.chain import LocalChain, seeded_key
from tests.support.views import NoState

CHAIN = "old-schema-chain"
KEY = seeded_key("old-schema-signer")
AGENT = seeded_key("old-schema-agent")

#: SHA-256 of tx.proto's serialized descriptor as the binaries before v5 had it (commit
#: e7c0d45^, memledger/protocol/pb/tx_pb2.py), as those of v5 to v8 had it (commit
#: 8dda6f0), as those of v9 had it, and as this binary has it (v10: MemorySubmit's
#: supersedes, origin and epoch, the Origin message, and the private-domain kinds).
PRE_V5_TX_PROTO = "ceae450cde642590323cbbd77832732058c862e8ef4f28dc525437a10f45e312"
V5_TX_PROTO = "15de13a6cd69896e1494f0256e9bba2a7ba62d4f891b273afff1baec805d2d41"
V9_TX_PROTO = "fae8357c3ac16365a76e20247856d77aaf23a4393bca9cb78718ee4a77f617b1"
V10_TX_PROTO = "22bd68fbd6695b081954abf18c431bb62cc438578285829ef0d45e0de0715795"


def _schema_digest(version: int) -> str:
    if version < 5:
        return PRE_V5_TX_PROTO
    if version < 9:
        return V5_TX_PROTO
    return V9_TX_PROTO if version < 10 else V10_TX_PROTO


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def fld(number: int, wire_type: int, payload: bytes) -> bytes:
    """One protobuf field: tag, then the length for wire type 2, then the payload."""
    head = uvarint(number << 3 | wire_type)
    return head + (uvarint(len(payload)) + payload if wire_type == 2 else payload)


def signed(key: SigningKey, body: bytes, *, corrupt_signature: bool = False) -> bytes:
    signature = bytearray(key.sign(sign_bytes(body)).signature)
    if corrupt_signature:
        signature[0] ^= 1
    return fld(1, 2, body) + fld(2, 2, bytes(key.verify_key)) + fld(3, 2, bytes(signature))


def gate(raw: bytes, app_version: int) -> Code | SignedTx:
    try:
        return decode_tx(raw, CHAIN, app_version=app_version)
    except TxError as err:
        return err.code


def test_each_version_parses_with_the_schema_its_binaries_had() -> None:
    for version in sorted(versions.SUPPORTED_APP_VERSIONS):
        schema = body_class(version)
        digest = hashlib.sha256(schema.DESCRIPTOR.file.serialized_pb).hexdigest()
        assert digest == _schema_digest(version), version
        assert (schema is tx_pb2.TxBody) == (version >= 10)
    assert hashlib.sha256(tx_pb2.DESCRIPTOR.serialized_pb).hexdigest() == V10_TX_PROTO, (
        "tx.proto changed: a new field or message needs its app version in versions.FIELDS "
        "(and the older binaries' answer for it tested here)")


# --------------------------------------------------------------------- every gated field
def field_cases() -> list[tuple[str, str, int, int]]:
    return [(kind, name, since, version) for (kind, name), since in versions.FIELDS.items()
            for version in sorted(versions.SUPPORTED_APP_VERSIONS)]


#: what the field's bytes are -> (the field's wire type, its payload)
PAYLOADS: dict[str, tuple[int, bytes]] = {
    "valid UTF-8": (2, b"because"),
    "invalid UTF-8": (2, b"\xff\xfe"),
    "a UTF-8 surrogate": (2, b"\xed\xa0\x80"),
    "a varint": (0, uvarint(7)),
    "fixed64": (1, b"\x00" * 8),
    "fixed32": (5, b"\x01" * 4),
}
#: at and after the field's version: the codes of today (a gate pass for a valid value)
FROM_ITS_VERSION: dict[str, Code | None] = {
    "valid UTF-8": None,
    "invalid UTF-8": Code.BODY_DECODE,
    "a UTF-8 surrogate": Code.BODY_DECODE,
    "a varint": Code.BODY_NOT_CANONICAL,
    "fixed64": Code.BODY_NOT_CANONICAL,
    "fixed32": Code.BODY_NOT_CANONICAL,
}
#: the same for a field holding a message (MemorySubmit.origin): these bytes are no valid
#: message, so every length-delimited payload fails the decode
FROM_ITS_VERSION_MESSAGE: dict[str, Code | None] = {
    **FROM_ITS_VERSION, "valid UTF-8": Code.BODY_DECODE,
}
#: the same for a varint field (MemorySubmit.epoch): another wire type is an unknown field
#: to today's parser too, so not canonical; a varint passes
FROM_ITS_VERSION_VARINT: dict[str, Code | None] = {
    what: Code.BODY_NOT_CANONICAL for what in FROM_ITS_VERSION} | {"a varint": None}


def body_setting(kind: str, name: str, wire_type: int, payload: bytes) -> bytes:
    """A body whose message (of `kind`) holds only field `name`, as these raw bytes."""
    member = tx_pb2.TxBody.DESCRIPTOR.fields_by_name[kind]
    field = member.message_type.fields_by_name[name]
    assert field.type in (field.TYPE_STRING, field.TYPE_MESSAGE, field.TYPE_UINT64), \
        f"{kind}.{name}: add this field type's cases"
    message = fld(field.number, wire_type, payload)
    return fld(1, 2, CHAIN.encode()) + fld(2, 0, uvarint(5)) + fld(member.number, 2, message)


def _expected(kind: str, name: str) -> dict[str, Code | None]:
    field = tx_pb2.TxBody.DESCRIPTOR.fields_by_name[kind].message_type.fields_by_name[name]
    if field.type == field.TYPE_MESSAGE:
        return FROM_ITS_VERSION_MESSAGE
    return FROM_ITS_VERSION_VARINT if field.type == field.TYPE_UINT64 else FROM_ITS_VERSION


def test_a_valid_origin_passes_the_gate_only_from_v10() -> None:
    origin = tx_pb2.Origin(chain_id="c", height=3, memory_id="m", author="ab")
    raw = signed(KEY, body_setting("memory_submit", "origin", 2, origin.SerializeToString()))
    passed = gate(raw, 10)
    assert isinstance(passed, SignedTx) and passed.fields_version == 10
    assert gate(raw, 9) == Code.BODY_NOT_CANONICAL


@pytest.mark.parametrize(("kind", "name", "since", "version"), field_cases())
def test_a_field_before_its_version_is_not_canonical_whatever_its_bytes(
        kind: str, name: str, since: int, version: int) -> None:
    block = BlockInfo(height=10, time_ns=10**18, chain_id=CHAIN, app_version=version)
    for what, (wire_type, payload) in PAYLOADS.items():
        raw = signed(KEY, body_setting(kind, name, wire_type, payload))
        answer = gate(raw, version)
        expected = _expected(kind, name)[what]
        if version < since:
            assert answer == Code.BODY_NOT_CANONICAL, (what, answer)
        elif expected is None:
            assert isinstance(answer, SignedTx), (what, answer)
            assert answer.fields_version == since
        else:
            assert answer == expected, (what, answer)
        # the same answer when the node decoded the tx before, under the latest rules
        cache = DecodedTxCache()
        latest = BlockInfo(height=9, time_ns=10**18, chain_id=CHAIN,
                           app_version=versions.LATEST_APP_VERSION)
        process_tx(cast("KeyValueView", NoState()), latest, raw, apply=False, decoded=cache)
        outcome = process_tx(cast("KeyValueView", NoState()), block, raw, apply=False,
                             decoded=cache)
        if isinstance(answer, Code):
            assert outcome.code == answer, (what, outcome.log)
        else:
            assert outcome.code not in (Code.BODY_DECODE, Code.BODY_NOT_CANONICAL), what


@pytest.mark.parametrize("version", sorted(versions.SUPPORTED_APP_VERSIONS))
def test_a_message_kind_unknown_to_tx_proto_is_not_canonical_at_every_version(
        version: int) -> None:
    """A body with a further kind (field 99) is what a later kind would look like to this
    binary: an unknown field, refused as not canonical before the chain id and signature
    are looked at, whatever its bytes. (Kinds newer than a version, like the v10
    private-domain kinds 21 and 22, are such unknown fields below it: the next test.)"""
    vote = fld(1, 2, b"m1") + fld(2, 0, uvarint(1))
    head = fld(1, 2, CHAIN.encode()) + fld(2, 0, uvarint(5))
    for extra in (fld(99, 2, b"\xff\xfe"), fld(99, 2, vote), fld(99, 0, uvarint(1))):
        assert gate(signed(KEY, head + fld(11, 2, vote) + extra), version) == \
            Code.BODY_NOT_CANONICAL
        assert gate(signed(KEY, head + extra), version) == Code.BODY_NOT_CANONICAL


@pytest.mark.parametrize("version", sorted(versions.SUPPORTED_APP_VERSIONS))
def test_the_private_domain_kinds_are_unknown_fields_before_v10(version: int) -> None:
    head = fld(1, 2, CHAIN.encode()) + fld(2, 0, uvarint(5))
    private = tx_pb2.DomainPrivate(domain="d").SerializeToString()
    for number in (21, 22):
        for extra in (fld(number, 2, b"\xff\xfe"), fld(number, 2, private),
                      fld(number, 0, uvarint(1))):
            answer = gate(signed(KEY, head + extra), version)
            if version < 10:
                assert answer == Code.BODY_NOT_CANONICAL, (number, extra)
            else:
                assert answer != Code.BODY_NOT_CANONICAL or extra[-1:] == b"\x01", (number, extra)


# ---------------------------------------------------------------------------- replay
def vote_body(chain_id: str, nonce: int, vote: bytes) -> bytes:
    return fld(1, 2, chain_id.encode()) + fld(2, 0, uvarint(nonce)) + fld(11, 2, vote)


M1_ACCEPT = fld(1, 2, b"m1") + fld(2, 0, uvarint(1))
#: (case, MemoryVote bytes, the code the binary before v5 (e7c0d45^) gave in a v4 block)
VOTES: list[tuple[str, bytes, Code]] = [
    ("reason valid UTF-8", M1_ACCEPT + fld(3, 2, b"because"), Code.BODY_NOT_CANONICAL),
    ("reason invalid UTF-8", M1_ACCEPT + fld(3, 2, b"\xff\xfe"), Code.BODY_NOT_CANONICAL),
    ("reason a UTF-8 surrogate", M1_ACCEPT + fld(3, 2, b"\xed\xa0\x80"),
     Code.BODY_NOT_CANONICAL),
    ("reason as a varint", M1_ACCEPT + fld(3, 0, uvarint(7)), Code.BODY_NOT_CANONICAL),
    ("reason as fixed64", M1_ACCEPT + fld(3, 1, b"\x00" * 8), Code.BODY_NOT_CANONICAL),
    ("reason as fixed32", M1_ACCEPT + fld(3, 5, b"\x01" * 4), Code.BODY_NOT_CANONICAL),
    ("reason as a group", M1_ACCEPT + uvarint(3 << 3 | 3) + uvarint(3 << 3 | 4),
     Code.BODY_NOT_CANONICAL),
    ("reason first", fld(3, 2, b"\xff") + M1_ACCEPT, Code.BODY_NOT_CANONICAL),
    ("reason twice", M1_ACCEPT + fld(3, 2, b"ok") + fld(3, 2, b"\xff"),
     Code.BODY_NOT_CANONICAL),
    ("reason empty", M1_ACCEPT + fld(3, 2, b""), Code.BODY_NOT_CANONICAL),
    # bytes that no parser can read stay a decode error, new field or not
    ("reason overruns", M1_ACCEPT + uvarint(3 << 3 | 2) + uvarint(9) + b"\xff",
     Code.BODY_DECODE),
    ("reason wire type 7", M1_ACCEPT + uvarint(3 << 3 | 7), Code.BODY_DECODE),
    # a field the old schema knows still fails its own decode first
    ("reason with a bad memory id",
     fld(1, 2, b"\xff") + fld(2, 0, uvarint(1)) + fld(3, 2, b"\xff\xfe"), Code.BODY_DECODE),
    ("no reason", M1_ACCEPT, Code.OK),
]
BAD_REASON = M1_ACCEPT + fld(3, 2, b"\xff\xfe")
#: the app hash after that block, from the binary before v5
PRE_V5_APP_HASH = "61f151d383376b702f9559ffcaf711538dc0e25ae6200f9df0fd796649f7e275"


def replay_block(chain: LocalChain) -> list[tuple[str, bytes, Code]]:
    """The pinned v4 block: votes by validator 3 on m1, then whole-body cases."""
    key = chain.validator_keys[3]
    txs = [(name, signed(key, vote_body(chain.chain_id, 100 + i, vote)), code)
           for i, (name, vote, code) in enumerate(VOTES)]
    return [*txs,
            ("bad reason, other chain", signed(key, vote_body("other-chain", 200, BAD_REASON)),
             Code.BODY_NOT_CANONICAL),
            ("bad reason, bad signature",
             signed(key, vote_body(chain.chain_id, 201, BAD_REASON), corrupt_signature=True),
             Code.BODY_NOT_CANONICAL),
            ("bad reason, nonce 0", signed(key, vote_body(chain.chain_id, 0, BAD_REASON)),
             Code.BODY_NOT_CANONICAL),
            ("unknown body field 21",
             signed(key, vote_body(chain.chain_id, 202, M1_ACCEPT) + fld(21, 2, b"\xff\xfe")),
             Code.BODY_NOT_CANONICAL)]


def test_a_v4_block_replays_with_the_pre_v5_binarys_codes_and_app_hash(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "chain", app_state={"app_version": 4})
    assert chain.block([chain.builder(AGENT).submit(1, "m1", "water boils at 100C at sea level")]
                       )[0].code == 0
    cases = replay_block(chain)
    for name, raw, code in cases:  # CheckTx answers the same (and caches what passed)
        assert chain.check(raw).code == code, name
    response = chain.finalize([raw for _, raw, _ in cases])
    got = {name: Code(result.code) for (name, _, _), result in zip(cases, response.tx_results,
                                                                    strict=True)}
    assert got == {name: code for name, _, code in cases}
    assert response.app_hash.hex() == PRE_V5_APP_HASH
    chain.close()
