"""v10 peer disputes (families/disputes/peer.py): anyone who may write a domain may
dispute a memory in it; the memory's electorate decides with MemoryVote; limits per key
per block and open; an undecided dispute expires back to committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from tests.support.chain import LocalChain, seeded_key

AUTHOR = seeded_key("peer-author")
PEER = seeded_key("peer-b")
OTHER = seeded_key("peer-c")
GOV = {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}


def chain_at(home: Path, version: int = 10, **params: int) -> LocalChain:
    return LocalChain(home, powers=[10, 20, 30, 40],
                      app_state={"app_version": version, "params": {**GOV, **params}})


def committed(c: LocalChain, memory_id: str, domain: str = "general") -> None:
    tx = c.builder(AUTHOR).submit(c.next_nonce(AUTHOR), memory_id, f"fact {memory_id} holds",
                                  domain=domain)
    assert c.block([tx])[0].code == 0
    votes = [c.builder(k).vote(c.next_nonce(k), memory_id) for k in c.validator_keys]
    c.block(votes)
    assert c.memory(memory_id)["status"] == "committed"  # type: ignore[index]


def challenge(c: LocalChain, key: SigningKey, memory_id: str,
              reason: str = "wrong") -> pb.ExecTxResult:
    return c.block([c.builder(key).challenge(c.next_nonce(key), memory_id, reason)])[0]


def vote(c: LocalChain, i: int, memory_id: str, decision: str) -> pb.ExecTxResult:
    k = c.validator_keys[i]
    return c.block([c.builder(k).vote(c.next_nonce(k), memory_id, decision, "checked")])[0]


def rounds(c: LocalChain, memory_id: str) -> list[dict[str, Any]]:
    import json
    raw = c.app.store.get(b"chal/" + memory_id.encode())
    assert raw is not None
    return list(json.loads(raw)["rounds"])


def test_a_peer_in_general_opens_a_dispute_the_electorate_upholds(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, "g-1")
    assert challenge(c, PEER, "g-1", "the date is wrong").code == 0
    assert c.memory("g-1")["status"] == "challenged"  # type: ignore[index]
    round_ = rounds(c, "g-1")[-1]
    assert round_["kind"] == "peer" and round_["outcome"] is None
    assert round_["reasons"] == {bytes(PEER.verify_key).hex(): "the date is wrong"}
    assert vote(c, 3, "g-1", "reject").code == 0   # 40 of 100
    assert c.memory("g-1")["status"] == "challenged"  # type: ignore[index]
    assert vote(c, 2, "g-1", "reject").code == 0   # 70 of 100 > 2/3
    assert c.memory("g-1")["status"] == "deprecated"  # type: ignore[index]
    assert rounds(c, "g-1")[-1]["outcome"] == "deprecated"
    assert vote(c, 1, "g-1", "reject").code == Code.ALREADY_VOTED  # its proposal ballot
    assert c.memory("g-1")["status"] == "deprecated"  # type: ignore[index]


def test_the_electorate_may_keep_it(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, "g-2")
    assert challenge(c, PEER, "g-2").code == 0
    assert vote(c, 3, "g-2", "accept").code == 0
    assert vote(c, 3, "g-2", "accept").code == Code.ALREADY_VOTED
    assert vote(c, 2, "g-2", "accept").code == 0
    assert c.memory("g-2")["status"] == "committed"  # type: ignore[index]
    assert rounds(c, "g-2")[-1]["outcome"] == "kept"
    # a later round may open again; the first one's challenger is free again
    assert challenge(c, PEER, "g-2").code == 0


def test_outsiders_vote_not_and_reinstate_cannot_shortcut(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, "g-3")
    assert challenge(c, PEER, "g-3").code == 0
    tx = c.builder(OTHER).vote(c.next_nonce(OTHER), "g-3", "accept")
    assert c.block([tx])[0].code == Code.NOT_A_VALIDATOR
    k = c.validator_keys[0]
    assert c.block([c.builder(k).reinstate(c.next_nonce(k), "g-3")])[0].code == \
        Code.REINSTATE_DENIED


def test_one_challenge_per_key_per_round_and_others_join(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, "g-4")
    assert challenge(c, PEER, "g-4").code == 0
    assert challenge(c, PEER, "g-4").code == Code.ALREADY_CHALLENGED
    assert challenge(c, OTHER, "g-4", "me too").code == 0
    # a joiner opened nothing: no record of its own is left behind
    assert c.app.store.get(b"pchl/" + bytes(OTHER.verify_key).hex().encode()) is None
    assert sorted(rounds(c, "g-4")[-1]["challengers"]) == sorted(
        [bytes(PEER.verify_key).hex(), bytes(OTHER.verify_key).hex()])


def test_per_block_and_open_limits(tmp_path: Path) -> None:
    c = chain_at(tmp_path, peer_challenges_per_block=2, peer_disputes_open=3)
    for i in range(5):
        committed(c, f"l-{i}")
    txs = [c.builder(PEER).challenge(c.next_nonce(PEER), f"l-{i}") for i in range(3)]
    assert [r.code for r in c.block(txs)] == [0, 0, Code.PEER_CHALLENGE_LIMIT]
    assert challenge(c, PEER, "l-2").code == 0  # the next block: room again
    limited = challenge(c, PEER, "l-3")
    assert limited.code == Code.PEER_CHALLENGE_LIMIT and "peer_disputes_open" in limited.log
    for i in range(4):  # the electorate keeps l-0: PEER holds two open disputes again
        vote(c, i, "l-0", "accept")
    assert challenge(c, PEER, "l-3").code == 0


def test_undecided_it_expires_back_to_committed(tmp_path: Path) -> None:
    c = chain_at(tmp_path, ballot_expiry=10)
    committed(c, "g-5")
    assert challenge(c, PEER, "g-5").code == 0
    opened = c.height
    while c.height < opened + 9:
        c.block([])
    assert c.memory("g-5")["status"] == "challenged"  # type: ignore[index]
    c.block([])
    assert c.memory("g-5")["status"] == "committed"  # type: ignore[index]
    assert rounds(c, "g-5")[-1]["outcome"] == "expired"
    assert c.app.store.get(b"pchl/" + bytes(PEER.verify_key).hex().encode()) is None


def test_a_refusal_names_the_right_and_how_to_get_it(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, "o-1", domain="private-notes")
    refused = challenge(c, PEER, "o-1")
    assert refused.code == Code.CHALLENGE_DENIED
    assert "write access" in refused.log and "memledger grant private-notes" in refused.log
    tx = c.builder(AUTHOR).grant(c.next_nonce(AUTHOR), "private-notes",
                                 bytes(PEER.verify_key), "write")
    assert c.block([tx])[0].code == 0
    assert challenge(c, PEER, "o-1").code == 0
    assert c.memory("o-1")["status"] == "challenged"  # type: ignore[index]


def test_a_correction_of_a_challenged_memory_closes_its_round(tmp_path: Path) -> None:
    c = chain_at(tmp_path)
    committed(c, "s-1")
    tx = c.builder(AUTHOR).submit(c.next_nonce(AUTHOR), "s-1b", "fact s-1 corrected",
                                  supersedes="s-1")
    assert c.block([tx])[0].code == 0
    assert challenge(c, PEER, "s-1").code == 0
    votes = [c.builder(k).vote(c.next_nonce(k), "s-1b") for k in c.validator_keys]
    c.block(votes)
    assert c.memory("s-1")["status"] == "superseded"  # type: ignore[index]
    assert rounds(c, "s-1")[-1]["outcome"] == "superseded"
    assert c.app.store.get(b"pchl/" + bytes(PEER.verify_key).hex().encode()) is None


def test_before_v10_a_peer_is_refused_as_before(tmp_path: Path) -> None:
    c = chain_at(tmp_path, version=9)
    committed(c, "v9-1")
    refused = challenge(c, PEER, "v9-1")
    assert refused.code == Code.CHALLENGE_DENIED
    assert refused.log == Code.CHALLENGE_DENIED.description
