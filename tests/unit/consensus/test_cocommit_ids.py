"""From app version 7 a co-commit's id is its own: a plain submit cannot take an id that
starts `cc-`. Before, anyone who saw the co-commit in the mempool could derive its id and
submit a memory under it first; the co-commit then failed as a duplicate, every time."""

from __future__ import annotations

from pathlib import Path

from nacl.signing import SigningKey

from memledger.consensus import versions
from memledger.consensus.families.cocommit.handlers import shared_id
from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.protocol.pb import tx_pb2
from memledger.sdk.txbuilder import cocommit_core, sign_cocommit, upgrade_proposal
from tests.support.chain import LocalChain, seeded_key

A, B, SQUATTER = seeded_key("cc-a"), seeded_key("cc-b"), seeded_key("cc-squatter")


def _cocommit(chain: LocalChain, text: str) -> tuple[bytes, str]:
    """A co-commit tx by A and B, and the id anyone can read off it in the mempool."""
    keys = sorted([bytes(A.verify_key), bytes(B.verify_key)])
    core = cocommit_core(chain.chain_id, text, keys)
    tx = chain.builder(A).cocommit(chain.next_nonce(A), core,
                                   sorted(sign_cocommit(k, core) for k in (A, B)))
    seen = tx_pb2.CoCommitCore.FromString(tx_pb2.TxBody.FromString(
        tx_pb2.Tx.FromString(tx).body).cocommit_submit.core)
    return tx, shared_id(seen.content_hash, list(seen.coauthors), seen.agreement_nonce)


def _squat(chain: LocalChain, key: SigningKey, memory_id: str) -> bytes:
    return chain.builder(key).submit(chain.next_nonce(key), memory_id, "taken first")


def test_before_v7_a_squatter_blocks_the_cocommit(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "v6", app_state={"app_version": 6})
    cocommit, taken = _cocommit(chain, "jointly seen: the build is green")
    codes = [r.code for r in chain.block([_squat(chain, SQUATTER, taken), cocommit])]
    assert codes == [0, Code.COCOMMIT_DUPLICATE]  # the rule as it was: replays keep it


def test_from_v7_cc_ids_are_the_cocommits_alone(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "v7", app_state={"app_version": 7})
    assert versions.LATEST_APP_VERSION >= 7
    cocommit, taken = _cocommit(chain, "jointly seen: the build is green")
    results = chain.block([_squat(chain, SQUATTER, taken), cocommit])
    assert [r.code for r in results] == [Code.INVALID_MEMORY_ID, 0], results[0].log
    record = chain.memory(taken)
    assert record is not None and record["cocommit"] == taken
    assert record["author"] != bytes(SQUATTER.verify_key).hex()
    for other in ("cc-anything", "cc-"):  # any id of that form, derived or not
        assert chain.block([_squat(chain, SQUATTER, other)])[0].code == Code.INVALID_MEMORY_ID
    assert chain.block([_squat(chain, SQUATTER, "ccx-fine")])[0].code == 0


def test_the_rule_activates_by_upgrade_and_earlier_squats_stay(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "c", powers=[10, 20, 30, 40], app_state={
        "app_version": 6, "params": {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}})
    v = chain.validator_keys
    assert chain.block([_squat(chain, SQUATTER, "cc-before")])[0].code == 0
    activation = chain.height + 5
    chain.block([chain.builder(v[0]).propose(chain.next_nonce(v[0]),
                                             upgrade_proposal("memledger-v7", 7, activation))])
    votes = [chain.builder(v[i]).gov_vote(chain.next_nonce(v[i]), "p1", "accept")
             for i in (3, 2)]
    assert [r.code for r in chain.block(votes)] == [0, 0]
    while chain.height < activation:
        chain.block([])
    assert chain.app.info(pb.RequestInfo()).app_version == 7
    assert chain.block([_squat(chain, SQUATTER, "cc-after")])[0].code == Code.INVALID_MEMORY_ID
    assert chain.memory("cc-before") is not None  # taken under v6: kept
