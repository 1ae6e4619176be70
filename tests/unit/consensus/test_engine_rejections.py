"""Every envelope and vote rejection has its own code, in CheckTx and in FinalizeBlock.

FinalizeBlock is driven directly (as a byzantine proposer could), so none of these txs
ever passed CheckTx. Each case also asserts that the state did not change.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memledger.protocol.codes import Code
from memledger.protocol.envelope import encode_tx, sign_bytes
from memledger.protocol.limits import MAX_TX_BYTES
from memledger.protocol.pb import tx_pb2
from tests.support.chain import LocalChain, seeded_key

AGENT = seeded_key("agent")
OTHER = seeded_key("other")


@pytest.fixture()
def chain(tmp_path: Path) -> LocalChain:
    c = LocalChain(tmp_path / "chain")
    nonce = c.next_nonce(AGENT)
    results = c.block([c.builder(AGENT).submit(nonce, "m1", "water boils at 100C at sea level")])
    assert results[0].code == Code.OK
    return c


def _body(chain: LocalChain, nonce: int, **msg: object) -> tx_pb2.TxBody:
    return tx_pb2.TxBody(chain_id=chain.chain_id, nonce=nonce, **msg)  # type: ignore[arg-type]


def forged_signature(c: LocalChain) -> bytes:
    tx = tx_pb2.Tx.FromString(c.builder(AGENT).submit(5, "m2", "x y z"))
    tx.signature = bytes(64 - 1) + b"\x01"
    return tx.SerializeToString(deterministic=True)


def signature_by_other_key(c: LocalChain) -> bytes:
    tx = tx_pb2.Tx.FromString(c.builder(AGENT).submit(5, "m2", "x y z"))
    tx.signature = OTHER.sign(sign_bytes(tx.body)).signature
    return tx.SerializeToString(deterministic=True)


def wrong_chain(c: LocalChain) -> bytes:
    body = tx_pb2.TxBody(chain_id="other-chain", nonce=5,
                         memory_submit=tx_pb2.MemorySubmit(memory_id="m2"))
    return encode_tx(body, AGENT)


def replayed_nonce(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(1, "m2", "a replay of nonce one")


def nonce_zero(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(0, "m2", "nonce zero")


def non_canonical_envelope(c: LocalChain) -> bytes:
    raw = c.builder(AGENT).submit(5, "m2", "canonical?")
    return raw + b"\x08\x00"  # an unknown field 1 varint appended... re-encodes differently


def non_canonical_body(c: LocalChain) -> bytes:
    body = _body(c, 5, memory_submit=tx_pb2.MemorySubmit(memory_id="m2"))
    body_bytes = body.SerializeToString(deterministic=True) + b"\xa8\x06\x01"  # unknown field 101
    sig = AGENT.sign(sign_bytes(body_bytes)).signature
    return tx_pb2.Tx(body=body_bytes, public_key=bytes(AGENT.verify_key),
                     signature=sig).SerializeToString(deterministic=True)


def oversized(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "m2", "x" * MAX_TX_BYTES)


def garbage(c: LocalChain) -> bytes:
    return b"\xff\xff\xff\xff"


def bad_public_key(c: LocalChain) -> bytes:
    tx = tx_pb2.Tx.FromString(c.builder(AGENT).submit(5, "m2", "x"))
    tx.public_key = b"\x01" * 31
    return tx.SerializeToString(deterministic=True)


def empty_message(c: LocalChain) -> bytes:
    return encode_tx(_body(c, 5), AGENT)


def vote_by_non_validator(c: LocalChain) -> bytes:
    return c.builder(OTHER).vote(1, "m1")


def double_vote(c: LocalChain) -> bytes:
    v = c.validator_keys[0]
    assert c.block([c.builder(v).vote(c.next_nonce(v), "m1", "reject")])[0].code == Code.OK
    return c.builder(v).vote(c.next_nonce(v), "m1", "accept")


def vote_unknown_memory(c: LocalChain) -> bytes:
    return c.builder(c.validator_keys[0]).vote(1, "nope")


def vote_bad_decision(c: LocalChain) -> bytes:
    return encode_tx(_body(c, 1, memory_vote=tx_pb2.MemoryVote(memory_id="m1")),
                     c.validator_keys[0])


def content_hash_mismatch(c: LocalChain) -> bytes:
    msg = tx_pb2.MemorySubmit(memory_id="m2", domain="general", memory_type="fact",
                              content="abc", content_hash=b"\x00" * 32)
    return encode_tx(_body(c, 5, memory_submit=msg), AGENT)


def bad_memory_type(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "m2", "abc", memory_type="rumour")


def bad_memory_id(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "has space", "abc")


def id_too_long(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "a" * 129, "abc")


def bad_domain(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "m2", "abc", domain="")


def confidence_too_high(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "m2", "abc", confidence_ppm=1_000_001)


def too_many_tags(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "m2", "abc", tags=[f"t{i}" for i in range(33)])


def duplicate_tags(c: LocalChain) -> bytes:
    msg = tx_pb2.MemorySubmit(memory_id="m2", domain="general", memory_type="fact",
                              content="abc", tags=["a", "a"])
    import hashlib

    msg.content_hash = hashlib.sha256(b"abc").digest()
    return encode_tx(_body(c, 5, memory_submit=msg), AGENT)


def content_too_large(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "m2", "x" * (512 * 1024 + 1))


def empty_content(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "m2", "")


def id_conflict(c: LocalChain) -> bytes:
    return c.builder(AGENT).submit(5, "m1", "different content, same id")


def terminal_resubmit(c: LocalChain) -> bytes:
    for v in c.validator_keys[2:]:
        c.block([c.builder(v).vote(c.next_nonce(v), "m1")])
    assert c.memory("m1")["status"] == "committed"  # type: ignore[index]
    return c.builder(AGENT).submit(5, "m1", "water boils at 100C at sea level")


def vote_on_committed(c: LocalChain) -> bytes:
    for v in c.validator_keys[2:]:
        c.block([c.builder(v).vote(c.next_nonce(v), "m1")])
    return c.builder(c.validator_keys[0]).vote(9, "m1")


def domain_write_denied(c: LocalChain) -> bytes:
    assert c.block([c.builder(OTHER).submit(1, "o1", "mine", domain="private")])[0].code == 0
    return c.builder(AGENT).submit(5, "m2", "intrude", domain="private")


CASES: list[tuple[str, Callable[[LocalChain], bytes], Code]] = [
    ("forged signature", forged_signature, Code.BAD_SIGNATURE),
    ("signature by another key", signature_by_other_key, Code.BAD_SIGNATURE),
    ("wrong chain id", wrong_chain, Code.WRONG_CHAIN_ID),
    ("replayed nonce", replayed_nonce, Code.NONCE_REPLAYED),
    ("nonce zero", nonce_zero, Code.NONCE_ZERO),
    ("non-canonical envelope", non_canonical_envelope, Code.TX_NOT_CANONICAL),
    ("non-canonical body", non_canonical_body, Code.BODY_NOT_CANONICAL),
    ("oversized tx", oversized, Code.TX_TOO_LARGE),
    ("undecodable bytes", garbage, Code.TX_DECODE),
    ("short public key", bad_public_key, Code.BAD_PUBLIC_KEY),
    ("empty message", empty_message, Code.EMPTY_MESSAGE),
    ("vote by non-validator", vote_by_non_validator, Code.NOT_A_VALIDATOR),
    ("double vote", double_vote, Code.ALREADY_VOTED),
    ("vote on unknown memory", vote_unknown_memory, Code.MEMORY_NOT_FOUND),
    ("vote without decision", vote_bad_decision, Code.INVALID_DECISION),
    ("vote on committed memory", vote_on_committed, Code.MEMORY_NOT_PROPOSED),
    ("content hash mismatch", content_hash_mismatch, Code.CONTENT_HASH_MISMATCH),
    ("unknown memory type", bad_memory_type, Code.INVALID_MEMORY_TYPE),
    ("bad memory id", bad_memory_id, Code.INVALID_MEMORY_ID),
    ("memory id too long", id_too_long, Code.INVALID_MEMORY_ID),
    ("empty domain", bad_domain, Code.INVALID_DOMAIN),
    ("confidence above scale", confidence_too_high, Code.INVALID_CONFIDENCE),
    ("too many tags", too_many_tags, Code.TOO_MANY_TAGS),
    ("duplicate tags", duplicate_tags, Code.INVALID_TAG),
    ("content too large", content_too_large, Code.CONTENT_TOO_LARGE),
    ("empty content", empty_content, Code.EMPTY_CONTENT),
    ("id conflict", id_conflict, Code.MEMORY_ID_CONFLICT),
    ("terminal re-submit", terminal_resubmit, Code.MEMORY_TERMINAL),
    ("write into someone's domain", domain_write_denied, Code.DOMAIN_WRITE_DENIED),
]


@pytest.mark.parametrize(("name", "make", "code"), CASES, ids=[c[0] for c in CASES])
def test_rejected_in_check_tx_and_finalize_block(
    chain: LocalChain, name: str, make: Callable[[LocalChain], bytes], code: Code
) -> None:
    tx = make(chain)
    checked = chain.check(tx)
    assert checked.code == code, checked.log
    assert checked.codespace == "memledger"
    before_hash = chain.app.store.last_app_hash
    before_dump = chain.app.projection.dump()
    results = chain.block([tx])
    assert results[0].code == code, results[0].log
    assert results[0].codespace == "memledger"
    # Nothing changed: same app hash, same projection rows.
    assert chain.app_hashes[chain.height] == before_hash
    assert chain.app.projection.dump() == before_dump


def test_identical_resubmit_is_idempotent(chain: LocalChain) -> None:
    before = chain.memory("m1")
    tx = chain.builder(AGENT).submit(chain.next_nonce(AGENT), "m1",
                                     "water boils at 100C at sea level")
    assert chain.block([tx])[0].code == Code.OK
    assert chain.memory("m1") == before


def test_codes_are_distinct_and_documented() -> None:
    from memledger.protocol.codes import DESCRIPTIONS

    assert set(DESCRIPTIONS) == set(Code)
    assert len({int(c) for c in Code}) == len(Code)
    doc = (Path(__file__).parents[3] / "docs" / "CODES.md").read_text()
    from memledger.protocol.codes import QueryCode, markdown_table

    assert markdown_table(Code) in doc, "docs/CODES.md is stale: regenerate the table"
    assert markdown_table(QueryCode) in doc, "docs/CODES.md lacks the query codes"
