"""Every path a memory can take, on 4 validators with unequal power (10, 20, 30, 40)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nacl.signing import SigningKey

from memledger.consensus.families.governance import scopes
from memledger.protocol.codes import Code
from memledger.sdk.txbuilder import cocommit_core, sign_cocommit
from tests.support.chain import GENESIS_TIME_S, LocalChain, apply_direct, seeded_key

A, B, C, D = (seeded_key(f"agent-{n}") for n in "abcd")
S1, S2, S3 = (seeded_key(f"scope-member-{n}") for n in range(3))
SCOPE = {"id": "ops", "domains": ["ops"],
         "members": [[bytes(S1.verify_key).hex(), 5], [bytes(S2.verify_key).hex(), 3],
                     [bytes(S3.verify_key).hex(), 2]]}


@pytest.fixture()
def chain(tmp_path: Path) -> LocalChain:
    return LocalChain(tmp_path / "chain", app_state={"scopes": [SCOPE]})


def ok(results: list) -> None:  # type: ignore[type-arg]
    assert [r.code for r in results] == [0] * len(results), [r.log for r in results]


def submit(chain: LocalChain, key: SigningKey, mid: str, domain: str = "general") -> None:
    ok(chain.block([chain.builder(key).submit(chain.next_nonce(key), mid, f"memory {mid} body",
                                              domain=domain)]))


def vote(chain: LocalChain, key: SigningKey, mid: str, decision: str = "accept") -> int:
    return chain.block([chain.builder(key).vote(chain.next_nonce(key), mid, decision)])[0].code


def send(chain: LocalChain, key: SigningKey, method: str, *args: object) -> int:
    tx = getattr(chain.builder(key), method)(chain.next_nonce(key), *args)
    return chain.block([tx])[0].code


def status(chain: LocalChain, mid: str) -> str:
    return chain.memory(mid)["status"]  # type: ignore[index]


# ---------------------------------------------------------------- weighted quorum
def test_commit_by_weighted_quorum(chain: LocalChain) -> None:
    v10, v20, v30, v40 = chain.validator_keys
    submit(chain, A, "q1")
    assert vote(chain, v40, "q1") == 0 and vote(chain, v20, "q1") == 0
    assert status(chain, "q1") == "proposed"  # 60 of 100: 3*60 = 180, not > 200
    assert vote(chain, v10, "q1") == 0
    assert status(chain, "q1") == "committed"  # 70 of 100
    assert chain.memory("q1")["decided_height"] == chain.height  # type: ignore[index]


def test_silent_validators_count_in_denominator(chain: LocalChain) -> None:
    v10, v20, v30, v40 = chain.validator_keys
    submit(chain, A, "q2")
    vote(chain, v30, "q2")
    vote(chain, v10, "q2", "abstain")
    assert status(chain, "q2") == "proposed"


def test_deprecate_when_all_voted_without_quorum(chain: LocalChain) -> None:
    v10, v20, v30, v40 = chain.validator_keys
    submit(chain, A, "q3")
    vote(chain, v40, "q3")
    vote(chain, v20, "q3", "reject")
    vote(chain, v10, "q3", "abstain")
    assert status(chain, "q3") == "proposed"
    vote(chain, v30, "q3", "reject")
    assert status(chain, "q3") == "deprecated"
    assert vote(chain, v40, "q3") == Code.ALREADY_VOTED


def test_stale_vote_cannot_flip_terminal_memory(chain: LocalChain) -> None:
    v10, v20, v30, v40 = chain.validator_keys
    submit(chain, A, "q4")
    vote(chain, v40, "q4")
    vote(chain, v30, "q4")
    assert status(chain, "q4") == "committed"
    assert vote(chain, v20, "q4", "reject") == Code.MEMORY_NOT_PROPOSED
    assert status(chain, "q4") == "committed"


# ---------------------------------------------------------------- scoped ballots
def test_scoped_ballot_commit_with_pinned_weights_surviving_roster_change(
    chain: LocalChain,
) -> None:
    submit(chain, S1, "s1", domain="ops")
    ballot = chain.memory("s1")["ballot"]  # type: ignore[index]
    assert ballot["total"] == 10 and ballot["scope"] == "ops"
    # Roster change: S3 leaves, S1's weight drops to 1, a new heavy member joins.
    newcomer = seeded_key("newcomer")
    revised = scopes.make_spec("ops", ["ops"], [
        (bytes(S1.verify_key).hex(), 1), (bytes(S2.verify_key).hex(), 3),
        (bytes(newcomer.verify_key).hex(), 100)])
    apply_direct(chain, lambda st: scopes.apply_scope(st, revised, chain.height + 1,
                                                      chain.app.app_version))
    assert chain.memory("s1")["ballot"] == ballot  # type: ignore[index]
    # The newcomer is not on the pinned ballot; validators are not either.
    assert vote(chain, newcomer, "s1") == Code.NOT_A_SCOPE_MEMBER
    assert vote(chain, chain.validator_keys[3], "s1") == Code.NOT_A_SCOPE_MEMBER
    # S3 left the scope but is still on the pinned ballot; 5 + 2 = 7 of 10 > 2/3.
    assert vote(chain, S3, "s1") == 0
    assert status(chain, "s1") == "proposed"
    assert vote(chain, S1, "s1") == 0
    assert status(chain, "s1") == "committed"
    # A memory submitted after the revision pins the new roster (total 104).
    submit(chain, S2, "s2", domain="ops")
    assert chain.memory("s2")["ballot"]["total"] == 104  # type: ignore[index]


def test_scoped_ballot_deprecates_when_all_pinned_voted(chain: LocalChain) -> None:
    submit(chain, S2, "s3", domain="ops")
    assert vote(chain, S1, "s3", "reject") == 0
    assert vote(chain, S2, "s3") == 0
    assert status(chain, "s3") == "proposed"
    assert vote(chain, S3, "s3") == 0  # 3 + 2 = 5 of 10: no quorum, everyone voted
    assert status(chain, "s3") == "deprecated"


def test_scoped_domain_write_rules_and_paused_scope(chain: LocalChain) -> None:
    code = chain.block([chain.builder(A).submit(chain.next_nonce(A), "s4", "outsider",
                                                domain="ops")])[0].code
    assert code == Code.DOMAIN_WRITE_DENIED
    apply_direct(chain, lambda st: scopes.set_state(st, "ops", "paused", chain.height + 1))
    code = chain.block([chain.builder(S1).submit(chain.next_nonce(S1), "s5", "paused scope",
                                                 domain="ops")])[0].code
    assert code == Code.SCOPE_NOT_ACTIVE


# ---------------------------------------------------------------- grants
def test_grants_gate_writes_and_expire(chain: LocalChain) -> None:
    submit(chain, A, "g1", domain="lab")  # A now owns "lab"
    assert send(chain, B, "submit", "g2", "no grant yet", ) == 0  # general is shared
    code = chain.block([chain.builder(B).submit(chain.next_nonce(B), "g3", "denied",
                                                domain="lab")])[0].code
    assert code == Code.DOMAIN_WRITE_DENIED
    assert send(chain, A, "grant", "lab", bytes(B.verify_key), "read") == 0
    code = chain.block([chain.builder(B).submit(chain.next_nonce(B), "g3", "read only",
                                                domain="lab")])[0].code
    assert code == Code.DOMAIN_WRITE_DENIED
    assert send(chain, A, "grant", "lab", bytes(B.verify_key), "write", chain.height + 3) == 0
    code = chain.block([chain.builder(B).submit(chain.next_nonce(B), "g3", "granted write",
                                                domain="lab")])[0].code
    assert code == 0
    chain.block([])
    code = chain.block([chain.builder(B).submit(chain.next_nonce(B), "g4", "expired",
                                                domain="lab")])[0].code
    assert code == Code.DOMAIN_WRITE_DENIED
    assert send(chain, B, "grant", "lab", bytes(C.verify_key), "write") == Code.GRANT_DENIED
    assert send(chain, A, "grant", "general", bytes(C.verify_key), "write") == \
        Code.SHARED_DOMAIN_GRANT
    assert send(chain, A, "grant", "lab", bytes(A.verify_key), "write") == Code.INVALID_GRANTEE
    assert send(chain, A, "grant", "lab", bytes(C.verify_key), "write", 1) == \
        Code.GRANT_EXPIRY_PAST
    assert send(chain, A, "revoke", "lab", bytes(C.verify_key)) == Code.GRANT_NOT_FOUND
    assert send(chain, A, "revoke", "lab", bytes(B.verify_key)) == 0


# ---------------------------------------------------------------- disputes
def _committed_in_lab(chain: LocalChain, mid: str) -> None:
    submit(chain, A, mid, domain="lab")
    v10, v20, v30, v40 = chain.validator_keys
    vote(chain, v40, mid)
    vote(chain, v30, mid)
    assert status(chain, mid) == "committed"


def test_challenge_round_reaches_k_plus_one(chain: LocalChain) -> None:
    _committed_in_lab(chain, "d1")
    for holder in (B, C):
        assert send(chain, A, "grant", "lab", bytes(holder.verify_key), "modify") == 0
    assert send(chain, D, "corroborate", "d1") == 0
    assert send(chain, B, "corroborate", "d1") == 0
    # k = 2 corroborators (D, B); electorate = {B, C} ∪ {D, B} minus opener A.
    assert send(chain, A, "challenge", "d1", "outdated") == 0
    assert status(chain, "d1") == "challenged"
    assert send(chain, A, "challenge", "d1", "again") == Code.ALREADY_CHALLENGED
    assert send(chain, D, "challenge", "d1", "not allowed") == Code.CHALLENGE_DENIED
    assert send(chain, B, "challenge", "d1") == 0
    assert status(chain, "d1") == "challenged"
    assert send(chain, C, "challenge", "d1") == 0  # 3 = k + 1 challengers
    assert status(chain, "d1") == "deprecated"
    assert send(chain, B, "reinstate", "d1") == Code.MEMORY_NOT_CHALLENGED
    history = [s for _, s in chain.memory("d1")["history"]]  # type: ignore[index]
    assert history == ["proposed", "committed", "challenged", "deprecated"]


def test_challenge_with_no_corroborators_deprecates_at_once(chain: LocalChain) -> None:
    submit(chain, A, "d2")  # shared domain: the author may challenge
    v10, v20, v30, v40 = chain.validator_keys
    vote(chain, v40, "d2")
    vote(chain, v30, "d2")
    assert send(chain, B, "challenge", "d2") == Code.CHALLENGE_DENIED
    assert send(chain, A, "challenge", "d2", "mistake") == 0
    assert status(chain, "d2") == "deprecated"


def test_challenge_requires_committed(chain: LocalChain) -> None:
    submit(chain, A, "d3")
    assert send(chain, A, "challenge", "d3") == Code.MEMORY_NOT_COMMITTED
    assert send(chain, A, "challenge", "nope") == Code.MEMORY_NOT_FOUND


def test_reinstate_by_electorate_member(chain: LocalChain) -> None:
    _committed_in_lab(chain, "d4")
    assert send(chain, D, "corroborate", "d4") == 0
    assert send(chain, A, "challenge", "d4") == 0
    assert status(chain, "d4") == "challenged"
    assert send(chain, C, "reinstate", "d4") == Code.REINSTATE_DENIED
    assert send(chain, A, "reinstate", "d4") == Code.REINSTATE_DENIED  # opener is excluded
    # Corroborating during the round does not join the frozen electorate.
    assert send(chain, C, "corroborate", "d4") == Code.MEMORY_NOT_COMMITTED
    assert send(chain, D, "reinstate", "d4") == 0
    assert status(chain, "d4") == "committed"
    history = [s for _, s in chain.memory("d4")["history"]]  # type: ignore[index]
    assert history == ["proposed", "committed", "challenged", "committed"]


def test_corroboration_rules(chain: LocalChain) -> None:
    _committed_in_lab(chain, "d5")
    assert send(chain, A, "corroborate", "d5") == Code.CORROBORATE_BY_AUTHOR
    assert send(chain, B, "corroborate", "d5") == 0
    assert send(chain, B, "corroborate", "d5") == Code.ALREADY_CORROBORATED
    assert send(chain, C, "corroborate", "d5") == 0
    record = chain.memory("d5")
    assert record["status"] == "committed"  # type: ignore[index]
    assert record["corroborators"] == sorted(  # type: ignore[index]
        [bytes(B.verify_key).hex(), bytes(C.verify_key).hex()])
    assert send(chain, C, "corroborate", "missing") == Code.MEMORY_NOT_FOUND
    dump = chain.app.projection.dump()
    assert len([r for r in dump["corroborations"] if r[0] == "d5"]) == 2


# ---------------------------------------------------------------- co-commits
def _core(chain: LocalChain, keys: list[SigningKey], **kw: object) -> bytes:
    return cocommit_core(chain.chain_id, "jointly observed: the build is green",
                         [bytes(k.verify_key) for k in keys], **kw)  # type: ignore[arg-type]


def _sigs(core: bytes, keys: list[SigningKey]) -> list[tuple[bytes, bytes]]:
    return sorted(sign_cocommit(k, core) for k in keys)


def test_cocommit_commits_on_inclusion_and_rejects_replay(chain: LocalChain) -> None:
    core = _core(chain, [A, B, C])
    tx = chain.builder(B).cocommit(chain.next_nonce(B), core, _sigs(core, [A, B, C]))
    result = chain.block([tx])[0]
    assert result.code == 0, result.log
    mid = next(a.value for e in result.events if e.type == "cocommit"
               for a in e.attributes if a.key == "id")
    record = chain.memory(mid)
    assert record["status"] == "committed" and record["cocommit"] == mid  # type: ignore[index]
    assert len(record["coauthors"]) == 3  # type: ignore[index]
    rows = {r[0]: r for r in chain.app.projection.dump()["memories"]}
    assert rows[mid][4] == "jointly observed: the build is green"
    # Same tx again: nonce replay; same agreement from another coauthor: duplicate.
    assert chain.block([tx])[0].code == Code.NONCE_REPLAYED
    again = chain.builder(A).cocommit(chain.next_nonce(A), core, _sigs(core, [A, B, C]))
    assert chain.block([again])[0].code == Code.COCOMMIT_DUPLICATE
    assert send(chain, A, "corroborate", mid) == Code.CORROBORATE_BY_AUTHOR


def test_cocommit_rejections(chain: LocalChain) -> None:
    core = _core(chain, [A, B])
    sigs = _sigs(core, [A, B])
    bad = [(pk, sig if pk != bytes(A.verify_key) else bytes(64)) for pk, sig in sigs]
    assert send(chain, B, "cocommit", core, bad) == Code.COCOMMIT_BAD_SIGNATURE
    assert send(chain, C, "cocommit", core, sigs) == Code.COCOMMIT_SUBMITTER_NOT_COAUTHOR
    expired = _core(chain, [A, B], not_after_unix_ns=GENESIS_TIME_S * 10**9)
    assert send(chain, A, "cocommit", expired, _sigs(expired, [A, B])) == \
        Code.COCOMMIT_OUTSIDE_WINDOW
    future = _core(chain, [A, B], not_before_unix_ns=(GENESIS_TIME_S + 10**6) * 10**9)
    assert send(chain, A, "cocommit", future, _sigs(future, [A, B])) == \
        Code.COCOMMIT_OUTSIDE_WINDOW
    solo = _core(chain, [A])
    assert send(chain, A, "cocommit", solo, _sigs(solo, [A])) == Code.COCOMMIT_TOO_FEW_COAUTHORS
    assert send(chain, A, "cocommit", core, sigs[:1]) == Code.COCOMMIT_SIGNATURE_MISMATCH
    scoped = cocommit_core(chain.chain_id, "scoped", sorted([bytes(S1.verify_key),
                           bytes(S2.verify_key)]), domain="ops")
    assert send(chain, S1, "cocommit", scoped, _sigs(scoped, [S1, S2])) == \
        Code.COCOMMIT_SCOPED_DOMAIN
    other_chain = cocommit_core("elsewhere", "x y z", [bytes(A.verify_key), bytes(B.verify_key)])
    assert send(chain, A, "cocommit", other_chain, _sigs(other_chain, [A, B])) == \
        Code.COCOMMIT_WRONG_CHAIN
    unsorted = cocommit_core(chain.chain_id, "dup keys", [bytes(A.verify_key)] * 2)
    assert send(chain, A, "cocommit", unsorted, _sigs(unsorted, [A, A])) == \
        Code.COCOMMIT_COAUTHORS_UNSORTED
    assert send(chain, A, "cocommit", b"\xff\xff", sigs) == Code.COCOMMIT_CORE_DECODE
    assert send(chain, A, "cocommit", core + b"\x00", sigs) in (
        Code.COCOMMIT_CORE_DECODE, Code.COCOMMIT_CORE_NOT_CANONICAL)
    assert chain.app.projection.dump()["memories"] == []
