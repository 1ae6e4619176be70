"""Private domains survive state sync, a projection rebuild and an upgrade from v9
(issue 39, Must show 3): the restored or rebuilt node holds the same envelopes and no
plaintext, and members still open them with the keys on chain."""

from __future__ import annotations

import json
from pathlib import Path

from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk import private
from memledger.sdk.txbuilder import upgrade_proposal
from tests.support.chain import LocalChain, seeded_key
from tests.unit.consensus.test_statesync import Apply, Offer, Target, snapshot_of

OWNER = seeded_key("persist-owner")
MEMBER = seeded_key("persist-member")
DOMAIN = "team/persist"
CANARY = "canary-persist-5b1e0d the backup passphrase"


def pk(key: object) -> bytes:
    return bytes(key.verify_key)  # type: ignore[attr-defined]


def private_chain(home: Path, version: int = 10) -> LocalChain:
    c = LocalChain(home, app_state={"app_version": version,
                                    "params": {"gov_voting_period": 5,
                                               "gov_min_upgrade_delay": 3}})
    return c


def write_private(c: LocalChain) -> None:
    k = private.new_epoch_key()
    b = c.builder(OWNER)
    txs = [b.build("domain_private", c.next_nonce(OWNER), domain=DOMAIN,
                   keys=private.sealed_copies(k, [pk(OWNER)])),
           b.grant(c.next_nonce(OWNER), DOMAIN, pk(MEMBER), "read")]
    assert [r.code for r in c.block(txs)] == [0, 0]
    keys = b.build("domain_keys", c.next_nonce(OWNER), domain=DOMAIN, epoch=1,
                   keys=private.sealed_copies(k, [pk(MEMBER)]))
    env = private.seal_content(k, DOMAIN, 1, "secret", CANARY)
    submit = b.submit(c.next_nonce(OWNER), "secret", env, domain=DOMAIN, epoch=1)
    assert [r.code for r in c.block([keys, submit])] == [0, 0]


def no_canary_under(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def member_reads(get: object) -> str:
    """Open the memory as the member does, from a store's records only."""
    domain = json.loads(get(b"dom/" + DOMAIN.encode()))  # type: ignore[operator]
    ring = private.Keyring(MEMBER)
    ring.learn(DOMAIN, domain)
    envelope = get(b"memc/secret").decode()  # type: ignore[operator]
    return private.open_content(ring.require(DOMAIN, 1), DOMAIN, 1, "secret", envelope)


def test_state_sync_and_its_projection_rebuild_keep_it_private(tmp_path: Path) -> None:
    chain = private_chain(tmp_path / "src")
    write_private(chain)
    store, info = snapshot_of(chain, tmp_path / "snaps")
    target = Target(tmp_path / "dst", background=False)
    assert target.offer(info, chain.app.store.last_app_hash) == Offer.ACCEPT
    assert target.restore(store, info) == [Apply.ACCEPT] * info.chunks
    assert target.store.last_app_hash == chain.app.store.last_app_hash
    assert target.projection.dump() == chain.app.projection.dump()  # rebuilt from records
    assert member_reads(target.store.get) == CANARY
    target.close()
    chain.close()
    no_canary_under(tmp_path)


def test_an_upgrade_from_v9_brings_private_domains(tmp_path: Path) -> None:
    c = private_chain(tmp_path, version=9)
    k = private.new_epoch_key()
    early = c.builder(OWNER).build("domain_private", 1, domain=DOMAIN,
                                   keys=private.sealed_copies(k, [pk(OWNER)]))
    assert c.check(early).code == Code.BODY_NOT_CANONICAL  # an unknown kind at v9
    sealed_v9 = c.builder(OWNER).submit(2, "s9", "x" * 20, domain=DOMAIN, epoch=1)
    assert c.check(sealed_v9).code == Code.BODY_NOT_CANONICAL
    v = c.validator_keys
    activation = c.height + 5
    tx = c.builder(v[0]).propose(c.next_nonce(v[0]), upgrade_proposal("v10", 10, activation))
    assert c.block([tx])[0].code == 0
    votes = [c.builder(v[i]).gov_vote(c.next_nonce(v[i]), "p1", "accept") for i in (3, 2)]
    assert [r.code for r in c.block(votes)] == [0, 0]
    while c.height < activation:
        c.block([])
    assert c.app.info(pb.RequestInfo()).app_version == 10
    write_private(c)
    assert member_reads(c.app.store.get) == CANARY
    c.close()
    no_canary_under(tmp_path)
