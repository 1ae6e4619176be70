"""App version 10: a validator CometBFT reports in FinalizeBlock's misbehaviour is removed
by the chain, through the same delayed change as a governance removal and within its
limits (never the last validator, never 1/3 of the power in one step); earlier versions
ignore the reports and keep their app hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from memledger.consensus.families.governance.misbehaviour import address_of
from memledger.consensus.store import codec
from memledger.protocol import records
from memledger.protocol.pb import abci_pb2 as pb
from tests.support.chain import GENESIS_TIME_S, LocalChain

DUPLICATE_VOTE = 1


def chain_at(home: Path, version: int, powers: list[int] | None = None) -> LocalChain:
    return LocalChain(home, powers=powers or [10, 20, 30, 40],
                      app_state={"app_version": version})


def block_with(c: LocalChain, *reported: bytes) -> pb.ResponseFinalizeBlock:
    req = pb.RequestFinalizeBlock(height=c.height + 1,
                                  time=pb.Timestamp(seconds=GENESIS_TIME_S + c.height + 1))
    for address in reported:
        m = req.misbehavior.add(type=DUPLICATE_VOTE, height=c.height, total_voting_power=100)
        m.validator.address = address
        m.validator.power = 10
    resp = c.app.finalize_block(req)
    c.app.commit(pb.RequestCommit())
    c.height += 1
    c.app_hashes[c.height] = resp.app_hash
    return resp


def key_hex(c: LocalChain, i: int) -> str:
    return bytes(c.validator_keys[i].verify_key).hex()


def members(c: LocalChain) -> dict[str, int]:
    raw = c.app.store.get(records.VALIDATORS)
    assert raw is not None
    return {m: int(p) for m, p in codec.decode(raw)["validators"]}


def events(resp: pb.ResponseFinalizeBlock) -> list[dict[str, str]]:
    return [{a.key: a.value for a in e.attributes} for e in resp.events
            if e.type == "misbehaviour"]


def test_double_signer_is_removed_two_blocks_later(tmp_path: Path) -> None:
    c = chain_at(tmp_path, 10)
    c.block([])
    liar = key_hex(c, 0)
    resp = block_with(c, address_of(liar))
    assert [(bytes(u.pub_key.ed25519).hex(), u.power) for u in resp.validator_updates] == \
        [(liar, 0)]
    assert events(resp) == [{"address": address_of(liar).hex().upper(),
                             "kind": "duplicate_vote", "validator": liar,
                             "action": "removed"}]
    assert liar in members(c)  # CometBFT applies it at H+2; so does the app's table
    c.block([])
    c.block([])
    assert liar not in members(c) and len(members(c)) == 3


def test_reported_twice_is_removed_once(tmp_path: Path) -> None:
    c = chain_at(tmp_path, 10)
    c.block([])
    liar = address_of(key_hex(c, 1))
    first = block_with(c, liar, liar)
    assert len(first.validator_updates) == 1
    assert [e["action"] for e in events(first)] == ["removed", "none"]
    again = block_with(c, liar)
    assert not again.validator_updates and events(again)[0]["action"] == "none"


def test_a_third_of_the_power_is_kept(tmp_path: Path) -> None:
    c = chain_at(tmp_path, 10)
    c.block([])
    big = key_hex(c, 3)  # 40 of 100
    resp = block_with(c, address_of(big))
    assert not resp.validator_updates
    assert events(resp)[0]["action"] == "kept"


def test_unknown_address_changes_nothing_but_the_event(tmp_path: Path) -> None:
    c = chain_at(tmp_path, 10)
    c.block([])
    resp = block_with(c, b"\x01" * 20)
    assert not resp.validator_updates and events(resp)[0]["action"] == "none"


@pytest.mark.parametrize("version", [9, 4, 1])
def test_earlier_versions_ignore_reports(tmp_path: Path, version: int) -> None:
    quiet, reported = chain_at(tmp_path / "a", version), chain_at(tmp_path / "b", version)
    quiet.block([])
    reported.block([])
    plain = block_with(quiet)
    resp = block_with(reported, address_of(key_hex(reported, 0)))
    assert not resp.validator_updates and not events(resp)
    assert resp.app_hash == plain.app_hash
