"""The v5 vote-reason rule: a memory vote may say why, the reason is kept with the vote in
the canonical record and shown by every node's REST/SDK; before v5 such a vote is refused
exactly as the binaries that predate the field refused it; the rule activates by upgrade.

The real-node check (the auto-voter's reasons reach another node's API) is in
tests/e2e/test_vote_reasons_net.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import sqlalchemy as sa
from nacl.signing import SigningKey

from memledger.api import queries, reasons
from memledger.consensus import versions
from memledger.consensus.block.execute import process_tx
from memledger.consensus.families.context import BlockInfo, KeyValueView
from memledger.consensus.gate.txcache import DecodedTxCache
from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.protocol.pb import tx_pb2
from memledger.sdk.txbuilder import TxBuilder, upgrade_proposal
from tests.support.chain import LocalChain, seeded_key
from tests.support.views import NoState
from tests.support.workload import run_in_fresh_process

AGENT = seeded_key("reason-agent")
GOV = {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}
TOO_SHORT = "content shorter than 8 characters"


def chain_at(home: Path, version: int) -> LocalChain:
    return LocalChain(home, powers=[10, 20, 30, 40],
                      app_state={"app_version": version, "params": GOV})


def vote(chain: LocalChain, i: int, memory_id: str, decision: str, reason: str = "",
         nonce: int | None = None) -> pb.ExecTxResult:
    key = chain.validator_keys[i]
    tx = chain.builder(key).vote(nonce or chain.next_nonce(key), memory_id, decision, reason)
    return chain.block([tx])[0]


def submit(chain: LocalChain, memory_id: str, content: str) -> None:
    tx = chain.builder(AGENT).submit(chain.next_nonce(AGENT), memory_id, content)
    assert chain.block([tx])[0].code == 0


def test_the_rule_table_names_the_field_and_its_version() -> None:
    assert versions.LATEST_APP_VERSION >= 5 and 5 in versions.SUPPORTED_APP_VERSIONS
    assert versions.FIELDS[("memory_vote", "reason")] == versions.RULES["vote_reason"] == 5
    with_reason = tx_pb2.MemoryVote(memory_id="m", reason="why")
    assert versions.fields_version("memory_vote", with_reason) == 5
    assert versions.fields_version("memory_vote", tx_pb2.MemoryVote(memory_id="m")) == 1


def test_a_vote_keeps_its_reason_and_every_surface_shows_it(tmp_path: Path) -> None:
    chain = chain_at(tmp_path / "c", 5)
    submit(chain, "m1", "tiny")
    assert vote(chain, 3, "m1", "reject", TOO_SHORT).code == 0
    assert vote(chain, 2, "m1", "reject").code == 0  # no reason: the pre-v5 shape
    assert vote(chain, 1, "m1", "reject", "same").code == 0
    assert vote(chain, 0, "m1", "abstain").code == 0  # all voted, no quorum: deprecated
    record = chain.memory("m1")
    assert record is not None and record["status"] == "deprecated"
    v = [bytes(k.verify_key).hex() for k in chain.validator_keys]
    assert record["votes"][v[3]] == ["reject", record["votes"][v[3]][1], TOO_SHORT]
    assert len(record["votes"][v[2]]) == 2
    engine = sa.create_engine(chain.db_url)
    with engine.connect() as conn:
        listed = {x["voter"]: x for x in queries.memory_votes(conn, "m1")}
        assert listed[v[3]]["reason"] == TOO_SHORT and listed[v[2]]["reason"] is None
        found = reasons.get_memory(conn, "m1", None)
    engine.dispose()
    assert found is not None
    assert found["status_reason"].startswith("rejected by validator votes")
    assert f"{v[3][:12]} voted reject: {TOO_SHORT}" in found["status_reason"]
    chain.close()


def test_a_reason_over_4_kib_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    chain = chain_at(tmp_path / "c", 5)
    submit(chain, "m1", "a memory long enough")
    key = chain.validator_keys[3]
    nonce = chain.next_nonce(key)
    result = vote(chain, 3, "m1", "accept", "é" * 2049, nonce=nonce)  # 4,098 bytes
    assert result.code == Code.VOTE_REASON_TOO_LONG and "4098 bytes" in result.log
    record = chain.memory("m1")
    assert record is not None and record["votes"] == {}
    assert vote(chain, 3, "m1", "accept", "é" * 2048, nonce=nonce).code == 0  # nonce unused


def test_before_v5_a_reason_is_refused_as_the_older_binaries_refused_it(
        tmp_path: Path) -> None:
    """Binaries before v5 did not know field 3 of MemoryVote: their canonical-form check
    dropped it, the bytes no longer matched, and the body was refused (code 5) before the
    chain id or the signature were looked at. The v4 rules here must answer the same."""
    chain = chain_at(tmp_path / "c", 4)
    submit(chain, "m1", "a memory long enough")
    key = chain.validator_keys[3]
    tx = chain.builder(key).vote(chain.next_nonce(key), "m1", "accept", "why")
    body = tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(tx).body)
    old_view = tx_pb2.TxBody()
    old_view.CopyFrom(body)
    old_view.memory_vote.ClearField("reason")  # what an older parser kept of it
    assert old_view.SerializeToString(deterministic=True) != tx_pb2.Tx.FromString(tx).body
    assert chain.check(tx).code == Code.BODY_NOT_CANONICAL
    assert chain.block([tx])[0].code == Code.BODY_NOT_CANONICAL
    other_chain = TxBuilder(key, "another-chain").vote(9, "m1", "accept", "why")
    bad_signature = bytearray(tx)
    bad_signature[-1] ^= 1
    results = chain.block([other_chain, bytes(bad_signature)])
    assert [r.code for r in results] == [Code.BODY_NOT_CANONICAL] * 2
    assert chain.memory("m1")["votes"] == {}  # type: ignore[index]
    assert vote(chain, 3, "m1", "accept").code == 0  # without a reason: as always
    # Under v5 the same kinds of tx meet the later checks instead.
    new = chain_at(tmp_path / "v5", 5)
    assert new.block([TxBuilder(key, "another-chain").vote(9, "m1", "accept", "why")]
                     )[0].code == Code.WRONG_CHAIN_ID


def test_the_rule_activates_by_upgrade(tmp_path: Path) -> None:
    chain = chain_at(tmp_path / "c", 4)
    v = chain.validator_keys
    submit(chain, "m1", "decided after the upgrade")
    activation = chain.height + 5
    tx = chain.builder(v[0]).propose(chain.next_nonce(v[0]),
                                     upgrade_proposal("vote-reasons", 5, activation))
    assert chain.block([tx])[0].code == 0
    txs = [chain.builder(v[i]).gov_vote(chain.next_nonce(v[i]), "p1", "accept")
           for i in (3, 2)]
    assert [r.code for r in chain.block(txs)] == [0, 0]
    cached = chain.builder(v[3]).vote(chain.next_nonce(v[3]), "m1", "accept", "checked it")
    assert chain.check(cached).code == Code.BODY_NOT_CANONICAL  # not yet
    while chain.height < activation:
        chain.block([])
    assert chain.app.info(pb.RequestInfo()).app_version == 5
    assert chain.check(cached).code == 0
    assert chain.block([cached])[0].code == 0
    record = chain.memory("m1")
    assert record is not None
    assert record["votes"][bytes(v[3].verify_key).hex()][2] == "checked it"


def test_decoded_once_the_version_gate_still_applies() -> None:
    """The node remembers txs that passed the stateless gate (CheckTx, then the block);
    a remembered tx must still meet the version part of that gate at every version."""
    key: SigningKey = seeded_key("validator-3")
    tx = TxBuilder(key, "reasons-chain").vote(7, "m1", "accept", "fine")
    cache = DecodedTxCache()
    v5 = BlockInfo(height=10, time_ns=10**18, chain_id="reasons-chain", app_version=5)
    assert process_tx(cast("KeyValueView", NoState()), v5, tx, apply=False, decoded=cache).code == \
        Code.MEMORY_NOT_FOUND  # past the gate: remembered
    assert len(cache) == 1
    v4 = BlockInfo(height=10, time_ns=10**18, chain_id="reasons-chain", app_version=4)
    assert process_tx(cast("KeyValueView", NoState()), v4, tx, apply=False, decoded=cache).code == \
        Code.BODY_NOT_CANONICAL


# ----------------------------------------------------------------------------- determinism
#: App hash after 24 blocks of the seed-77 shuffled workload at v5 (votes with reasons,
#: some too long). Pinned: a change here means the v5 rules or the layout changed.
GOLDEN_V5_APP_HASH_24 = "e8bf49f2bbc07c66d8376797ee5f5585a098b6eb09f9990d4acaefab6c03a4e5"


def test_v5_workload_is_byte_identical_across_processes_and_restarts(tmp_path: Path) -> None:
    first = run_in_fresh_process(tmp_path / "a", "1", restart_at=-1, app_version=5)
    second = run_in_fresh_process(tmp_path / "b", "999", restart_at=11, app_version=5)
    assert len(first) == 24 and first == second
    assert first["24"] == GOLDEN_V5_APP_HASH_24
