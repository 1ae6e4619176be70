"""Calling off a scheduled upgrade (v9, GovPropose.upgrade_cancel), on an in-process chain
with validator powers 10, 20, 30, 40.

Before v9 a passed upgrade could not be removed: one scheduled with a wrong height or for
a faulty release had to run, and until it did every later upgrade was refused.
"""

from __future__ import annotations

import json
from pathlib import Path

from memledger.consensus import versions
from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.protocol.pb import tx_pb2
from memledger.sdk.txbuilder import upgrade_cancel_proposal, upgrade_proposal
from tests.support.chain import LocalChain, seeded_key
from tests.unit.consensus.test_governance import proposal, run, vote_all


def _chain(tmp_path: Path, version: int, voting_period: int = 5) -> LocalChain:
    return LocalChain(tmp_path / f"v{version}", app_state={"app_version": version, "params": {
        "gov_voting_period": voting_period, "gov_min_upgrade_delay": 3}})


def _scheduled(c: LocalChain, name: str, app_version: int, activation: int) -> str:
    """Propose and pass an upgrade; its proposal id."""
    pid = f"p{json.loads(c.app.store.get(b'sys/gov') or b'{}').get('next_id', 1)}"
    assert run(c, c.validator_keys[0], "propose",
               upgrade_proposal(name, app_version, activation)).code == 0
    vote_all(c, pid, [3, 2])
    assert proposal(c, pid)["status"] == "executed"
    return pid


def _plan(c: LocalChain) -> dict | None:  # type: ignore[type-arg]
    raw = c.app.store.get(b"sys/upgrade")
    return None if raw is None else json.loads(raw)  # type: ignore[no-any-return]


def test_a_cancelled_upgrade_never_activates_and_a_new_one_can_be_scheduled(
        tmp_path: Path) -> None:
    c = _chain(tmp_path, 9)
    v = c.validator_keys
    far = c.height + 10_000  # the mistake: a height nobody meant
    _scheduled(c, "v10-wrong", 10, far)
    refused = run(c, v[0], "propose", upgrade_proposal("v10", 10, c.height + 20))
    assert refused.code == Code.GOV_INVALID_PROPOSAL
    assert "another upgrade is already scheduled" in refused.log

    result = run(c, v[1], "propose", upgrade_cancel_proposal("v10-wrong", "wrong height"))
    assert result.code == 0, result.log
    cancel = proposal(c, "p2")
    assert (cancel["kind"], cancel["payload"]) == (
        "upgrade_cancel", {"name": "v10-wrong", "upgrade_proposal": "p1"})
    assert _plan(c) is not None  # nothing changes until the cancel passes
    txs = [c.builder(v[i]).gov_vote(c.next_nonce(v[i]), "p2", "accept") for i in (3, 2)]
    resp = c.finalize(txs)
    c.app.commit(pb.RequestCommit())
    c.height += 1
    assert proposal(c, "p2")["status"] == "executed"
    assert _plan(c) is None
    events = [(e.type, {a.key: a.value for a in e.attributes}) for e in resp.events]
    assert ("upgrade_cancelled", {"name": "v10-wrong", "app_version": "10",
                                  "activation_height": str(far),
                                  "upgrade_proposal": "p1"}) in events

    _scheduled(c, "v10", 10, c.height + 20)  # the right one now goes through
    assert _plan(c)["name"] == "v10"  # type: ignore[index]


def test_a_cancel_passing_in_the_activation_block_still_prevents_it(tmp_path: Path) -> None:
    c = _chain(tmp_path, 9)
    activation = c.height + 8
    _scheduled(c, "v10", 10, activation)
    assert run(c, c.validator_keys[0], "propose", upgrade_cancel_proposal("v10")).code == 0
    while c.height < activation - 1:
        c.block([])
    v = c.validator_keys
    txs = [c.builder(v[i]).gov_vote(c.next_nonce(v[i]), "p2", "accept") for i in (3, 2)]
    resp = c.finalize(txs)  # block `activation`: tallies run before the plan is looked at
    assert resp.consensus_param_updates.version.app == 0
    c.app.commit(pb.RequestCommit())
    c.height += 1
    assert c.app.info(pb.RequestInfo()).app_version == 9
    assert _plan(c) is None and proposal(c, "p2")["status"] == "executed"


def test_a_cancel_names_the_scheduled_upgrade(tmp_path: Path) -> None:
    c = _chain(tmp_path, 9)
    v = c.validator_keys
    none = run(c, v[0], "propose", upgrade_cancel_proposal("v10"))
    assert none.code == Code.GOV_INVALID_PROPOSAL and "no upgrade is scheduled" in none.log
    _scheduled(c, "v10", 10, c.height + 50)
    other = run(c, v[0], "propose", upgrade_cancel_proposal("v11"))
    assert other.code == Code.GOV_INVALID_PROPOSAL
    assert "the scheduled upgrade is 'v10', not 'v11'" in other.log
    outsider = run(c, seeded_key("not-a-validator"), "propose",
                   upgrade_cancel_proposal("v10"))
    assert outsider.code == Code.GOV_NOT_VALIDATOR


def test_a_cancel_whose_upgrade_activated_meanwhile_fails(tmp_path: Path) -> None:
    c = _chain(tmp_path, 9, voting_period=30)
    c.app.supported_versions = versions.SUPPORTED_APP_VERSIONS | {10}  # a binary that has v10
    activation = c.height + 8
    _scheduled(c, "v10", 10, activation)
    assert run(c, c.validator_keys[0], "propose", upgrade_cancel_proposal("v10")).code == 0
    while c.height <= activation:
        c.block([])
    assert c.app.info(pb.RequestInfo()).app_version == 10
    vote_all(c, "p2", [3, 2])
    p = proposal(c, "p2")
    assert p["status"] == "failed" and "no upgrade is scheduled" in p["failure"]


def test_before_v9_a_cancel_is_not_canonical_whatever_its_name(tmp_path: Path) -> None:
    c = _chain(tmp_path, 8)
    _scheduled(c, "v9", 9, c.height + 50)
    for name in ("v9", ""):  # a oneof member set to "" is on the wire too
        result = run(c, c.validator_keys[0], "propose", upgrade_cancel_proposal(name))
        assert result.code == Code.BODY_NOT_CANONICAL, (name, result.log)
    assert _plan(c)["name"] == "v9"  # type: ignore[index]


def test_an_empty_name_is_a_cancel_of_nothing_at_v9(tmp_path: Path) -> None:
    c = _chain(tmp_path, 9)
    assert tx_pb2.GovPropose(upgrade_cancel="").WhichOneof("kind") == "upgrade_cancel"
    result = run(c, c.validator_keys[0], "propose", upgrade_cancel_proposal(""))
    assert result.code == Code.GOV_INVALID_PROPOSAL and "no upgrade is scheduled" in result.log


def test_a_cancel_holds_to_the_plan_its_voters_were_shown(tmp_path: Path) -> None:
    """Two cancels of one plan: the first passes and the upgrade is scheduled again under
    the same name. The second, passing later, fails: it was voted on p1's plan, not p4's.
    Bound by name alone it removed the new plan."""
    c = _chain(tmp_path, 9, voting_period=30)
    v = c.validator_keys
    _scheduled(c, "v10", 10, c.height + 10_000)  # p1, the wrong height
    assert run(c, v[0], "propose", upgrade_cancel_proposal("v10")).code == 0  # p2
    assert run(c, v[1], "propose", upgrade_cancel_proposal("v10")).code == 0  # p3
    vote_all(c, "p2", [3, 2])
    assert proposal(c, "p2")["status"] == "executed" and _plan(c) is None
    _scheduled(c, "v10", 10, c.height + 50)  # p4, the right one
    vote_all(c, "p3", [3, 2])
    p3 = proposal(c, "p3")
    assert p3["status"] == "failed", p3
    assert p3["failure"] == ("the scheduled upgrade 'v10' is the one p4 scheduled, not the "
                             "one p1 scheduled that this cancel names")
    assert _plan(c)["proposal"] == "p4"  # type: ignore[index]
