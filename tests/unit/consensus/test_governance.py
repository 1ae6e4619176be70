"""Governance rules on an in-process chain with validator powers 10, 20, 30, 40."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk.txbuilder import (
    param_proposal,
    scope_proposal,
    upgrade_proposal,
    validator_proposal,
)
from tests.support.chain import HaltCalled, LocalChain, seeded_key

OUTSIDER = seeded_key("outsider")
NEWBIE = seeded_key("new-validator")


@pytest.fixture()
def chain(tmp_path: Path) -> LocalChain:
    return LocalChain(tmp_path / "chain",
                      app_state={"params": {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}})


def tx(chain: LocalChain, key: SigningKey, method: str, *args: object) -> bytes:
    return getattr(chain.builder(key), method)(chain.next_nonce(key), *args)  # type: ignore[no-any-return]


def run(chain: LocalChain, key: SigningKey, method: str, *args: object) -> pb.ExecTxResult:
    return chain.block([tx(chain, key, method, *args)])[0]


def proposal(chain: LocalChain, pid: str) -> dict:  # type: ignore[type-arg]
    import json

    return json.loads(chain.app.store.get(b"gov/" + pid.encode()))  # type: ignore[arg-type]


def vote_all(chain: LocalChain, pid: str, voters: list[int], decision: str = "accept") -> None:
    txs = [tx(chain, chain.validator_keys[i], "gov_vote", pid, decision) for i in voters]
    assert [r.code for r in chain.block(txs)] == [0] * len(txs)


def test_param_change_passes_with_two_thirds_and_executes(chain: LocalChain) -> None:
    v = chain.validator_keys
    assert run(chain, v[0], "propose", param_proposal("gov_voting_period", 9)).code == 0
    vote_all(chain, "p1", [3, 2])  # 70 of 100
    p = proposal(chain, "p1")
    assert p["status"] == "executed" and p["executed_height"] == chain.height
    assert run(chain, v[1], "propose", param_proposal("gov_voting_period", 7)).code == 0
    assert proposal(chain, "p2")["voting_end"] == chain.height + 9


def test_rejected_when_quorum_impossible_and_expired_after_period(chain: LocalChain) -> None:
    v = chain.validator_keys
    run(chain, v[0], "propose", param_proposal("gov_voting_period", 9))
    vote_all(chain, "p1", [3], "reject")  # 40 against: at most 60 yes left
    assert proposal(chain, "p1")["status"] == "rejected"
    run(chain, v[0], "propose", param_proposal("gov_voting_period", 9))
    vote_all(chain, "p2", [0])
    for _ in range(5):
        chain.block([])
    assert proposal(chain, "p2")["status"] == "expired"
    assert run(chain, v[3], "gov_vote", "p2").code == Code.GOV_PROPOSAL_CLOSED


def test_governance_rejections(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "c", app_state={"params": {"gov_min_upgrade_delay": 3}})
    v = chain.validator_keys
    assert run(chain, OUTSIDER, "propose", param_proposal("gov_voting_period", 9)).code == \
        Code.GOV_NOT_VALIDATOR
    run(chain, v[0], "propose", param_proposal("gov_voting_period", 9))
    assert run(chain, OUTSIDER, "gov_vote", "p1").code == Code.GOV_NOT_VALIDATOR
    assert run(chain, v[0], "gov_vote", "p1").code == 0
    assert run(chain, v[0], "gov_vote", "p1", "reject").code == Code.GOV_ALREADY_VOTED
    assert run(chain, v[0], "gov_vote", "p9").code == Code.GOV_PROPOSAL_NOT_FOUND
    assert run(chain, v[1], "gov_cancel", "p1").code == Code.GOV_CANCEL_DENIED
    assert run(chain, v[0], "gov_cancel", "p1").code == 0
    assert run(chain, v[1], "gov_vote", "p1").code == Code.GOV_PROPOSAL_CLOSED
    assert run(chain, v[0], "propose", param_proposal("nope", 1)).code == Code.GOV_UNKNOWN_PARAM
    assert run(chain, v[0], "propose", param_proposal("gov_voting_period", 0)).code == \
        Code.GOV_INVALID_PARAM_VALUE
    h = chain.height
    assert run(chain, v[0], "propose", upgrade_proposal("v2", 2, h + 2)).code == \
        Code.GOV_ACTIVATION_TOO_SOON
    assert run(chain, v[0], "propose", upgrade_proposal("v1", 1, h + 50)).code == \
        Code.GOV_UNSUPPORTED_VERSION
    # Removing the 40-power validator is >= 1/3 of 100: unsafe.
    assert run(chain, v[0], "propose", validator_proposal(bytes(v[3].verify_key), 0)).code == \
        Code.GOV_UNSAFE_VALIDATOR_CHANGE
    assert run(chain, v[0], "propose", validator_proposal(bytes(OUTSIDER.verify_key), 0)).code \
        == Code.GOV_INVALID_PROPOSAL
    assert run(chain, v[0], "propose", scope_proposal("pause", "missing")).code == \
        Code.GOV_UNKNOWN_SCOPE


def test_validator_add_and_remove_take_effect_at_h_plus_2(chain: LocalChain) -> None:
    v = chain.validator_keys
    run(chain, v[0], "propose", validator_proposal(bytes(NEWBIE.verify_key), 25))
    txs = [tx(chain, v[i], "gov_vote", "p1") for i in (3, 2)]
    resp = chain.finalize(txs)
    chain.app.commit(pb.RequestCommit())
    chain.height += 1
    passed_at = chain.height
    assert [(u.pub_key.ed25519, u.power) for u in resp.validator_updates] == [
        (bytes(NEWBIE.verify_key), 25)]
    # At H+1 the newcomer is not a validator yet; from H+2 its votes count.
    submit = chain.builder(OUTSIDER).submit(chain.next_nonce(OUTSIDER), "m1", "validator test")
    assert chain.block([submit])[0].code == 0
    assert chain.height == passed_at + 1
    assert run(chain, NEWBIE, "vote", "m1").code == 0  # height passed_at + 2
    assert chain.memory("m1")["votes"]  # type: ignore[index]
    # Removal: 10-power validator, safe; its later votes are rejected from H+2.
    run(chain, v[1], "propose", validator_proposal(bytes(v[0].verify_key), 0))
    vote_all(chain, "p2", [3, 2, 1])
    removed_at = chain.height
    assert proposal(chain, "p2")["status"] == "executed"
    submit = chain.builder(OUTSIDER).submit(chain.next_nonce(OUTSIDER), "m2", "removal test")
    assert chain.block([submit])[0].code == 0
    assert run(chain, v[0], "vote", "m2").code == Code.NOT_A_VALIDATOR
    assert chain.height == removed_at + 2


def test_two_changes_of_one_key_in_one_block_reach_cometbft_as_one(chain: LocalChain
                                                                     ) -> None:
    """CometBFT refuses a block response naming a validator twice ("duplicate entry")
    and halts every node; the last change is the one the app's own table keeps."""
    v = chain.validator_keys
    newbie = bytes(NEWBIE.verify_key)
    chain.block([tx(chain, v[0], "propose", validator_proposal(newbie, 5)),
                 tx(chain, v[0], "propose", validator_proposal(newbie, 7))])
    txs = [tx(chain, v[i], "gov_vote", pid) for i in (3, 2) for pid in ("p1", "p2")]
    resp = chain.finalize(txs)
    assert [r.code for r in resp.tx_results] == [0] * 4
    chain.app.commit(pb.RequestCommit())
    chain.height += 1
    assert [(u.pub_key.ed25519, u.power) for u in resp.validator_updates] == [(newbie, 7)]
    chain.block([])
    chain.block([])  # from H+2 the app's table holds the change CometBFT was told of
    table = json.loads(chain.app.store.get(b"sys/validators") or b"{}")
    assert dict(table.get("validators", [])).get(newbie.hex()) == 7, table


@pytest.mark.parametrize("name, bad", [("gov_voting_period", 0), ("gov_voting_period", -5),
                                       ("gov_min_upgrade_delay", -100),
                                       ("gov_voting_period", 2_000_000)])
def test_genesis_params_are_held_to_the_bounds_governance_is(tmp_path: Path, name: str,
                                                             bad: int) -> None:
    """A voting period of 0 would leave governance dead for the chain's life, and no
    proposal could repair it: genesis is refused instead."""
    with pytest.raises(HaltCalled):
        LocalChain(tmp_path / "c", app_state={"params": {name: bad}})


KEY_HEX = "ab" * 32


@pytest.mark.parametrize("app_state, says", [
    ({"scopes": 5}, "scopes must be a list of scope objects, not an integer"),
    ({"scopes": "ops"}, "scopes must be a list of scope objects, not a string"),
    ({"scopes": {"id": "s"}}, "scopes must be a list of scope objects, not an object"),
    ({"params": ["gov_voting_period"]}, "genesis params must be a JSON object"),
    ({"params": None}, "genesis params must be a JSON object of name: value, not null"),
    ({"params": {"shared_domains": [1]}}, "'shared_domains' must be a list of strings"),
    ({"params": {"shared_domains": ["a", 1]}}, "not one holding an integer"),
    ({"params": {"shared_domains": [{"x": 1}]}}, "not one holding an object"),
    ({"params": {"shared_domains": ["a", ["b"]]}}, "not one holding a list"),
    ({"params": {"shared_domains": {"a": 1}}}, "'shared_domains' has the wrong type: an object"),
    ({"scopes": [{"id": "s", "domains": 5, "members": [[KEY_HEX, 1]]}]},
     "scopes[0]: scope 's': domains must be a list of strings, not an integer"),
    ({"scopes": [{"id": "s", "domains": "ops", "members": [[KEY_HEX, 1]]}]},
     "domains must be a list of strings, not a string"),
    ({"scopes": [{"id": "s", "domains": ["a", 1], "members": [[KEY_HEX, 1]]}]},
     "domains must be strings, not an integer"),
    ({"scopes": [{"id": "s", "domains": [{"d": 1}], "members": [[KEY_HEX, 1]]}]},
     "domains must be strings, not an object"),
    ({"scopes": [{"id": 7, "domains": ["d"], "members": [[KEY_HEX, 1]]}]},
     "scope id must be a string, not an integer"),
    ({"scopes": [{"id": "s", "domains": ["d"], "members": 3}]},
     "members must be a list of [hex key, weight], not an integer"),
    ({"scopes": [{"id": "s", "domains": ["d"], "members": {KEY_HEX: 1}}]},
     "members must be a list of [hex key, weight], not an object"),
    ({"scopes": [{"id": "s", "domains": ["d"], "members": [[KEY_HEX, "1"]]}]},
     "member weight must be a positive integer"),
    ({"scopes": [{"id": "s", "domains": ["d"], "members": [[1, 1]]}]},
     "member key must be 64 lowercase hex chars"),
])
def test_malformed_genesis_app_state_halts_naming_the_field(
        tmp_path: Path, app_state: dict[str, object], says: str) -> None:
    """A hand-written genesis of the wrong shape halts InitChain with one message naming
    the field (it raised a raw TypeError/AttributeError, or took `[1]` as a domain)."""
    with pytest.raises(HaltCalled) as halted:
        LocalChain(tmp_path / "c", app_state=app_state)
    assert says in str(halted.value)


def test_genesis_scope_of_the_right_shape_still_starts(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "c", app_state={
        "params": {"shared_domains": ["general", "news"]},
        "scopes": [{"id": "s", "domains": ["ops"], "members": [[KEY_HEX, 2]]}]})
    chain.block([])  # genesis is written with the first block
    assert json.loads(chain.app.store.get(b"sys/params") or b"{}")["shared_domains"] == \
        ["general", "news"]
    assert json.loads(chain.app.store.get(b"scope/s") or b"{}")["domains"] == ["ops"]


def test_pinned_ballot_member_cannot_be_removed(tmp_path: Path) -> None:
    c = LocalChain(tmp_path / "c", powers=[10, 20, 30, 40])
    v = c.validator_keys
    members = [(bytes(v[0].verify_key), 1), (bytes(v[1].verify_key), 1)]
    run(c, v[3], "propose", scope_proposal("create", "ops", ["ops"], members))
    vote_all(c, "p1", [3, 2])
    assert proposal(c, "p1")["status"] == "executed"
    assert run(c, v[0], "submit", "s1", "scoped memory body", ).code == 0
    submit = c.builder(v[0]).submit(c.next_nonce(v[0]), "s2", "scoped memory", domain="ops")
    assert c.block([submit])[0].code == 0
    assert run(c, v[3], "propose", validator_proposal(bytes(v[0].verify_key), 0)).code == \
        Code.GOV_VALIDATOR_PINNED
    vote_all(c, "p1", []) if False else None
    assert run(c, v[0], "vote", "s2").code == 0
    assert run(c, v[1], "vote", "s2").code == 0
    assert c.memory("s2")["status"] == "committed"  # type: ignore[index]
    assert run(c, v[3], "propose", validator_proposal(bytes(v[0].verify_key), 0)).code == 0


def test_upgrade_activates_gated_rule_and_old_binary_halts(tmp_path: Path) -> None:
    c = LocalChain(tmp_path / "c",
                   app_state={"params": {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}})
    v = c.validator_keys
    agent, other = seeded_key("a"), seeded_key("b")
    assert run(c, agent, "submit", "pre", "proposed memory v1").code == 0
    assert run(c, other, "corroborate", "pre").code == 0  # v1: allowed while proposed
    activation = c.height + 4
    assert run(c, v[0], "propose", upgrade_proposal("memledger-v2", 2, activation)).code == 0
    vote_all(c, "p1", [3, 2])
    while c.height < activation - 1:
        c.block([])
    resp = c.finalize([])
    assert resp.consensus_param_updates.version.app == 2
    c.app.commit(pb.RequestCommit())
    c.height += 1
    assert c.app.info(pb.RequestInfo()).app_version == 2
    assert run(c, agent, "submit", "post", "proposed memory v2").code == 0
    assert run(c, other, "corroborate", "post").code == Code.MEMORY_NOT_COMMITTED  # v2 rule
    # A binary that only knows v1 halts before executing the next block.
    c.close()
    from memledger.consensus.app import MemLedgerApp
    from memledger.consensus.store.state import CanonicalStore
    from memledger.projection.writer import Projection

    halts: list[str] = []

    def on_halt(msg: str) -> None:
        halts.append(msg)
        raise HaltCalled(msg)

    old = MemLedgerApp(CanonicalStore(str(c.home / "state")), Projection(c.db_url),
                       on_halt=on_halt, supported_versions=frozenset({1}))
    with pytest.raises(HaltCalled):
        old.finalize_block(pb.RequestFinalizeBlock(height=c.height + 1))
    assert halts[0].startswith("upgrade required: memledger-v2")


def _unpassed_upgrade(tmp_path: Path, version: int) -> tuple[LocalChain, int]:
    """A chain at `version` with an upgrade proposal p1 that only 10 of 100 power backs,
    activating well inside its voting period (20 blocks)."""
    c = LocalChain(tmp_path / f"v{version}", app_state={
        "app_version": version, "params": {"gov_voting_period": 20, "gov_min_upgrade_delay": 3}})
    v = c.validator_keys
    activation = c.height + 5
    assert run(c, v[0], "propose", upgrade_proposal("next", version + 1, activation)).code == 0
    assert run(c, v[0], "gov_vote", "p1").code == 0
    return c, activation


def test_before_v8_an_upgrade_takes_votes_after_its_activation_height(tmp_path: Path) -> None:
    c, activation = _unpassed_upgrade(tmp_path, 7)
    while c.height < activation:
        c.block([])
    assert proposal(c, "p1")["status"] == "open"  # the rule as it was: replays keep it
    vote_all(c, "p1", [3, 2])
    p = proposal(c, "p1")
    assert (p["status"], p["failure"]) == ("failed", "passed after its activation height")


def test_from_v8_an_upgrade_not_passed_before_its_activation_height_expires(
        tmp_path: Path) -> None:
    c, activation = _unpassed_upgrade(tmp_path, 8)
    while c.height < activation - 2:
        c.block([])
    assert proposal(c, "p1")["status"] == "open"
    c.block([])  # block activation - 1: the last one in which it could pass
    p = proposal(c, "p1")
    assert p["status"] == "expired" and p["closed_height"] == activation - 1
    assert p["failure"] == f"not passed before its activation height {activation}"
    assert p["voting_end"] > activation  # its voting period had not ended
    result = run(c, c.validator_keys[3], "gov_vote", "p1")
    assert result.code == Code.GOV_PROPOSAL_CLOSED, result.log
    assert c.app.store.get(b"sys/upgrade") is None


def test_from_v8_an_upgrade_may_still_pass_in_the_block_before_activation(
        tmp_path: Path) -> None:
    c, activation = _unpassed_upgrade(tmp_path, 8)
    while c.height < activation - 2:
        c.block([])
    vote_all(c, "p1", [3, 2])  # block activation - 1
    p = proposal(c, "p1")
    assert p["status"] == "executed" and p["executed_height"] == activation - 1
    assert json.loads(c.app.store.get(b"sys/upgrade") or b"{}")["activation_height"] == \
        activation


def test_from_v8_other_proposals_keep_their_voting_period(tmp_path: Path) -> None:
    c = LocalChain(tmp_path / "c", app_state={"app_version": 8, "params": {
        "gov_voting_period": 5}})
    v = c.validator_keys
    assert run(c, v[0], "propose", param_proposal("gov_voting_period", 9)).code == 0
    submitted = c.height
    while c.height < submitted + 4:
        c.block([])
    vote_all(c, "p1", [3, 2])  # at the last height of its period
    assert proposal(c, "p1")["status"] == "executed" and "failure" not in proposal(c, "p1")
