"""v10 corrections: a submit naming the memory it supersedes (families/memory/corrections).

Each refusal has its code; a committed correction supersedes its original in the same
block, linked both ways; a rejected or expired one leaves the original as it was; below
v10 the field does not exist (test_fields_before_their_version covers the gate).
"""

from __future__ import annotations

from pathlib import Path

from nacl.signing import SigningKey

from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk.txbuilder import upgrade_proposal
from tests.support.chain import LocalChain, seeded_key

AUTHOR = seeded_key("corr-author")
PEER = seeded_key("corr-peer")
EDITOR = seeded_key("corr-editor")  # a modify-grant holder
GOV = {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}


def chain_at(home: Path, version: int = 10, **params: int) -> LocalChain:
    return LocalChain(home, powers=[10, 20, 30, 40],
                      app_state={"app_version": version, "params": {**GOV, **params}})


def submit(c: LocalChain, key: SigningKey, memory_id: str, content: str, *,
           domain: str = "general", supersedes: str = "") -> pb.ExecTxResult:
    tx = c.builder(key).submit(c.next_nonce(key), memory_id, content, domain=domain,
                               supersedes=supersedes)
    return c.block([tx])[0]


def decide(c: LocalChain, memory_id: str, decision: str) -> None:
    """Every validator votes `decision` on `memory_id`, in one block."""
    txs = [c.builder(k).vote(c.next_nonce(k), memory_id, decision) for k in c.validator_keys]
    assert [r.code for r in c.block(txs)][:3] == [0, 0, 0]


def committed(c: LocalChain, key: SigningKey, memory_id: str, content: str,
              domain: str = "general") -> None:
    assert submit(c, key, memory_id, content, domain=domain).code == 0
    decide(c, memory_id, "accept")
    assert c.memory(memory_id)["status"] == "committed"  # type: ignore[index]


def test_a_committed_correction_supersedes_its_original_in_the_same_block(
        tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, AUTHOR, "fact-1", "the office opens at nine")
    assert submit(c, AUTHOR, "fact-1b", "the office opens at ten",
                  supersedes="fact-1").code == 0
    original = c.memory("fact-1")
    assert original is not None and original["pending_correction"] == "fact-1b"
    assert original["status"] == "committed"  # until the correction is decided
    decide(c, "fact-1b", "accept")
    original, correction = c.memory("fact-1"), c.memory("fact-1b")
    assert original is not None and correction is not None
    assert correction["status"] == "committed" and correction["supersedes"] == "fact-1"
    assert original["status"] == "superseded" and original["superseded_by"] == "fact-1b"
    assert "pending_correction" not in original
    assert original["history"][-1] == [c.height, "superseded"]  # the correction's block
    assert correction["decided_height"] == c.height


def test_a_rejected_correction_leaves_the_original_as_it_was(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, AUTHOR, "fact-2", "the bridge is closed on sundays")
    before = c.memory("fact-2")
    assert submit(c, AUTHOR, "fact-2b", "the bridge is closed on mondays",
                  supersedes="fact-2").code == 0
    decide(c, "fact-2b", "reject")
    assert c.memory("fact-2b")["status"] == "deprecated"  # type: ignore[index]
    assert c.memory("fact-2") == before
    # the original may be corrected again
    assert submit(c, AUTHOR, "fact-2c", "the bridge is closed on saturdays",
                  supersedes="fact-2").code == 0


def test_an_expired_correction_frees_its_original(tmp_path: Path) -> None:
    c = chain_at(tmp_path, ballot_expiry=10)
    committed(c, AUTHOR, "fact-3", "the lake freezes in january")
    before = c.memory("fact-3")
    assert submit(c, AUTHOR, "fact-3b", "the lake freezes in february",
                  supersedes="fact-3").code == 0
    for _ in range(11):
        c.block([])
    assert c.memory("fact-3b")["status"] == "deprecated"  # type: ignore[index]
    assert c.memory("fact-3") == before


def test_each_refusal_has_its_code(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, AUTHOR, "base", "the museum is free on fridays")
    assert submit(c, AUTHOR, "x1", "a correction of nothing at all",
                  supersedes="missing").code == Code.SUPERSEDES_NOT_FOUND
    assert submit(c, AUTHOR, "x2", "a correction in another domain",
                  domain="notes-of-author", supersedes="base").code == \
        Code.SUPERSEDES_OTHER_DOMAIN
    assert submit(c, PEER, "x3", "a peer may not correct this fact",
                  supersedes="base").code == Code.CORRECTION_DENIED
    assert submit(c, AUTHOR, "proposed-one", "still awaiting the validators").code == 0
    assert submit(c, AUTHOR, "x4", "correcting a memory not yet committed",
                  supersedes="proposed-one").code == Code.SUPERSEDES_NOT_COMMITTED
    assert submit(c, AUTHOR, "fix-1", "the museum is free on thursdays",
                  supersedes="base").code == 0
    assert submit(c, AUTHOR, "fix-2", "the museum is free on wednesdays",
                  supersedes="base").code == Code.SUPERSEDES_TAKEN
    decide(c, "fix-1", "accept")
    assert submit(c, AUTHOR, "fix-3", "the museum is free on tuesdays",
                  supersedes="base").code == Code.SUPERSEDES_TAKEN
    # the superseded memory is terminal: its id cannot be submitted again
    assert submit(c, AUTHOR, "base", "the museum is free on fridays").code == \
        Code.MEMORY_TERMINAL


def test_a_modify_holder_may_correct_and_a_writer_may_not(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, AUTHOR, "owned-1", "the build runs nightly", domain="team-notes")
    grants = [c.builder(AUTHOR).grant(c.next_nonce(AUTHOR), "team-notes",
                                      bytes(EDITOR.verify_key), "modify"),
              c.builder(AUTHOR).grant(c.next_nonce(AUTHOR), "team-notes",
                                      bytes(PEER.verify_key), "write")]
    assert [r.code for r in c.block(grants)] == [0, 0]
    assert submit(c, PEER, "owned-1p", "the build runs hourly", domain="team-notes",
                  supersedes="owned-1").code == Code.CORRECTION_DENIED
    assert submit(c, EDITOR, "owned-1e", "the build runs hourly", domain="team-notes",
                  supersedes="owned-1").code == 0
    decide(c, "owned-1e", "accept")
    assert c.memory("owned-1")["status"] == "superseded"  # type: ignore[index]


def test_origin_is_checked_for_shape_and_kept(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    good = {"chain_id": "other-chain", "height": 12, "memory_id": "m-1", "author": "ab" * 32}
    tx = c.builder(AUTHOR).submit(c.next_nonce(AUTHOR), "imported-1", "an imported fact here",
                                  origin=good)
    assert c.block([tx])[0].code == 0
    assert c.memory("imported-1")["origin"] == good  # type: ignore[index]
    for bad in ({**good, "author": "xyz"}, {**good, "height": 0}, {**good, "chain_id": ""},
                {**good, "memory_id": "a" * 200}):
        tx = c.builder(AUTHOR).submit(c.next_nonce(AUTHOR), "imported-2",
                                      "another imported fact", origin=bad)
        assert c.block([tx])[0].code == Code.INVALID_ORIGIN, bad


def test_below_v10_a_correction_is_not_canonical(tmp_path: Path) -> None:
    c = chain_at(tmp_path, version=9)
    committed(c, AUTHOR, "old-1", "a fact on an older chain")
    assert submit(c, AUTHOR, "old-1b", "its correction on an older chain",
                  supersedes="old-1").code == Code.BODY_NOT_CANONICAL


def test_a_v9_chain_upgrades_to_v10_and_gains_corrections_and_peer_disputes(
        tmp_path: Path) -> None:
    c = chain_at(tmp_path, version=9)
    v = c.validator_keys
    committed(c, AUTHOR, "up-1", "a fact written under v9")
    committed(c, AUTHOR, "up-2", "another fact written under v9")
    challenged = c.builder(PEER).challenge(c.next_nonce(PEER), "up-2", "wrong")
    assert c.block([challenged])[0].code == Code.CHALLENGE_DENIED
    correction = c.builder(AUTHOR).submit(c.next_nonce(AUTHOR), "up-1b", "its v10 correction",
                                          supersedes="up-1")
    assert c.check(correction).code == Code.BODY_NOT_CANONICAL  # not yet
    activation = c.height + 5
    tx = c.builder(v[0]).propose(c.next_nonce(v[0]), upgrade_proposal("v10", 10, activation))
    assert c.block([tx])[0].code == 0
    votes = [c.builder(v[i]).gov_vote(c.next_nonce(v[i]), "p1", "accept") for i in (3, 2)]
    assert [r.code for r in c.block(votes)] == [0, 0]
    while c.height < activation:
        c.block([])
    assert c.app.info(pb.RequestInfo()).app_version == 10
    assert c.block([correction])[0].code == 0
    decide(c, "up-1b", "accept")
    assert c.memory("up-1")["status"] == "superseded"  # type: ignore[index]
    challenged = c.builder(PEER).challenge(c.next_nonce(PEER), "up-2", "wrong")
    assert c.block([challenged])[0].code == 0
    assert c.memory("up-2")["status"] == "challenged"  # type: ignore[index]
