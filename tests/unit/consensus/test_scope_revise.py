"""scope_revise under app version 8 (docs/RULES.md, "Domains a scope releases" and
"Scopes"): a domain a revise drops is unclaimed again, the domains it keeps keep their
record, and a retired scope cannot be revised. Below v8 the old behaviour stays, so old
heights replay with the same codes and app hashes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey

from memledger.consensus import versions
from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk.txbuilder import scope_proposal, upgrade_proposal
from tests.support.chain import LocalChain, seeded_key

OUTSIDER, LATECOMER = seeded_key("scope-outsider"), seeded_key("scope-latecomer")
PARAMS = {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}


def make_chain(home: Path, version: int) -> LocalChain:
    return LocalChain(home, app_state={"app_version": version, "params": PARAMS})


def send(chain: LocalChain, key: SigningKey, method: str, *args: Any,
         **kwargs: Any) -> pb.ExecTxResult:
    tx = getattr(chain.builder(key), method)(chain.next_nonce(key), *args, **kwargs)
    return chain.block([tx])[0]


def record(chain: LocalChain, key: str) -> Any:
    raw = chain.app.store.get(key.encode())
    return None if raw is None else json.loads(raw)


def members(chain: LocalChain) -> list[tuple[bytes, int]]:
    v = chain.validator_keys
    return [(bytes(v[0].verify_key), 1), (bytes(v[1].verify_key), 1)]


def propose(chain: LocalChain, proposal: Any) -> str:
    """Open a proposal and return its id."""
    result = send(chain, chain.validator_keys[3], "propose", proposal)
    assert result.code == 0, result.log
    return f"p{record(chain, 'sys/gov')['next_id'] - 1}"


def pass_(chain: LocalChain, pid: str) -> dict[str, Any]:
    """70 of 100 power votes yes: the proposal passes at the end of this block."""
    v = chain.validator_keys
    votes = [chain.builder(v[i]).gov_vote(chain.next_nonce(v[i]), pid, "accept")
             for i in (3, 2)]
    assert [r.code for r in chain.block(votes)] == [0, 0]
    found: dict[str, Any] = record(chain, f"gov/{pid}")
    return found


def write(chain: LocalChain, key: SigningKey, domain: str) -> pb.ExecTxResult:
    mid = f"m-{bytes(key.verify_key).hex()[:8]}-{chain.height}"
    return send(chain, key, "submit", mid, f"a memory written into {domain}", domain=domain)


def create_then_drop(chain: LocalChain) -> tuple[int, int]:
    """Scope `ops` over ops and ops2, then a revise that drops ops2: (created, revised)."""
    assert pass_(chain, propose(chain, scope_proposal("create", "ops", ["ops", "ops2"],
                                                      members(chain))))["status"] == "executed"
    created = chain.height
    assert write(chain, chain.validator_keys[0], "ops2").code == 0  # a member writes
    assert pass_(chain, propose(chain, scope_proposal("revise", "ops", ["ops"],
                                                      members(chain))))["status"] == "executed"
    return created, chain.height


# ----------------------------------------------------------------- released domains
def test_before_v8_a_dropped_domain_is_writable_by_nobody(tmp_path: Path) -> None:
    chain = make_chain(tmp_path / "v7", 7)
    created, revised = create_then_drop(chain)
    # The rule as it was (replays keep it): no owner, no scope, no grant possible.
    assert record(chain, "dom/ops2") == {"owner": None, "scope": None, "created": revised}
    assert record(chain, "dom/ops")["created"] == revised  # kept, but "created" moved
    for key in (chain.validator_keys[0], chain.validator_keys[3], OUTSIDER):
        assert write(chain, key, "ops2").code == Code.DOMAIN_WRITE_DENIED
    assert send(chain, chain.validator_keys[0], "grant", "ops2", bytes(OUTSIDER.verify_key),
                "write").code == Code.GRANT_DENIED
    assert write(chain, OUTSIDER, "never-used").code == 0


def test_from_v8_a_dropped_domain_is_unclaimed_like_a_never_used_one(tmp_path: Path) -> None:
    assert versions.LATEST_APP_VERSION >= 8  # new chains get these rules
    chain = make_chain(tmp_path / "v8", 8)
    created, revised = create_then_drop(chain)
    assert record(chain, "dom/ops2") is None  # exactly a never-used domain's state
    assert record(chain, "dom/ops") == {"owner": None, "scope": "ops", "created": created}
    assert write(chain, chain.validator_keys[0], "ops").code == 0  # the kept one: members
    assert write(chain, OUTSIDER, "ops").code == Code.DOMAIN_WRITE_DENIED
    # The first writer of the released domain becomes its owner, and may grant it.
    assert write(chain, OUTSIDER, "ops2").code == 0
    assert record(chain, "dom/ops2") == {
        "owner": bytes(OUTSIDER.verify_key).hex(), "scope": None, "created": chain.height}
    assert write(chain, LATECOMER, "ops2").code == Code.DOMAIN_WRITE_DENIED
    assert send(chain, OUTSIDER, "grant", "ops2", bytes(LATECOMER.verify_key),
                "write").code == 0
    assert write(chain, LATECOMER, "ops2").code == 0
    # A later scope can no longer take it: it is owned now, as any claimed domain.
    assert send(chain, chain.validator_keys[3], "propose", scope_proposal(
        "create", "ops-b", ["ops2"], members(chain))).code == Code.GOV_INVALID_PROPOSAL


def test_domains_released_before_v8_become_writable_at_the_upgrade(tmp_path: Path) -> None:
    chain = make_chain(tmp_path / "c", 7)
    create_then_drop(chain)
    assert write(chain, OUTSIDER, "ops2").code == Code.DOMAIN_WRITE_DENIED
    activation = chain.height + 5
    assert pass_(chain, propose(chain, upgrade_proposal("memledger-v8", 8, activation))
                 )["status"] == "executed"
    while chain.height < activation:
        chain.block([])
    assert chain.app.info(pb.RequestInfo()).app_version == 8
    # The record the v7 release left (no owner, no scope) counts as unclaimed now.
    assert write(chain, OUTSIDER, "ops2").code == 0
    assert record(chain, "dom/ops2")["owner"] == bytes(OUTSIDER.verify_key).hex()
    assert write(chain, LATECOMER, "ops2").code == Code.DOMAIN_WRITE_DENIED


# ----------------------------------------------------------------- retired scopes
def _create_and_retire(chain: LocalChain) -> None:
    assert pass_(chain, propose(chain, scope_proposal("create", "ops", ["ops"],
                                                      members(chain))))["status"] == "executed"
    assert pass_(chain, propose(chain, scope_proposal("retire", "ops")))["status"] == \
        "executed"


def test_before_v8_a_retired_scope_could_be_revised(tmp_path: Path) -> None:
    chain = make_chain(tmp_path / "v7", 7)
    _create_and_retire(chain)
    revise = scope_proposal("revise", "ops", ["ops", "fresh"], members(chain))
    assert pass_(chain, propose(chain, revise))["status"] == "executed"  # as it was
    assert record(chain, "scope/ops")["domains"] == ["fresh", "ops"]
    assert write(chain, chain.validator_keys[0], "fresh").code == Code.SCOPE_NOT_ACTIVE


@pytest.mark.parametrize("kind", ["resume", "pause", "retire", "revise"])
def test_from_v8_a_retired_scope_refuses_every_change(tmp_path: Path, kind: str) -> None:
    chain = make_chain(tmp_path / "v8", 8)
    _create_and_retire(chain)
    args: tuple[Any, ...] = (["ops", "fresh"], members(chain)) if kind == "revise" else ()
    result = send(chain, chain.validator_keys[3], "propose",
                  scope_proposal(kind, "ops", *args))
    assert (result.code, result.log) == (Code.GOV_INVALID_PROPOSAL, "scope is retired")
    assert chain.check(chain.builder(OUTSIDER).submit(1, "x", "a memory", domain="fresh")
                       ).code == 0  # "fresh" stays a free domain


def test_from_v8_a_revise_open_when_its_scope_retires_fails_when_it_passes(
        tmp_path: Path) -> None:
    chain = make_chain(tmp_path / "v8", 8)
    assert pass_(chain, propose(chain, scope_proposal("create", "ops", ["ops"],
                                                      members(chain))))["status"] == "executed"
    revise = propose(chain, scope_proposal("revise", "ops", ["ops", "fresh"], members(chain)))
    assert pass_(chain, propose(chain, scope_proposal("retire", "ops")))["status"] == \
        "executed"
    before = record(chain, "scope/ops")
    outcome = pass_(chain, revise)
    assert (outcome["status"], outcome["failure"]) == ("failed", "scope is retired")
    assert outcome["closed_height"] == chain.height
    assert record(chain, "scope/ops") == before  # not revived, not extended
    assert record(chain, "dom/fresh") is None
