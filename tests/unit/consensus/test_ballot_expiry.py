"""The v4 ballot-expiry rule (memledger/consensus/families/memory/expiry.py) on the in-process
chain: ballots expire, decided ones leave the index, validator removal no longer waits
for open ballots, and the rule activates by upgrade with the v3 behaviour kept before it.

The 4-validator run on the real cometbft is tests/e2e/test_ballot_expiry_net.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from nacl.signing import SigningKey

from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk.txbuilder import (
    param_proposal,
    scope_proposal,
    upgrade_proposal,
    validator_proposal,
)
from tests.support.chain import LocalChain, seeded_key
from tests.support.workload import run_in_fresh_process

REPO = Path(__file__).parents[3]
AGENT = seeded_key("expiry-agent")
EXPIRY = 10
GOV = {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}


def v4_chain(home: Path, expiry: int = EXPIRY) -> LocalChain:
    return LocalChain(home, powers=[10, 20, 30, 40],
                      app_state={"app_version": 4, "params": {**GOV, "ballot_expiry": expiry}})


def run(chain: LocalChain, key: SigningKey, method: str, *args: object,
        **kwargs: object) -> pb.ExecTxResult:
    tx = getattr(chain.builder(key), method)(chain.next_nonce(key), *args, **kwargs)
    return chain.block([tx])[0]


def vote_all(chain: LocalChain, pid: str, voters: list[int]) -> None:
    txs = [chain.builder(chain.validator_keys[i]).gov_vote(
        chain.next_nonce(chain.validator_keys[i]), pid, "accept") for i in voters]
    assert [r.code for r in chain.block(txs)] == [0] * len(txs)


def expiry_index(chain: LocalChain) -> list[bytes]:
    return [k for k, _ in chain.app.store.iter_prefix(b"bexp/")]


def open_ballots(chain: LocalChain, key: SigningKey) -> int:
    raw = chain.app.store.get(b"ballot/" + bytes(key.verify_key).hex().encode())
    return 0 if raw is None else int(json.loads(raw)["open"])


def make_scope(chain: LocalChain, members: list[SigningKey]) -> None:
    v = chain.validator_keys
    spec = [(bytes(k.verify_key), 1) for k in members]
    assert run(chain, v[3], "propose", scope_proposal("create", "ops", ["ops"], spec)).code == 0
    vote_all(chain, "p1", [3, 2])


def test_an_undecided_ballot_expires_after_its_window(tmp_path: Path) -> None:
    chain = v4_chain(tmp_path / "c")
    assert run(chain, AGENT, "submit", "m1", "nobody will vote on this").code == 0
    opened = chain.height
    record = chain.memory("m1")
    assert record is not None and record["expiry_from"] == opened
    assert expiry_index(chain) == [b"bexp/%020d\x00m1" % opened]
    while chain.height < opened + EXPIRY - 1:
        chain.block([])
        assert chain.memory("m1")["status"] == "proposed"  # type: ignore[index]
    resp = chain.finalize([])
    events = [(e.type, {a.key: a.value for a in e.attributes}) for e in resp.events]
    assert ("memory", {"id": "m1", "status": "deprecated", "reason": "ballot_expired"}) in events
    chain.app.commit(pb.RequestCommit())
    chain.height += 1
    record = chain.memory("m1")
    assert record is not None
    assert record["status"] == "deprecated" and record["expired_height"] == opened + EXPIRY
    assert record["history"][-1] == [opened + EXPIRY, "deprecated"]
    assert expiry_index(chain) == []
    # A vote after expiry is refused like any vote on a decided memory.
    assert run(chain, chain.validator_keys[3], "vote", "m1").code == Code.MEMORY_NOT_PROPOSED


def test_a_decided_ballot_leaves_the_index_and_never_expires(tmp_path: Path) -> None:
    chain = v4_chain(tmp_path / "c")
    v = chain.validator_keys
    assert run(chain, AGENT, "submit", "m1", "voted on in time").code == 0
    txs = [chain.builder(v[i]).vote(chain.next_nonce(v[i]), "m1") for i in (3, 2)]
    assert [r.code for r in chain.block(txs)] == [0, 0]
    assert chain.memory("m1")["status"] == "committed"  # type: ignore[index]
    assert expiry_index(chain) == []
    for _ in range(EXPIRY + 2):
        chain.block([])
    assert chain.memory("m1")["status"] == "committed"  # type: ignore[index]


def test_a_pinned_ballot_expires_and_releases_its_members(tmp_path: Path) -> None:
    chain = v4_chain(tmp_path / "c")
    v = chain.validator_keys
    make_scope(chain, [v[0], v[1]])
    assert run(chain, AGENT, "submit", "s1", "scoped and stalled", domain="ops").code \
        == Code.DOMAIN_WRITE_DENIED  # only members write into a scope
    assert run(chain, v[0], "submit", "s1", "scoped and stalled", domain="ops").code == 0
    assert open_ballots(chain, v[1]) == 1
    # v[1] holds half the ballot's weight and never votes: before v4 this stalled forever.
    assert run(chain, v[0], "vote", "s1").code == 0
    for _ in range(EXPIRY):
        chain.block([])
    record = chain.memory("s1")
    assert record is not None and record["status"] == "deprecated"
    assert open_ballots(chain, v[0]) == 0 and open_ballots(chain, v[1]) == 0


def test_removal_does_not_wait_for_open_ballots_from_v4(tmp_path: Path) -> None:
    """v3 refuses to remove a member of an open pinned ballot; v4 removes it."""
    for version, expected in ((3, Code.GOV_VALIDATOR_PINNED), (4, Code.OK)):
        chain = LocalChain(tmp_path / f"v{version}", powers=[10, 20, 30, 40],
                           app_state={"app_version": version, "params": GOV})
        v = chain.validator_keys
        make_scope(chain, [v[0], v[1]])
        assert run(chain, v[0], "submit", "s1", "scoped memory", domain="ops").code == 0
        assert open_ballots(chain, v[0]) == 1
        result = run(chain, v[3], "propose", validator_proposal(bytes(v[0].verify_key), 0))
        assert result.code == expected, version
        if version == 4:
            vote_all(chain, "p2", [3, 2])
            chain.block([])
            chain.block([])
            assert bytes(v[0].verify_key).hex() not in dict(
                json.loads(chain.app.store.get(b"sys/validators"))["validators"])  # type: ignore[arg-type]
            # The ballot it was pinned in stays open and still counts its vote.
            assert run(chain, v[0], "vote", "s1").code == 0
            assert run(chain, v[1], "vote", "s1").code == 0
            assert chain.memory("s1")["status"] == "committed"  # type: ignore[index]


def test_ballot_expiry_is_a_governed_param_from_v4_only(tmp_path: Path) -> None:
    old = LocalChain(tmp_path / "v3", app_state={"app_version": 3, "params": GOV})
    assert run(old, old.validator_keys[0], "propose",
               param_proposal("ballot_expiry", 50)).code == Code.GOV_UNKNOWN_PARAM
    new = LocalChain(tmp_path / "v4", app_state={"app_version": 4, "params": GOV})
    v = new.validator_keys
    assert run(new, v[0], "propose", param_proposal("ballot_expiry", 9)).code == \
        Code.GOV_INVALID_PARAM_VALUE
    assert run(new, v[0], "propose", param_proposal("ballot_expiry", 50)).code == 0


def test_the_rule_activates_by_upgrade_and_old_ballots_get_the_full_window(
        tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "c", powers=[10, 20, 30, 40],
                       app_state={"app_version": 3, "params": GOV})
    v = chain.validator_keys
    assert run(chain, AGENT, "submit", "old", "proposed under v3").code == 0
    assert chain.memory("old").get("expiry_from") is None  # type: ignore[union-attr]
    activation = chain.height + 5
    assert run(chain, v[0], "propose", upgrade_proposal("ballot-expiry", 4, activation)).code == 0
    vote_all(chain, "p1", [3, 2])
    while chain.height < activation:
        chain.block([])
    assert chain.app.info(pb.RequestInfo()).app_version == 4
    assert chain.memory("old")["expiry_from"] == activation  # type: ignore[index]
    # Shorten the window by governance; the old ballot then expires on schedule.
    assert run(chain, v[0], "propose", param_proposal("ballot_expiry", 10)).code == 0
    vote_all(chain, "p2", [3, 2])
    while chain.height < activation + 9:
        chain.block([])
        assert chain.memory("old")["status"] == "proposed"  # type: ignore[index]
    chain.block([])
    record = chain.memory("old")
    assert record is not None and record["status"] == "deprecated"
    assert record["expired_height"] == activation + 10


# ----------------------------------------------------------------------------- determinism
#: App hash after 24 blocks of the seed-77 shuffled workload at v4 (window 8, ballots
#: expiring after 10 blocks). Pinned: a change here means the v4 rules or the layout changed.
GOLDEN_V4_APP_HASH_24 = "dfd3658be62dafbf9a63c3a3d87fbd74a7eed1a09ac305fa10b89aacc484322e"


def _workload(home: Path, seed: str, restart_at: int) -> dict[str, str]:
    return run_in_fresh_process(home, seed, restart_at, app_version=4)


def test_v4_workload_is_byte_identical_across_processes_and_restarts(tmp_path: Path) -> None:
    first = _workload(tmp_path / "a", "1", restart_at=-1)
    second = _workload(tmp_path / "b", "999", restart_at=11)
    assert len(first) == 24 and first == second
    assert first["24"] == GOLDEN_V4_APP_HASH_24
