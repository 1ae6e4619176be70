"""Adversarial transactions: a catalogue of attacks, each with its exact result code.

Every attack starts from the same adversarial world (tests/fuzz/world.py: memories in
every status, owned and scoped domains, grants, a co-commit, open and executed
proposals, a removed validator, an account at nonce 2^64-1). Each one is checked twice:
in CheckTx against committed state, and in FinalizeBlock directly (as a byzantine
proposer would include it, never having passed CheckTx). Both must answer the exact
code, and the block holding only the attack must leave the app hash, the canonical
key/value state and the SQL projection exactly as they were.

The block-level table covers what only a proposer can do (duplicates, conflicting txs,
garbage next to honest txs); the regression tests at the end reproduce the bugs this
suite found (fixed since) and pin the fixed behaviour.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from nacl.signing import SigningKey

from memledger.protocol.codes import CODESPACE, Code
from memledger.protocol.envelope import TX_SIGN_PREFIX, sign_bytes
from memledger.protocol.limits import MAX_CONTENT_BYTES, MAX_REASON_BYTES, MAX_TX_BYTES
from memledger.protocol.pb import abci_pb2 as pb
from memledger.protocol.pb import tx_pb2
from memledger.sdk.txbuilder import (
    COCOMMIT_SIGN_PREFIX,
    TxBuilder,
    cocommit_core,
    param_proposal,
    scope_proposal,
    sign_cocommit,
    upgrade_proposal,
    validator_proposal,
)
from tests.fuzz import world
from tests.fuzz.common import len_field, tag, uvarint
from tests.fuzz.world import (
    C1,
    C2,
    CORR,
    MAX_NONCE,
    MAXED,
    MODDER,
    OWNER,
    READER,
    S1,
    S2,
    STRANGER,
    WRITER,
    World,
)
from tests.support.chain import GENESIS_TIME_S, HaltCalled, LocalChain

ED25519_L = 2**252 + 27742317777372353535851937790883648493


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> world.Template:
    return world.make_template(tmp_path_factory.mktemp("adversarial") / "template")


@pytest.fixture()
def w(template: world.Template, tmp_path: Path) -> Iterator[World]:
    clone = world.clone(template, tmp_path / "world")
    yield clone
    clone.close()


# ------------------------------------------------------------------ byte-level helpers
def pk(key: SigningKey) -> bytes:
    return bytes(key.verify_key)


def envelope(body: bytes, public_key: bytes, signature: bytes) -> bytes:
    return tx_pb2.Tx(body=body, public_key=public_key, signature=signature).SerializeToString(
        deterministic=True)


def signed(key: SigningKey, body: bytes) -> bytes:
    """Sign arbitrary body bytes properly: the attack is in the body, not the signature."""
    return envelope(body, pk(key), key.sign(sign_bytes(body)).signature)


def parts(raw: bytes) -> tx_pb2.Tx:
    return tx_pb2.Tx.FromString(raw)


def with_signature(raw: bytes, signature: bytes, public_key: bytes | None = None) -> bytes:
    env = parts(raw)
    return envelope(env.body, env.public_key if public_key is None else public_key, signature)


def flip(data: bytes, index: int, bit: int = 0) -> bytes:
    return data[:index] + bytes([data[index] ^ (1 << bit)]) + data[index + 1:]


def chain_field(chain_id: str = "memledger-test") -> bytes:
    return len_field(1, chain_id.encode())


def vote_field(memory_id: str = "m-proposed") -> bytes:
    return len_field(11, tx_pb2.MemoryVote(memory_id=memory_id,
                                           decision=tx_pb2.DECISION_ACCEPT).SerializeToString())


def submit_msg(memory_id: str, content: str, **kw: object) -> tx_pb2.MemorySubmit:
    return tx_pb2.MemorySubmit(memory_id=memory_id, domain=str(kw.get("domain", "general")),
                               memory_type="fact", content=content,
                               content_hash=hashlib.sha256(content.encode()).digest(),
                               tags=list(cast("Iterable[str]", kw.get("tags", []))))


def nested_groups(depth: int) -> bytes:
    return tag(99, 3) * depth + tag(99, 4) * depth


def core(w: World, keys: list[SigningKey], **kw: object) -> bytes:
    return cocommit_core(w.chain.chain_id, "a joint claim under attack",
                         [pk(k) for k in keys], **kw)  # type: ignore[arg-type]


def sigs(c: bytes, keys: list[SigningKey]) -> list[tuple[bytes, bytes]]:
    return sorted(sign_cocommit(k, c) for k in keys)


def good_submit(w: World) -> bytes:
    return w.tx(OWNER, "submit", "fz-attack", "an honest looking memory")


# ------------------------------------------------------------------ attacks
# Each attack returns the tx to try; setup blocks it runs first are part of the world.
Attack = Callable[[World], bytes]


def sig_r_bit_flip(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, flip(parts(raw).signature, 5, 3))


def sig_s_bit_flip(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, flip(parts(raw).signature, 40, 1))


def sig_s_plus_l(w: World) -> bytes:
    """Malleated S: S + L verifies under a lax verifier; libsodium rejects it."""
    raw = good_submit(w)
    sig = parts(raw).signature
    s = int.from_bytes(sig[32:], "little") + ED25519_L
    return with_signature(raw, sig[:32] + s.to_bytes(32, "little"))


def sig_by_other_key(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, STRANGER.sign(sign_bytes(parts(raw).body)).signature)


def pubkey_swapped(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, parts(raw).signature, pk(STRANGER))


def sig_truncated(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, parts(raw).signature[:63])


def sig_padded(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, parts(raw).signature + b"\x00")


def sig_empty(w: World) -> bytes:
    return with_signature(good_submit(w), b"")


def small_order_key(w: World) -> bytes:
    """All-zero public key (a small-order point) with an all-zero signature."""
    return envelope(parts(good_submit(w)).body, bytes(32), bytes(64))


def pubkey_33_bytes(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, parts(raw).signature, pk(OWNER) + b"\x00")


def sig_without_domain_prefix(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, OWNER.sign(parts(raw).body).signature)


def sig_with_cocommit_prefix(w: World) -> bytes:
    raw = good_submit(w)
    return with_signature(raw, OWNER.sign(COCOMMIT_SIGN_PREFIX + parts(raw).body).signature)


def cross_chain_replay(w: World) -> bytes:
    other = TxBuilder(OWNER, "memledger-other")
    return other.submit(w.chain.next_nonce(OWNER), "fz-attack", "valid on another chain")


def chain_id_trailing_space(w: World) -> bytes:
    return TxBuilder(OWNER, w.chain.chain_id + " ").submit(
        w.chain.next_nonce(OWNER), "fz-attack", "almost the right chain")


def exact_replay(w: World) -> bytes:
    raw = w.tx(OWNER, "submit", "fz-replayed", "committed once")
    assert w.chain.block([raw])[0].code == 0
    return raw


def nonce_reuse_new_body(w: World) -> bytes:
    nonce = w.chain.next_nonce(OWNER)
    assert w.chain.block([w.chain.builder(OWNER).submit(nonce, "fz-n1", "first")])[0].code == 0
    return w.chain.builder(OWNER).submit(nonce, "fz-n2", "same nonce, other body")


def nonce_below_last(w: World) -> bytes:
    return w.chain.builder(OWNER).submit(1, "fz-attack", "an old nonce")


def nonce_zero(w: World) -> bytes:
    return w.chain.builder(OWNER).submit(0, "fz-attack", "nonce zero")


def nonce_after_max(w: World) -> bytes:
    """MAXED already committed nonce 2^64-1: nothing it signs can ever pass again."""
    return w.chain.builder(MAXED).submit(MAX_NONCE, "fz-attack", "no nonce is left")


def nonce_overlong_varint(w: World) -> bytes:
    body = chain_field() + tag(2, 0) + b"\x85\x80\x00" + vote_field()  # 5, in three bytes
    return signed(w.validators[3], body)


def nonce_beyond_64_bits(w: World) -> bytes:
    body = chain_field() + tag(2, 0) + b"\xff" * 9 + b"\x03" + vote_field()
    return signed(w.validators[3], body)


def nonce_eleven_byte_varint(w: World) -> bytes:
    body = chain_field() + tag(2, 0) + b"\xff" * 10 + b"\x01" + vote_field()
    return signed(w.validators[3], body)


def envelope_trailing_unknown(w: World) -> bytes:
    return good_submit(w) + len_field(4, b"extra")


def envelope_body_duplicated(w: World) -> bytes:
    raw = good_submit(w)
    return len_field(1, b"decoy body") + raw


def envelope_fields_reordered(w: World) -> bytes:
    env = parts(good_submit(w))
    return (len_field(2, env.public_key) + len_field(1, env.body) + len_field(3, env.signature))


def body_unknown_field_in_oneof_range(w: World) -> bytes:
    """Field 21 is inside the msg oneof's number range but not defined (a future kind)."""
    body = chain_field() + tag(2, 0) + uvarint(w.chain.next_nonce(OWNER)) + len_field(21, b"")
    return signed(OWNER, body)


def body_two_oneof_members(w: World) -> bytes:
    v = w.validators[3]
    corroborate = len_field(13, tx_pb2.MemoryCorroborate(memory_id="v-committed")
                            .SerializeToString())
    body = chain_field() + tag(2, 0) + uvarint(w.chain.next_nonce(v)) + vote_field() + corroborate
    return signed(v, body)


def body_duplicated_chain_id(w: World) -> bytes:
    v = w.validators[3]
    body = chain_field() + chain_field() + tag(2, 0) + uvarint(w.chain.next_nonce(v)) + \
        vote_field()
    return signed(v, body)


def nested_explicit_default(w: World) -> bytes:
    """confidence_ppm = 0 encoded explicitly inside MemorySubmit: same meaning, new bytes."""
    msg = submit_msg("fz-attack", "explicit zero").SerializeToString(deterministic=True)
    body = chain_field() + tag(2, 0) + uvarint(w.chain.next_nonce(OWNER)) + \
        len_field(10, msg + tag(6, 0) + b"\x00")
    return signed(OWNER, body)


def envelope_truncated(w: World) -> bytes:
    raw = good_submit(w)
    return raw[: len(raw) - 7]


def body_truncated(w: World) -> bytes:
    body = parts(good_submit(w)).body
    return signed(OWNER, body[: len(body) - 3])


def chain_id_invalid_utf8(w: World) -> bytes:
    v = w.validators[3]
    body = len_field(1, b"memledger-\xc3\x28") + tag(2, 0) + uvarint(w.chain.next_nonce(v)) + \
        vote_field()
    return signed(v, body)


def content_encoded_surrogate(w: World) -> bytes:
    """UTF-8 of a lone surrogate (ED A0 80) in a string field: not valid UTF-8."""
    placeholder = "\u4e00"  # three UTF-8 bytes, swapped for ED A0 80 after encoding
    body = tx_pb2.TxBody(chain_id=w.chain.chain_id, nonce=w.chain.next_nonce(OWNER),
                         memory_submit=submit_msg("fz-attack", f"a{placeholder}b"))
    raw_body = body.SerializeToString(deterministic=True).replace(
        placeholder.encode(), b"\xed\xa0\x80")
    return signed(OWNER, raw_body)


def body_deep_nesting(w: World) -> bytes:
    return signed(OWNER, parts(good_submit(w)).body + nested_groups(200))


def envelope_deep_nesting(w: World) -> bytes:
    return good_submit(w) + nested_groups(200)


def oversized_tx(w: World) -> bytes:
    return w.tx(OWNER, "submit", "fz-attack", "x" * MAX_TX_BYTES)


def empty_tx(w: World) -> bytes:
    return b""


def body_without_message(w: World) -> bytes:
    return signed(OWNER, tx_pb2.TxBody(chain_id=w.chain.chain_id,
                                       nonce=w.chain.next_nonce(OWNER)).SerializeToString())


def content_over_limit(w: World) -> bytes:
    return w.tx(OWNER, "submit", "fz-attack", "y" * (MAX_CONTENT_BYTES + 1))


def memory_id_with_nul(w: World) -> bytes:
    return w.tx(OWNER, "submit", "m-proposed\x00x", "compound key splitting")


def domain_with_nul(w: World) -> bytes:
    return w.tx(OWNER, "submit", "fz-attack", "compound key splitting", domain="vault\x00x")


def tag_with_nul(w: World) -> bytes:
    return w.tx(OWNER, "submit", "fz-attack", "tag splitting", tags=["a\x00b"])


def content_with_nul(w: World) -> bytes:
    return w.tx(OWNER, "submit", "fz-attack", "text\x00more text")


def hash_of_other_content(w: World) -> bytes:
    msg = submit_msg("fz-attack", "what was signed")
    msg.content_hash = hashlib.sha256(b"something else").digest()
    return signed(OWNER, w.body(OWNER, memory_submit=msg).SerializeToString(deterministic=True))


def vote_on_deprecated(w: World) -> bytes:
    return w.tx(w.validators[1], "vote", "v-deprecated", "accept")


def vote_on_challenged(w: World) -> bytes:
    return w.tx(w.validators[1], "vote", "v-challenged", "reject")


def vote_on_cocommit(w: World) -> bytes:
    return w.tx(w.validators[1], "vote", w.cocommit_id, "reject")


def vote_by_removed_validator(w: World) -> bytes:
    assert w.chain.height >= w.removed_at
    return w.tx(w.validators[0], "vote", "m-proposed", "accept")


def vote_by_scope_member_unscoped(w: World) -> bytes:
    return w.tx(S1, "vote", "m-proposed", "accept")


def vote_by_validator_on_scoped(w: World) -> bytes:
    return w.tx(w.validators[3], "vote", "s-proposed", "accept")


def vote_unknown_decision(w: World) -> bytes:
    v = w.validators[3]
    vote = tx_pb2.MemoryVote(memory_id="m-proposed", decision=7)  # type: ignore[arg-type]
    return signed(v, w.body(v, memory_vote=vote).SerializeToString(deterministic=True))


def double_vote(w: World) -> bytes:
    v = w.validators[3]
    assert w.chain.block([w.tx(v, "vote", "m-proposed", "abstain")])[0].code == 0
    return w.tx(v, "vote", "m-proposed", "accept")


def vote_huge_id(w: World) -> bytes:
    return w.tx(w.validators[3], "vote", "m" * 600, "accept")


def cocommit_duplicate_keys(w: World) -> bytes:
    c = core(w, [C1, C1])
    return w.tx(C1, "cocommit", c, sigs(c, [C1, C1]))


def cocommit_zero_key(w: World) -> bytes:
    c = cocommit_core(w.chain.chain_id, "with a zero key", sorted([bytes(32), pk(C1)]))
    return w.tx(C1, "cocommit", c, sorted([(bytes(32), bytes(64)), sign_cocommit(C1, c)]))


def cocommit_single(w: World) -> bytes:
    c = core(w, [C1])
    return w.tx(C1, "cocommit", c, sigs(c, [C1]))


def cocommit_by_outsider(w: World) -> bytes:
    c = core(w, [C1, C2])
    return w.tx(STRANGER, "cocommit", c, sigs(c, [C1, C2]))


def cocommit_forged_coauthor(w: World) -> bytes:
    c = core(w, [C1, C2])
    forged = [(k, s if k == pk(C1) else STRANGER.sign(COCOMMIT_SIGN_PREFIX + c).signature)
              for k, s in sigs(c, [C1, C2])]
    return w.tx(C1, "cocommit", c, forged)


def cocommit_wrong_order(w: World) -> bytes:
    c = core(w, [C1, C2])
    return w.tx(C1, "cocommit", c, list(reversed(sigs(c, [C1, C2]))))


def cocommit_other_chain(w: World) -> bytes:
    c = cocommit_core("memledger-other", "joint claim", sorted([pk(C1), pk(C2)]))
    return w.tx(C1, "cocommit", c, sigs(c, [C1, C2]))


def cocommit_replay(w: World) -> bytes:
    c = w.extra["cocommit_core"]
    return w.tx(C2, "cocommit", c, sigs(c, [C1, C2]))


def cocommit_expired(w: World) -> bytes:
    c = core(w, [C1, C2], not_after_unix_ns=GENESIS_TIME_S * 10**9)
    return w.tx(C1, "cocommit", c, sigs(c, [C1, C2]))


def cocommit_scoped(w: World) -> bytes:
    c = cocommit_core(w.chain.chain_id, "into a scope", sorted([pk(S1), pk(S2)]), domain="ops")
    return w.tx(S1, "cocommit", c, sigs(c, [S1, S2]))


def cocommit_core_unknown_field(w: World) -> bytes:
    c = core(w, [C1, C2]) + len_field(40, b"x")
    return w.tx(C1, "cocommit", c, sigs(c, [C1, C2]))


def cocommit_core_garbage(w: World) -> bytes:
    c = b"\xff\xff\xff"
    return w.tx(C1, "cocommit", c, sigs(c, [C1, C2]))


def challenge_by_stranger(w: World) -> bytes:
    return w.tx(STRANGER, "challenge", "v-committed", "I disagree")


def challenge_by_writer(w: World) -> bytes:
    return w.tx(WRITER, "challenge", "v-committed", "write is not modify")


def challenge_by_reader(w: World) -> bytes:
    return w.tx(READER, "challenge", "v-committed", "read is not modify")


def challenge_twice(w: World) -> bytes:
    return w.tx(OWNER, "challenge", "v-challenged", "again")


def challenge_reason_too_long(w: World) -> bytes:
    return w.tx(OWNER, "challenge", "v-committed", "r" * (MAX_REASON_BYTES + 1))


def challenge_proposed(w: World) -> bytes:
    return w.tx(OWNER, "challenge", "m-proposed", "not committed yet")


def reinstate_by_stranger(w: World) -> bytes:
    return w.tx(STRANGER, "reinstate", "v-challenged")


def reinstate_by_opener(w: World) -> bytes:
    return w.tx(OWNER, "reinstate", "v-challenged")


def reinstate_committed(w: World) -> bytes:
    return w.tx(MODDER, "reinstate", "v-committed")


def corroborate_own(w: World) -> bytes:
    return w.tx(OWNER, "corroborate", "v-committed")


def corroborate_by_coauthor(w: World) -> bytes:
    return w.tx(C2, "corroborate", w.cocommit_id)


def corroborate_twice(w: World) -> bytes:
    return w.tx(CORR, "corroborate", "v-corroborated")


def corroborate_deprecated(w: World) -> bytes:
    return w.tx(CORR, "corroborate", "v-deprecated")


def propose_by_stranger(w: World) -> bytes:
    return w.tx(STRANGER, "propose", param_proposal("gov_voting_period", 7))


def propose_by_removed_validator(w: World) -> bytes:
    return w.tx(w.validators[0], "propose", param_proposal("gov_voting_period", 7))


def gov_vote_by_outsider(w: World) -> bytes:
    return w.tx(S1, "gov_vote", "p2", "accept")


def gov_vote_on_executed(w: World) -> bytes:
    return w.tx(w.validators[1], "gov_vote", "p1", "reject")


def gov_vote_unknown(w: World) -> bytes:
    return w.tx(w.validators[1], "gov_vote", "p99", "accept")


def upgrade_current_version(w: World) -> bytes:
    return w.tx(w.validators[1], "propose",
                upgrade_proposal("memledger-v1", 1, w.chain.height + 100))


def upgrade_version_zero(w: World) -> bytes:
    return w.tx(w.validators[1], "propose",
                upgrade_proposal("memledger-v0", 0, w.chain.height + 100))


def upgrade_too_soon(w: World) -> bytes:
    return w.tx(w.validators[1], "propose", upgrade_proposal("memledger-v2", 2,
                                                               w.chain.height + 2))


def upgrade_bad_name(w: World) -> bytes:
    return w.tx(w.validators[1], "propose",
                upgrade_proposal("v2 with spaces", 2, w.chain.height + 100))


def validator_removal_over_a_third(w: World) -> bytes:
    return w.tx(w.validators[1], "propose", validator_proposal(pk(w.validators[3]), 0))


def validator_short_key(w: World) -> bytes:
    return w.tx(w.validators[1], "propose", validator_proposal(bytes(31), 5))


def validator_power_overflow(w: World) -> bytes:
    return w.tx(w.validators[1], "propose", validator_proposal(pk(STRANGER), 2**40 + 1))


def validator_remove_stranger(w: World) -> bytes:
    return w.tx(w.validators[1], "propose", validator_proposal(pk(STRANGER), 0))


def param_unknown(w: World) -> bytes:
    return w.tx(w.validators[1], "propose", param_proposal("shared_domains", 1))


def param_out_of_range(w: World) -> bytes:
    return w.tx(w.validators[1], "propose", param_proposal("gov_voting_period", 2**64 - 1))


def cancel_others_proposal(w: World) -> bytes:
    return w.tx(w.validators[3], "gov_cancel", "p2")


def scope_over_shared_domain(w: World) -> bytes:
    return w.tx(w.validators[1], "propose",
                scope_proposal("create", "grab", ["general"], [(pk(S1), 1)]))


def scope_over_owned_domain(w: World) -> bytes:
    return w.tx(w.validators[1], "propose",
                scope_proposal("create", "grab", ["vault"], [(pk(S1), 1)]))


def scope_already_exists(w: World) -> bytes:
    return w.tx(w.validators[1], "propose",
                scope_proposal("create", "ops", ["ops2"], [(pk(S1), 1)]))


def grant_by_writer(w: World) -> bytes:
    return w.tx(WRITER, "grant", "vault", pk(STRANGER), "write")


def grant_by_modder(w: World) -> bytes:
    return w.tx(MODDER, "grant", "vault", pk(STRANGER), "modify")


def grant_in_shared(w: World) -> bytes:
    return w.tx(OWNER, "grant", "general", pk(STRANGER), "write")


def grant_in_scoped(w: World) -> bytes:
    return w.tx(S1, "grant", "ops", pk(STRANGER), "write")


def grant_to_self(w: World) -> bytes:
    return w.tx(OWNER, "grant", "vault", pk(OWNER), "modify")


def grant_to_short_key(w: World) -> bytes:
    return w.tx(OWNER, "grant", "vault", bytes(31), "read")


def grant_unknown_level(w: World) -> bytes:
    grant = tx_pb2.AccessGrant(domain="vault", grantee=pk(STRANGER),
                               level=9)  # type: ignore[arg-type]
    return signed(OWNER, w.body(OWNER, access_grant=grant).SerializeToString(deterministic=True))


def grant_expired(w: World) -> bytes:
    return w.tx(OWNER, "grant", "vault", pk(STRANGER), "write", w.chain.height)


def revoke_missing(w: World) -> bytes:
    return w.tx(OWNER, "revoke", "vault", pk(STRANGER))


def revoke_by_non_owner(w: World) -> bytes:
    return w.tx(MODDER, "revoke", "vault", pk(READER))


def write_with_read_grant(w: World) -> bytes:
    return w.tx(READER, "submit", "fz-attack", "read grant only", domain="vault")


def write_scope_as_outsider(w: World) -> bytes:
    return w.tx(STRANGER, "submit", "fz-attack", "not a member", domain="ops")


def hijack_memory_id(w: World) -> bytes:
    return w.tx(STRANGER, "submit", "m-proposed", "replacement content")


def resubmit_deprecated(w: World) -> bytes:
    return w.tx(OWNER, "submit", "v-deprecated", "world memory v-deprecated", domain="vault")


ATTACKS: list[tuple[str, Attack, Code]] = [
    # signatures and keys
    ("signature R bit flipped", sig_r_bit_flip, Code.BAD_SIGNATURE),
    ("signature S bit flipped", sig_s_bit_flip, Code.BAD_SIGNATURE),
    ("signature S + L (non-canonical S)", sig_s_plus_l, Code.BAD_SIGNATURE),
    ("signature by another key", sig_by_other_key, Code.BAD_SIGNATURE),
    ("public key swapped", pubkey_swapped, Code.BAD_SIGNATURE),
    ("signature truncated to 63 bytes", sig_truncated, Code.BAD_SIGNATURE),
    ("signature padded to 65 bytes", sig_padded, Code.BAD_SIGNATURE),
    ("empty signature", sig_empty, Code.BAD_SIGNATURE),
    ("small-order public key", small_order_key, Code.BAD_SIGNATURE),
    ("33-byte public key", pubkey_33_bytes, Code.BAD_PUBLIC_KEY),
    ("signature without the tx domain prefix", sig_without_domain_prefix, Code.BAD_SIGNATURE),
    ("signature under the co-commit prefix", sig_with_cocommit_prefix, Code.BAD_SIGNATURE),
    # chain id and nonces
    ("cross-chain replay", cross_chain_replay, Code.WRONG_CHAIN_ID),
    ("chain id with a trailing space", chain_id_trailing_space, Code.WRONG_CHAIN_ID),
    ("exact replay of a committed tx", exact_replay, Code.NONCE_REPLAYED),
    ("nonce reused with another body", nonce_reuse_new_body, Code.NONCE_REPLAYED),
    ("nonce below the last one", nonce_below_last, Code.NONCE_REPLAYED),
    ("nonce zero", nonce_zero, Code.NONCE_ZERO),
    ("any nonce after 2^64-1", nonce_after_max, Code.NONCE_REPLAYED),
    ("nonce as an overlong varint", nonce_overlong_varint, Code.BODY_NOT_CANONICAL),
    ("nonce varint beyond 64 bits", nonce_beyond_64_bits, Code.BODY_NOT_CANONICAL),
    ("nonce as an 11-byte varint", nonce_eleven_byte_varint, Code.BODY_DECODE),
    # canonical form, decoding, size
    ("unknown field appended to the envelope", envelope_trailing_unknown, Code.TX_NOT_CANONICAL),
    ("envelope body field duplicated", envelope_body_duplicated, Code.TX_NOT_CANONICAL),
    ("envelope fields reordered", envelope_fields_reordered, Code.TX_NOT_CANONICAL),
    ("unknown kind in the oneof number range", body_unknown_field_in_oneof_range,
     Code.BODY_NOT_CANONICAL),
    ("two oneof members in one body", body_two_oneof_members, Code.BODY_NOT_CANONICAL),
    ("duplicated chain id field", body_duplicated_chain_id, Code.BODY_NOT_CANONICAL),
    ("explicit default value in a nested message", nested_explicit_default,
     Code.BODY_NOT_CANONICAL),
    ("truncated envelope", envelope_truncated, Code.TX_DECODE),
    ("truncated body (re-signed)", body_truncated, Code.BODY_DECODE),
    ("invalid UTF-8 in the chain id", chain_id_invalid_utf8, Code.BODY_DECODE),
    ("UTF-8-encoded surrogate in content", content_encoded_surrogate, Code.BODY_DECODE),
    ("200 nested unknown groups in the body", body_deep_nesting, Code.BODY_DECODE),
    ("200 nested unknown groups in the envelope", envelope_deep_nesting, Code.TX_DECODE),
    ("tx over 1 MiB", oversized_tx, Code.TX_TOO_LARGE),
    ("empty tx bytes", empty_tx, Code.WRONG_CHAIN_ID),
    ("body without a message", body_without_message, Code.EMPTY_MESSAGE),
    ("content over 512 KiB", content_over_limit, Code.CONTENT_TOO_LARGE),
    ("memory id with NUL (key splitting)", memory_id_with_nul, Code.INVALID_MEMORY_ID),
    ("domain with NUL (key splitting)", domain_with_nul, Code.INVALID_DOMAIN),
    ("tag with NUL", tag_with_nul, Code.INVALID_TAG),
    ("content with NUL", content_with_nul, Code.INVALID_CONTENT),
    ("content hash of other content", hash_of_other_content, Code.CONTENT_HASH_MISMATCH),
    # votes
    ("vote on a deprecated memory", vote_on_deprecated, Code.MEMORY_NOT_PROPOSED),
    ("vote on a challenged memory", vote_on_challenged, Code.MEMORY_NOT_PROPOSED),
    ("vote on a co-committed memory", vote_on_cocommit, Code.MEMORY_NOT_PROPOSED),
    ("vote by a removed validator (after H+2)", vote_by_removed_validator,
     Code.NOT_A_VALIDATOR),
    ("vote by a scope member on an unscoped memory", vote_by_scope_member_unscoped,
     Code.NOT_A_VALIDATOR),
    ("validator vote outside a pinned scope ballot", vote_by_validator_on_scoped,
     Code.NOT_A_SCOPE_MEMBER),
    ("vote with an undefined decision value", vote_unknown_decision, Code.INVALID_DECISION),
    ("second vote under a new nonce", double_vote, Code.ALREADY_VOTED),
    ("vote on a 600-byte memory id", vote_huge_id, Code.MEMORY_NOT_FOUND),
    # co-commits
    ("co-commit with a duplicated coauthor key", cocommit_duplicate_keys,
     Code.COCOMMIT_COAUTHORS_UNSORTED),
    ("co-commit with an all-zero coauthor key", cocommit_zero_key, Code.COCOMMIT_BAD_SIGNATURE),
    ("co-commit with a single coauthor", cocommit_single, Code.COCOMMIT_TOO_FEW_COAUTHORS),
    ("co-commit submitted by a non-coauthor", cocommit_by_outsider,
     Code.COCOMMIT_SUBMITTER_NOT_COAUTHOR),
    ("co-commit with a forged coauthor signature", cocommit_forged_coauthor,
     Code.COCOMMIT_BAD_SIGNATURE),
    ("co-commit signatures out of order", cocommit_wrong_order, Code.COCOMMIT_SIGNATURE_MISMATCH),
    ("co-commit core for another chain", cocommit_other_chain, Code.COCOMMIT_WRONG_CHAIN),
    ("co-commit agreement replayed", cocommit_replay, Code.COCOMMIT_DUPLICATE),
    ("co-commit outside its window", cocommit_expired, Code.COCOMMIT_OUTSIDE_WINDOW),
    ("co-commit into a scoped domain", cocommit_scoped, Code.COCOMMIT_SCOPED_DOMAIN),
    ("co-commit core with an unknown field", cocommit_core_unknown_field,
     Code.COCOMMIT_CORE_NOT_CANONICAL),
    ("co-commit core that does not decode", cocommit_core_garbage, Code.COCOMMIT_CORE_DECODE),
    # disputes
    ("challenge by a non-holder", challenge_by_stranger, Code.CHALLENGE_DENIED),
    ("challenge by a write-grant holder", challenge_by_writer, Code.CHALLENGE_DENIED),
    ("challenge by a read-grant holder", challenge_by_reader, Code.CHALLENGE_DENIED),
    ("second challenge in one round", challenge_twice, Code.ALREADY_CHALLENGED),
    ("challenge reason over 4 KiB", challenge_reason_too_long, Code.REASON_TOO_LONG),
    ("challenge of a proposed memory", challenge_proposed, Code.MEMORY_NOT_COMMITTED),
    ("reinstate by a non-member of the electorate", reinstate_by_stranger,
     Code.REINSTATE_DENIED),
    ("reinstate by the challenge opener", reinstate_by_opener, Code.REINSTATE_DENIED),
    ("reinstate a committed memory", reinstate_committed, Code.MEMORY_NOT_CHALLENGED),
    ("corroborate one's own memory", corroborate_own, Code.CORROBORATE_BY_AUTHOR),
    ("corroborate as a co-author", corroborate_by_coauthor, Code.CORROBORATE_BY_AUTHOR),
    ("corroborate twice", corroborate_twice, Code.ALREADY_CORROBORATED),
    ("corroborate a deprecated memory", corroborate_deprecated, Code.MEMORY_NOT_COMMITTED),
    # governance
    ("proposal by a non-validator", propose_by_stranger, Code.GOV_NOT_VALIDATOR),
    ("proposal by a removed validator", propose_by_removed_validator, Code.GOV_NOT_VALIDATOR),
    ("governance vote by a non-validator", gov_vote_by_outsider, Code.GOV_NOT_VALIDATOR),
    ("governance vote on an executed proposal", gov_vote_on_executed, Code.GOV_PROPOSAL_CLOSED),
    ("governance vote on an unknown proposal", gov_vote_unknown, Code.GOV_PROPOSAL_NOT_FOUND),
    ("upgrade to the running version", upgrade_current_version, Code.GOV_UNSUPPORTED_VERSION),
    ("upgrade to version 0", upgrade_version_zero, Code.GOV_UNSUPPORTED_VERSION),
    ("upgrade activating too soon", upgrade_too_soon, Code.GOV_ACTIVATION_TOO_SOON),
    ("upgrade with an invalid name", upgrade_bad_name, Code.GOV_INVALID_PROPOSAL),
    ("removal of over a third of the power", validator_removal_over_a_third,
     Code.GOV_UNSAFE_VALIDATOR_CHANGE),
    ("validator with a 31-byte key", validator_short_key, Code.GOV_INVALID_PROPOSAL),
    ("validator power above 2^40", validator_power_overflow, Code.GOV_INVALID_PROPOSAL),
    ("removal of a non-validator", validator_remove_stranger, Code.GOV_INVALID_PROPOSAL),
    ("change of an unknown parameter", param_unknown, Code.GOV_UNKNOWN_PARAM),
    ("parameter value 2^64-1", param_out_of_range, Code.GOV_INVALID_PARAM_VALUE),
    ("cancel of another validator's proposal", cancel_others_proposal, Code.GOV_CANCEL_DENIED),
    ("scope over a shared domain", scope_over_shared_domain, Code.GOV_INVALID_PROPOSAL),
    ("scope over an owned domain", scope_over_owned_domain, Code.GOV_INVALID_PROPOSAL),
    ("scope id that already exists", scope_already_exists, Code.GOV_SCOPE_EXISTS),
    # access
    ("grant by a write-grant holder", grant_by_writer, Code.GRANT_DENIED),
    ("grant by a modify-grant holder", grant_by_modder, Code.GRANT_DENIED),
    ("grant in a shared domain", grant_in_shared, Code.SHARED_DOMAIN_GRANT),
    ("grant in a scoped domain", grant_in_scoped, Code.GRANT_DENIED),
    ("grant to oneself", grant_to_self, Code.INVALID_GRANTEE),
    ("grant to a 31-byte key", grant_to_short_key, Code.INVALID_GRANTEE),
    ("grant with an undefined level", grant_unknown_level, Code.INVALID_GRANT_LEVEL),
    ("grant expiring at the current height", grant_expired, Code.GRANT_EXPIRY_PAST),
    ("revoke of a grant that does not exist", revoke_missing, Code.GRANT_NOT_FOUND),
    ("revoke by a non-owner", revoke_by_non_owner, Code.GRANT_DENIED),
    ("write with only a read grant", write_with_read_grant, Code.DOMAIN_WRITE_DENIED),
    ("write into a scope as a non-member", write_scope_as_outsider, Code.DOMAIN_WRITE_DENIED),
    ("hijack of an existing memory id", hijack_memory_id, Code.MEMORY_ID_CONFLICT),
    ("re-submit over a deprecated memory", resubmit_deprecated, Code.MEMORY_TERMINAL),
]


_Snapshot = tuple[bytes, list[tuple[bytes, bytes]], dict[str, list[tuple[Any, ...]]]]


def _snapshot(chain: LocalChain) -> _Snapshot:
    store = chain.app.store
    return store.last_app_hash, list(store.iter_prefix(b"")), chain.app.projection.dump()


def test_catalogue_is_large_and_distinct() -> None:
    names = [name for name, _, _ in ATTACKS]
    assert len(names) == len(set(names)) >= 40
    assert len({fn for _, fn, _ in ATTACKS}) == len(ATTACKS)


@pytest.mark.parametrize(("name", "attack", "code"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_is_rejected_with_its_code_and_changes_nothing(
        w: World, name: str, attack: Attack, code: Code) -> None:
    tx = attack(w)
    w.chain.block([])  # settle any setup the attack ran: nothing pending, nothing due
    before = _snapshot(w.chain)
    checked = w.chain.check(tx)
    assert (checked.code, checked.codespace) == (code, CODESPACE), checked.log
    assert checked.log
    results = w.chain.block([tx])
    assert (results[0].code, results[0].codespace) == (code, CODESPACE), results[0].log
    assert results[0].log and not results[0].events
    assert w.chain.app_hashes[w.chain.height] == before[0], "the rejected tx moved the app hash"
    after = _snapshot(w.chain)
    assert after[1] == before[1], "the rejected tx changed canonical state"
    assert after[2] == before[2], "the rejected tx changed the projection"


# ------------------------------------------------------------------ byzantine blocks
def dup_in_block(w: World) -> list[bytes]:
    tx = good_submit(w)
    return [tx, tx]


def conflicting_votes(w: World) -> list[bytes]:
    v = w.validators[3]
    return [w.tx(v, "vote", "m-proposed", "accept"), w.tx(v, "vote", "m-proposed", "reject")]


def garbage_around_honest(w: World) -> list[bytes]:
    return [b"\xff\xff\xff", good_submit(w), b"\x0a"]


def oversized_next_to_honest(w: World) -> list[bytes]:
    return [w.tx(STRANGER, "submit", "fz-big", "z" * MAX_TX_BYTES), good_submit(w)]


def nonces_out_of_order(w: World) -> list[bytes]:
    first, second = good_submit(w), w.tx(OWNER, "submit", "fz-later", "second")
    return [second, first]


def cocommit_twice_in_block(w: World) -> list[bytes]:
    c = core(w, [C1, C2], agreement_nonce=9)
    return [w.tx(C1, "cocommit", c, sigs(c, [C1, C2])), w.tx(C2, "cocommit", c, sigs(c, [C1, C2]))]


def write_before_its_grant(w: World) -> list[bytes]:
    write = w.tx(STRANGER, "submit", "fz-early", "relies on a later grant", domain="vault")
    return [write, w.tx(OWNER, "grant", "vault", pk(STRANGER), "write")]


def forged_copy_of_honest(w: World) -> list[bytes]:
    honest = good_submit(w)
    return [with_signature(honest, flip(parts(honest).signature, 0)), honest]


BLOCKS: list[tuple[str, Callable[[World], list[bytes]], list[Code]]] = [
    ("the same tx twice", dup_in_block, [Code.OK, Code.NONCE_REPLAYED]),
    ("two votes by one validator", conflicting_votes, [Code.OK, Code.ALREADY_VOTED]),
    ("garbage around an honest tx", garbage_around_honest,
     [Code.TX_DECODE, Code.OK, Code.TX_DECODE]),
    ("an oversized tx next to an honest one", oversized_next_to_honest,
     [Code.TX_TOO_LARGE, Code.OK]),
    ("nonces out of order", nonces_out_of_order, [Code.OK, Code.NONCE_REPLAYED]),
    ("one agreement co-committed twice", cocommit_twice_in_block,
     [Code.OK, Code.COCOMMIT_DUPLICATE]),
    ("a write before the grant it needs", write_before_its_grant,
     [Code.DOMAIN_WRITE_DENIED, Code.OK]),
    ("a forged copy before the honest tx", forged_copy_of_honest,
     [Code.BAD_SIGNATURE, Code.OK]),
]


@pytest.mark.parametrize(("name", "make", "codes"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_byzantine_block_rejects_exactly_the_bad_txs(
        template: world.Template, tmp_path: Path, name: str,
        make: Callable[[World], list[bytes]], codes: list[Code]) -> None:
    """Rejected txs in a mixed block leave no trace: the state equals that of a block
    holding only the accepted txs (computed on an independent copy of the world)."""
    attacked = world.clone(template, tmp_path / "attacked")
    honest = world.clone(template, tmp_path / "honest")
    try:
        txs = make(attacked)
        results = attacked.chain.block(txs)
        assert [r.code for r in results] == codes, [r.log for r in results]
        accepted = [tx for tx, r in zip(txs, results, strict=True) if r.code == Code.OK]
        honest.chain.block(accepted)
        assert attacked.chain.app.store.last_app_hash == honest.chain.app.store.last_app_hash
        assert _snapshot(attacked.chain)[1:] == _snapshot(honest.chain)[1:]
    finally:
        attacked.close()
        honest.close()


# ------------------------------------------------------------------ boundaries
def test_nonce_2_64_minus_1_is_accepted_once(w: World) -> None:
    fresh = TxBuilder(STRANGER, w.chain.chain_id)
    assert w.chain.block([fresh.submit(MAX_NONCE, "fz-max", "top of the range")])[0].code == 0
    again = fresh.submit(MAX_NONCE, "fz-max-2", "nothing above it")
    assert w.chain.check(again).code == Code.NONCE_REPLAYED
    assert w.chain.block([again])[0].code == Code.NONCE_REPLAYED


def test_removed_validator_still_votes_at_h_plus_1_not_at_h_plus_2(tmp_path: Path) -> None:
    """CometBFT applies ValidatorUpdates returned at H from H+2; the app agrees exactly."""
    chain = LocalChain(tmp_path / "c")
    v = chain.validator_keys
    b = {i: chain.builder(k) for i, k in enumerate(v)}
    n = chain.next_nonce
    assert chain.block([b[1].propose(n(v[1]), validator_proposal(pk(v[0]), 0))])[0].code == 0
    assert [r.code for r in chain.block([b[3].gov_vote(n(v[3]), "p1"),
                                         b[2].gov_vote(n(v[2]), "p1")])] == [0, 0]
    passed_at = chain.height
    agent = TxBuilder(STRANGER, chain.chain_id)
    at_h1 = chain.block([agent.submit(1, "h1", "voted on at H+1"),
                         agent.submit(2, "h2", "voted on at H+2"),
                         b[0].vote(n(v[0]), "h1")])
    assert chain.height == passed_at + 1
    assert [r.code for r in at_h1] == [0, 0, 0]  # still a validator at H+1
    assert chain.block([b[0].vote(n(v[0]), "h2")])[0].code == Code.NOT_A_VALIDATOR
    assert chain.height == passed_at + 2


# ------------------------------------------------------------------ regressions
# Bugs this suite found, fixed in 15a29d1 / 493e474; each test reproduces the original
# attack and pins the fixed behaviour.
def test_signature_cache_cannot_forge_a_tx_or_fork_the_chain(template: world.Template,
                                                             tmp_path: Path) -> None:
    """The signature cache used to key on sha256(pk + sig + msg) with no length framing:
    a signature the node verified once (even in CheckTx of a tx it then rejected) vouched
    for Tx(body=msg[k:], sig=sig + msg[:k]) — a forged tx in the victim's name, accepted
    by nodes holding the cache entry and rejected by the others (a consensus fork)."""
    node_a = world.clone(template, tmp_path / "a")  # saw the victim's tx in its mempool
    node_b = world.clone(template, tmp_path / "b")  # did not (restarted, or never gossiped)
    try:
        # The attacker wants OWNER to challenge (and, with no corroborators, deprecate)
        # OWNER's own committed memory. It gets OWNER to sign a memory whose last tag is
        # prefix || forged body — e.g. text an agent copied from an untrusted source.
        forged_body = tx_pb2.TxBody(  # every byte < 0x80: it must pass as UTF-8 text
            chain_id=node_a.chain.chain_id, nonce=100,
            memory_challenge=tx_pb2.MemoryChallenge(memory_id="v-committed"),
        ).SerializeToString(deterministic=True)
        bait = (TX_SIGN_PREFIX + forged_body).decode()
        victim = node_a.chain.builder(OWNER).submit(10**6, "fz-bait", "harmless", tags=[bait])
        assert node_a.chain.check(victim).code == Code.INVALID_TAG  # rejected, but verified
        env = parts(victim)
        cut = len(env.body) - len(TX_SIGN_PREFIX + forged_body)
        crafted = envelope(forged_body, env.public_key,
                           env.signature + TX_SIGN_PREFIX + env.body[:cut])
        assert node_a.chain.check(crafted).code == Code.BAD_SIGNATURE
        results_a = node_a.chain.block([crafted])
        results_b = node_b.chain.block([crafted])
        assert results_a[0].code == results_b[0].code == Code.BAD_SIGNATURE
        assert node_a.chain.memory("v-committed")["status"] == "committed"  # type: ignore[index]
        assert node_a.chain.app.store.last_app_hash == node_b.chain.app.store.last_app_hash
    finally:
        node_a.close()
        node_b.close()


@pytest.mark.parametrize("expires", [2**63 - 1, 2**63, 2**64 - 1])
def test_grant_with_far_expiry_does_not_halt_the_chain(w: World, expires: int) -> None:
    """expires_height is a uint64; the projection used to store it as a signed 64-bit
    integer, so one grant with an expiry >= 2^63 halted every node at every replay."""
    tx = w.tx(OWNER, "grant", "vault", pk(STRANGER), "write", expires)
    try:
        result = w.chain.block([tx])[0]
    except HaltCalled as exc:
        pytest.fail(f"one signed grant halted the node: {exc}")
    assert result.code == Code.OK, result.log
    rows = {(r[0], r[1]): r for r in w.chain.app.projection.dump()["grants"]}
    assert int(rows[("vault", pk(STRANGER).hex())][3]) == expires
    # The grant works (it has not expired) and the projection matches a rebuild.
    write = w.tx(STRANGER, "submit", "fz-granted", "written under a far grant", domain="vault")
    assert w.chain.block([write])[0].code == Code.OK


@pytest.mark.parametrize("where", ["memory", "cocommit"])
def test_nul_in_content_is_rejected(w: World, where: str) -> None:
    """Content with NUL used to be accepted and then halted every PostgreSQL-backed node
    (TEXT cannot hold NUL); it is now refused by consensus with its own code."""
    if where == "memory":
        tx = w.tx(STRANGER, "submit", "fz-nul", "before\x00after")
    else:
        c = cocommit_core(w.chain.chain_id, "joint\x00claim", sorted([pk(C1), pk(C2)]))
        tx = w.tx(C1, "cocommit", c, sigs(c, [C1, C2]))
    before = _snapshot(w.chain)
    assert w.chain.check(tx).code == Code.INVALID_CONTENT
    assert w.chain.block([tx])[0].code == Code.INVALID_CONTENT
    assert _snapshot(w.chain) == before


@pytest.mark.postgres
def test_nul_in_content_does_not_halt_a_postgres_projection(fresh_postgres_url: str,
                                                            tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "pg", db_url=fresh_postgres_url)
    try:
        builder = chain.builder(STRANGER)
        try:
            results = chain.block([builder.submit(1, "fz-nul", "before\x00after"),
                                   builder.submit(2, "fz-ok", "after the attempt")])
        except HaltCalled as exc:
            pytest.fail(f"one signed memory halted a PostgreSQL node: {exc}")
        assert [r.code for r in results] == [Code.INVALID_CONTENT, Code.OK]
    finally:
        chain.close()


@pytest.mark.parametrize(("path", "data", "ok"), [
    ("/key", b"", False), ("/key", b"k" * 510, False), ("/key", b"k" * 100_000, False),
    ("/key", b"mem/m-proposed", True), ("/account", b"", True), ("/account", b"\xff\xfe", False),
    ("/account", b"zz", False), ("/nope", b"x", False), ("", b"", False),
])
def test_malformed_queries_are_answered(w: World, path: str, data: bytes, ok: bool) -> None:
    """An empty /key used to raise in LMDB, which the ABCI server turns into os._exit:
    one public `abci_query` killed the node. Every query must get an answer."""
    response = w.chain.app.query(pb.RequestQuery(path=path, data=data))
    assert response.height == w.chain.height
    assert (response.code == 0) == ok, response


def test_projection_keeps_the_exact_nonce(w: World) -> None:
    """The SQLite projection used to store nonces above 2^63-1 as REAL (2^64-1 read back
    as 2^64), and a rebuild agreed, so the consistency check could not see it."""
    rows = dict(w.chain.app.projection.dump()["accounts"])
    assert int(rows[pk(MAXED).hex()]) == MAX_NONCE
