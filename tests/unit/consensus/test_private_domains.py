"""v10 private domains (families/access/private.py): sealed epoch keys, sealed content.

Each refusal has its code, checked before anything is written; the content a node stores
for a private memory is the envelope only; a revoke is a new epoch the revoked key never
gets; below v10 the kinds and the epoch field do not exist (test_fields_before_their_version).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from nacl.exceptions import CryptoError
from nacl.signing import SigningKey

from memledger.protocol import sealed
from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk import private
from tests.support.chain import LocalChain, seeded_key

OWNER = seeded_key("priv-owner")
MEMBER = seeded_key("priv-member")
OTHER = seeded_key("priv-other")
DOMAIN = "team/incidents"
CANARY = "canary-7f3e9b the vault code is 2718"


def pk(key: SigningKey) -> bytes:
    return bytes(key.verify_key)


def chain_at(home: Path, version: int = 10) -> LocalChain:
    return LocalChain(home, powers=[10, 20, 30, 40], app_state={"app_version": version})


def send(c: LocalChain, key: SigningKey, kind: str, **fields: Any) -> pb.ExecTxResult:
    return c.block([c.builder(key).build(kind, c.next_nonce(key), **fields)])[0]


def domain(c: LocalChain, name: str = DOMAIN) -> dict[str, Any]:
    raw = c.app.store.get(b"dom/" + name.encode())
    assert raw is not None
    record: dict[str, Any] = json.loads(raw)
    return record


def make_private(c: LocalChain, members: list[SigningKey]) -> bytes:
    epoch_key = private.new_epoch_key()
    keys = private.sealed_copies(epoch_key, [pk(m) for m in members])
    assert send(c, OWNER, "domain_private", domain=DOMAIN, keys=keys).code == 0
    return epoch_key


def submit_sealed(c: LocalChain, key: SigningKey, memory_id: str, text: str, epoch_key: bytes,
                  epoch: int = 1, **extra: Any) -> pb.ExecTxResult:
    envelope = private.seal_content(epoch_key, DOMAIN, epoch, memory_id, text)
    tx = c.builder(key).submit(c.next_nonce(key), memory_id, envelope, domain=DOMAIN,
                               epoch=epoch, **extra)
    return c.block([tx])[0]


def grant(c: LocalChain, who: SigningKey, level: str = "write") -> None:
    assert send(c, OWNER, "access_grant", domain=DOMAIN, grantee=pk(who), level=level,
                expires_height=0).code == 0


def test_a_domain_created_private_holds_only_the_envelope(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    epoch_key = make_private(c, [OWNER])
    record = domain(c)
    assert record["owner"] == pk(OWNER).hex()
    assert [e["epoch"] for e in record["private"]["epochs"]] == [1]
    assert submit_sealed(c, OWNER, "p1", CANARY, epoch_key).code == 0
    stored = c.app.store.get(b"memc/p1")
    assert stored is not None and CANARY.encode() not in stored
    assert c.memory("p1")["epoch"] == 1  # type: ignore[index]
    opened = private.open_epoch_key(
        bytes.fromhex(record["private"]["epochs"][0]["keys"][pk(OWNER).hex()]), OWNER)
    assert private.open_content(opened, DOMAIN, 1, "p1", stored.decode()) == CANARY
    assert c.memory("p1")["content_hash"] == hashlib.sha256(stored).hexdigest()  # type: ignore[index]
    for where in tmp_path.rglob("*"):
        if where.is_file():
            assert CANARY.encode() not in where.read_bytes(), where


def test_plain_content_and_wrong_envelopes_are_refused(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    epoch_key = make_private(c, [OWNER])
    b = c.builder(OWNER)
    plain = b.submit(c.next_nonce(OWNER), "p1", CANARY, domain=DOMAIN)
    plain_with_epoch = b.submit(c.next_nonce(OWNER), "p2", CANARY, domain=DOMAIN, epoch=1)
    almost = sealed.PREFIX + "not base64!"
    bad_b64 = b.submit(c.next_nonce(OWNER), "p3", almost, domain=DOMAIN, epoch=1)
    env = private.seal_content(epoch_key, DOMAIN, 1, "p4", "x")
    no_epoch = b.submit(c.next_nonce(OWNER), "p4", env, domain=DOMAIN)
    stale = b.submit(c.next_nonce(OWNER), "p5", env, domain=DOMAIN, epoch=2)
    tagged = b.submit(c.next_nonce(OWNER), "p6", env, domain=DOMAIN, epoch=1, tags=["t"])
    public_epoch = b.submit(c.next_nonce(OWNER), "p7", "hello there", domain="general",
                            epoch=1)
    codes = [r.code for r in c.block([plain, plain_with_epoch, bad_b64, no_epoch, stale,
                                      tagged, public_epoch])]
    assert codes == [Code.PRIVATE_CONTENT_NOT_SEALED, Code.PRIVATE_CONTENT_NOT_SEALED,
                     Code.PRIVATE_CONTENT_NOT_SEALED, Code.PRIVATE_CONTENT_NOT_SEALED,
                     Code.PRIVATE_EPOCH_NOT_CURRENT, Code.PRIVATE_TAGS,
                     Code.PRIVATE_EPOCH_NOT_CURRENT]
    assert all(c.memory(f"p{i}") is None for i in range(1, 8))
    assert c.check(plain).code == Code.PRIVATE_CONTENT_NOT_SEALED  # CheckTx agrees


def test_a_non_member_write_is_refused_as_today(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    epoch_key = make_private(c, [OWNER])
    assert submit_sealed(c, OTHER, "x1", "hi", epoch_key).code == Code.DOMAIN_WRITE_DENIED


def test_who_may_make_a_domain_private_and_the_key_rules(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    k = private.new_epoch_key()
    mine = private.sealed_copies(k, [pk(OWNER)])
    assert send(c, OWNER, "domain_private", domain="general",
                keys=mine).code == Code.PRIVATE_DOMAIN_DENIED
    assert send(c, OWNER, "domain_private", domain=DOMAIN, keys=[]).code == \
        Code.SEALED_KEYS_MEMBERS
    assert send(c, OWNER, "domain_private", domain=DOMAIN,
                keys=[(pk(OWNER), b"\x01" * 79)]).code == Code.SEALED_KEYS_INVALID
    assert send(c, OWNER, "domain_private", domain=DOMAIN,
                keys=private.sealed_copies(k, [pk(OWNER), pk(OTHER)])).code == \
        Code.SEALED_KEYS_MEMBERS
    assert c.app.store.get(b"dom/" + DOMAIN.encode()) is None  # nothing written on refusal
    assert send(c, OWNER, "domain_private", domain=DOMAIN, keys=mine).code == 0
    assert send(c, OWNER, "domain_private", domain=DOMAIN, keys=mine).code == \
        Code.DOMAIN_ALREADY_PRIVATE
    assert send(c, OTHER, "domain_keys", domain=DOMAIN, epoch=1,
                keys=private.sealed_copies(k, [pk(OTHER)])).code == Code.PRIVATE_DOMAIN_DENIED
    # an existing public domain with a grantee: the new epoch must include the grantee
    assert c.block([c.builder(OTHER).submit(c.next_nonce(OTHER), "o1", "public note",
                                           domain="other/d")])[0].code == 0
    assert send(c, OTHER, "access_grant", domain="other/d", grantee=pk(MEMBER), level="read",
                expires_height=0).code == 0
    assert send(c, OTHER, "domain_private", domain="other/d",
                keys=private.sealed_copies(k, [pk(OTHER)])).code == Code.SEALED_KEYS_MEMBERS
    assert send(c, OTHER, "domain_private", domain="other/d",
                keys=private.sealed_copies(k, [pk(OTHER), pk(MEMBER)])).code == 0


def test_grant_then_keys_lets_a_member_read_and_write(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    epoch_key = make_private(c, [OWNER])
    grant(c, MEMBER)
    copies = private.sealed_copies(epoch_key, [pk(MEMBER)])
    assert send(c, OWNER, "domain_keys", domain=DOMAIN, epoch=1, keys=copies).code == 0
    ring = private.Keyring(MEMBER)
    ring.learn(DOMAIN, domain(c))
    assert ring.require(DOMAIN, 1) == epoch_key
    assert submit_sealed(c, MEMBER, "m1", CANARY, ring.require(DOMAIN, 1)).code == 0
    # keys only to members, only for existing epochs
    assert send(c, OWNER, "domain_keys", domain=DOMAIN, epoch=1,
                keys=private.sealed_copies(epoch_key, [pk(OTHER)])).code == \
        Code.SEALED_KEYS_MEMBERS
    assert send(c, OWNER, "domain_keys", domain=DOMAIN, epoch=3,
                keys=copies).code == Code.EPOCH_UNKNOWN


def test_revoke_is_a_new_epoch_the_revoked_key_never_gets(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    old_key = make_private(c, [OWNER])
    grant(c, MEMBER)
    grant(c, OTHER)
    assert send(c, OWNER, "domain_keys", domain=DOMAIN, epoch=1,
                keys=private.sealed_copies(old_key, [pk(MEMBER), pk(OTHER)])).code == 0
    assert submit_sealed(c, OWNER, "before", "written before the revoke", old_key).code == 0
    # the plain revoke is refused in a private domain
    assert send(c, OWNER, "access_revoke", domain=DOMAIN, grantee=pk(OTHER)).code == \
        Code.PRIVATE_REVOKE_NEEDS_EPOCH
    new_key = private.new_epoch_key()
    # a new epoch must go to every remaining member and not to the revoked one
    assert send(c, OWNER, "domain_keys", domain=DOMAIN, epoch=2, revoke=[pk(OTHER)],
                keys=private.sealed_copies(new_key, [pk(OWNER), pk(MEMBER), pk(OTHER)])
                ).code == Code.SEALED_KEYS_MEMBERS
    assert send(c, OWNER, "domain_keys", domain=DOMAIN, epoch=1, revoke=[pk(OTHER)],
                keys=private.sealed_copies(old_key, [pk(MEMBER)])).code == \
        Code.PRIVATE_REVOKE_NEEDS_EPOCH
    assert send(c, OWNER, "domain_keys", domain=DOMAIN, epoch=2, revoke=[pk(OTHER)],
                keys=private.sealed_copies(new_key, [pk(OWNER), pk(MEMBER)])).code == 0
    revoked_at = c.height
    record = domain(c)
    assert record["grantees"] == [pk(MEMBER).hex()]
    assert record["private"]["revoked"] == [[revoked_at, pk(OTHER).hex()]]
    assert c.app.store.get(b"grant/" + DOMAIN.encode() + b"\x00" + pk(OTHER).hex().encode()) \
        is None
    # epoch 1 memories are now refused; epoch 2 is current
    assert submit_sealed(c, MEMBER, "late", "old key", old_key).code == \
        Code.PRIVATE_EPOCH_NOT_CURRENT
    assert submit_sealed(c, MEMBER, "after", "written after the revoke", new_key,
                         epoch=2).code == 0
    revoked = private.Keyring(OTHER)
    revoked.learn(DOMAIN, record)
    assert revoked.get(DOMAIN, 2) is None
    with pytest.raises(private.EpochKeyMissing):
        revoked.require(DOMAIN, 2)
    after = c.app.store.get(b"memc/after")
    assert after is not None
    with pytest.raises(CryptoError):  # the old key does not open the new epoch's content
        private.open_content(revoked.require(DOMAIN, 1), DOMAIN, 2, "after", after.decode())
    before = c.app.store.get(b"memc/before")
    assert before is not None  # what it could read before stays readable with its keys
    assert private.open_content(revoked.require(DOMAIN, 1), DOMAIN, 1, "before",
                                before.decode()) == "written before the revoke"


def test_cocommits_are_refused_in_private_domains(tmp_path: Path) -> None:
    from memledger.sdk.txbuilder import cocommit_core, sign_cocommit
    c = chain_at(tmp_path)
    make_private(c, [OWNER])
    grant(c, MEMBER)
    core = cocommit_core(c.chain_id, "joint", [pk(OWNER), pk(MEMBER)], domain=DOMAIN)
    sigs = sorted([sign_cocommit(OWNER, core), sign_cocommit(MEMBER, core)])
    tx = c.builder(OWNER).cocommit(c.next_nonce(OWNER), core, sigs)
    assert c.block([tx])[0].code == Code.PRIVATE_COCOMMIT


def test_an_envelope_is_bound_to_its_memory(tmp_path: Path) -> None:
    key = private.new_epoch_key()
    env = private.seal_content(key, DOMAIN, 1, "a", "secret")
    assert sealed.is_sealed(env)
    with pytest.raises(CryptoError):
        private.open_content(key, DOMAIN, 1, "b", env)
    with pytest.raises(CryptoError):
        private.open_content(key, DOMAIN, 2, "a", env)


def test_replays_the_same_app_hash(tmp_path: Path) -> None:
    """Two nodes running the same private-domain blocks agree (sealing is client-side)."""
    a, b = chain_at(tmp_path / "a"), chain_at(tmp_path / "b")
    k = private.new_epoch_key()
    txs = [a.builder(OWNER).build("domain_private", 1, domain=DOMAIN,
                                  keys=private.sealed_copies(k, [pk(OWNER)])),
           a.builder(OWNER).submit(2, "p1", private.seal_content(k, DOMAIN, 1, "p1", "s"),
                                   domain=DOMAIN, epoch=1)]
    for chain in (a, b):
        assert [r.code for r in chain.block(txs)] == [0, 0]
    assert a.app_hashes[a.height] == b.app_hashes[b.height]
