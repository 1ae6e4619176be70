"""Hash layout 2 (app version 6): buckets under Merkle trees, so proofs stay small.

The tree matches its written definition; the golden vectors in docs/APP_HASH.md hold; a
store moves to the layout in one block and keeps it across reopen, rebuild and audit; a
chain moves to it by an upgrade (in the first block run under v6), with proofs verifying
on both sides of the activation;
the v6 rules are byte-identical across processes and restarts; a state-sync restore of a
v6 state checks it under layout 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memledger.consensus import versions
from memledger.consensus.app import MemLedgerApp
from memledger.consensus.store.snapshots import SnapshotInfo, SnapshotStore
from memledger.consensus.store.state import CanonicalStore
from memledger.projection.writer import Projection
from memledger.protocol import records
from memledger.protocol.bucket_tree import (
    audit_path,
    bucket_top,
    from_top,
    path_length,
    top_from_path,
)
from memledger.protocol.commitment import (
    bucket_hash,
    bucket_of,
    root_of,
    value_hash,
    verify_proof,
)
from memledger.protocol.pb import abci_pb2 as pb
from memledger.protocol.proofs import ENTRY_OP, ENTRY_OP_V2, GAP_OP_V2, encode_ops, verify_ops
from memledger.sdk.txbuilder import upgrade_proposal
from tests.support.chain import LocalChain, seeded_key
from tests.support.workload import run_in_fresh_process

FEW = {b"alpha": b"1", b"beta": b"2", b"gamma": b"3", b"empty-value": b""}
COLLIDE = {b"c/127": b"x", b"c/202": b"y"}
#: Five keys in bucket 31945 (c/127's): a tree of three levels with a promoted node.
FIVE = {k: k[2:] for k in (b"c/127", b"c/202", b"c/23918", b"c/115928", b"c/167196")}

#: docs/APP_HASH.md, "Layout 2": state -> app hash.
GOLDEN_LAYOUT2 = [
    ({}, "00" * 32),
    ({b"key": b"value"}, "ba10fb63e97d8c3abf538a477af7db07a511ca6c5b9fbf3252d93bcc74ccf239"),
    (FEW, "9b6a5500763788dea9daa54bda184230cf0eb856db5660b6cdb2c79733ed179d"),
    ({k: v for k, v in FEW.items() if k != b"beta"},
     "fd54cbad7fef75025c9048322f76174c9fd1d0f40a8a78d6f968322cd26a56a0"),
    (COLLIDE, "43faf5115398f0e95426bc6db8924b6215407ba8b0e6f1db2459f66de6724864"),
    ({b"c/202": b"y"}, "9ddf484edbddd4ea99ab5580bec5b4687317adef22b9b1b67671a2c321dcb292"),
    ({**FEW, **COLLIDE}, "2b65dfde24a64073bb42e46c5796a30be8dbe6b76bec1a604c9cbb3677db789a"),
    (FIVE, "9891df9edb9c722251a75a639730c673c34ead74a787adf801fb7ef039376793"),
]


def _digest(i: int) -> bytes:
    return value_hash(i.to_bytes(4, "big"))


def _top_by_definition(digests: list[bytes]) -> bytes:
    """The written definition: split at the largest power of two below the count."""
    from hashlib import sha256

    if len(digests) == 1:
        return digests[0]
    k = 1
    while 2 * k < len(digests):
        k *= 2
    return sha256(b"\x04" + _top_by_definition(digests[:k])
                  + _top_by_definition(digests[k:])).digest()


def test_the_level_by_level_tree_is_the_written_definition() -> None:
    for n in range(1, 130):
        digests = [_digest(i) for i in range(n)]
        assert bucket_top(digests) == _top_by_definition(digests), n


@given(st.integers(min_value=1, max_value=70), st.data())
def test_every_path_leads_to_the_top_and_nothing_else_does(n: int, data: st.DataObject
                                                           ) -> None:
    digests = [_digest(i) for i in range(n)]
    top = bucket_top(digests)
    i = data.draw(st.integers(min_value=0, max_value=n - 1))
    path = audit_path(digests, i)
    assert len(path) == path_length(i, n)
    assert top_from_path(digests[i], i, n, path) == top
    assert top_from_path(_digest(n + 1), i, n, path) != top  # another entry
    if n > 1:
        other = data.draw(st.integers(min_value=0, max_value=n - 1).filter(lambda j: j != i))
        assert top_from_path(digests[i], other, n, path) != top  # another position
    assert top_from_path(digests[i], i, n, [*path, bytes(32)]) is None
    # The top alone does not say the count (index 0 of 3 and of 4 share a path shape);
    # the bucket hash does.
    moved = top_from_path(digests[i], i, n + 1, path)
    assert moved is None or from_top(n + 1, moved) != from_top(n, top)
    assert top_from_path(digests[i], n, n, path) is None


@pytest.mark.parametrize("state, expected", GOLDEN_LAYOUT2)
def test_golden_vectors(state: dict[bytes, bytes], expected: str) -> None:
    assert root_of(state.items(), layout=2).hex() == expected
    if state:  # and never the layout-1 hash of the same state
        assert root_of(state.items(), layout=2) != root_of(state.items(), layout=1)


def test_the_five_entry_bucket_intermediates() -> None:
    entries = [(k, value_hash(v)) for k, v in FIVE.items()]
    assert {bucket_of(k) for k in FIVE} == {31945}
    assert bucket_hash(entries, 2).hex() == \
        "345a71fdb91d849f38c2696a7ccb0206112bb0f2a69eb53a384bc6f68cb3cbf3"


def _commit(store: CanonicalStore, height: int, writes: dict[bytes, bytes | None],
            layout: int | None = None) -> bytes:
    overlay = store.begin_block()
    if layout is not None:
        overlay.set_layout(layout)
    for key, value in writes.items():
        if value is None:
            overlay.delete(key)
        else:
            overlay.put(key, value)
    root = overlay.app_hash()
    store.commit(overlay, height, root, 6 if layout == 2 else 5)
    return root


def test_a_store_moves_to_layout_2_in_one_block_and_keeps_it(tmp_path: Path) -> None:
    state = {f"k/{i}".encode(): str(i).encode() for i in range(3000)}
    store = CanonicalStore(str(tmp_path / "s"), map_size=1 << 27)
    assert _commit(store, 1, dict(state)) == root_of(state.items(), 1)
    # The moving block also writes: untouched buckets are rehashed too.
    moving = {b"k/7": b"changed", b"k/8": None, b"new": b"1"}
    root = _commit(store, 2, moving, layout=2)
    state.update({k: v for k, v in moving.items() if v is not None})
    del state[b"k/8"]
    assert root == root_of(state.items(), 2) != root_of(state.items(), 1)
    assert _commit(store, 3, {b"k/9": b"x"}) == root_of({**state, b"k/9": b"x"}.items(), 2)
    state[b"k/9"] = b"x"
    proof = store.prove(b"k/9")
    assert proof.layout == 2 and verify_proof(store.last_app_hash, b"k/9", b"x", proof)
    store.check_integrity()
    store.close()
    # Reopen: the layout is read back with the tree; a lost tree rebuilds under it.
    store = CanonicalStore(str(tmp_path / "s"), map_size=1 << 27)
    assert _commit(store, 4, {b"k/10": b"y"}) == root_of({**state, b"k/10": b"y"}.items(), 2)
    with store._env.begin(write=True) as txn:
        txn.drop(store._tree_db, delete=False)
    store.close()
    store = CanonicalStore(str(tmp_path / "s"), map_size=1 << 27)
    store.check_integrity()
    assert store.prove(b"k/1").layout == 2
    store.close()


def test_bulk_load_under_layout_2(tmp_path: Path) -> None:
    store = CanonicalStore(str(tmp_path / "s"), map_size=1 << 26)
    items = [(f"b/{i}".encode(), b"v") for i in range(500)]
    assert store.bulk_load(iter(items), layout=2) == root_of(items, 2)
    assert store.prove(b"b/1").layout == 2
    store.close()


GOV = {"gov_voting_period": 5, "gov_min_upgrade_delay": 3}


def test_the_layout_moves_by_upgrade_and_proofs_verify_on_both_sides(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "c", powers=[10, 20, 30, 40],
                       app_state={"app_version": 5, "params": GOV})
    agent, v = seeded_key("layout-agent"), chain.validator_keys
    tx = chain.builder(agent).submit(chain.next_nonce(agent), "m1", "written under v5")
    assert chain.block([tx])[0].code == 0
    key = records.memory_key("m1")

    def proof_ops() -> tuple[str, bool]:
        store = chain.app.store
        with store.snapshot() as snap:
            ops = encode_ops(key, snap.prove(key))
            ok = verify_ops(snap.last_app_hash, key, snap.get(key), ops)
        return ops[0].type, ok

    assert proof_ops() == (ENTRY_OP, True)
    activation = chain.height + 5
    tx = chain.builder(v[0]).propose(chain.next_nonce(v[0]),
                                     upgrade_proposal("merkle-buckets", 6, activation))
    assert chain.block([tx])[0].code == 0
    txs = [chain.builder(v[i]).gov_vote(chain.next_nonce(v[i]), "p1", "accept")
           for i in (3, 2)]
    assert [r.code for r in chain.block(txs)] == [0, 0]
    while chain.height < activation:
        chain.block([])
    # The activation block ran under v5, so its state is still hashed under layout 1 (a
    # v5-only binary computes the same block and halts cleanly at the next one).
    assert chain.app.info(pb.RequestInfo()).app_version == 6
    assert chain.app.store.last_app_hash == root_of(chain.app.store.iter_prefix(b""), 1)
    assert proof_ops() == (ENTRY_OP, True)
    snapshots = SnapshotStore(tmp_path / "snaps", chunk_bytes=4096)
    with chain.app.store.snapshot() as view:
        at_activation = snapshots.write(view)
    chain.block([])  # the first block under v6 rehashes every bucket
    assert chain.app.store.last_app_hash == root_of(chain.app.store.iter_prefix(b""), 2)
    assert proof_ops() == (ENTRY_OP_V2, True)
    # A snapshot of the activation height names v6 but hashes under layout 1: it restores.
    assert _restore(tmp_path / "joiner", snapshots, at_activation) == \
        (at_activation.app_hash, 1)
    chain.reopen()
    tx = chain.builder(agent).submit(chain.next_nonce(agent), "m2", "written under v6")
    assert chain.block([tx])[0].code == 0
    assert chain.app.store.last_app_hash == root_of(chain.app.store.iter_prefix(b""), 2)
    absent = records.memory_key("m-none")
    with chain.app.store.snapshot() as snap:
        ops = encode_ops(absent, snap.prove(absent))
        assert verify_ops(snap.last_app_hash, absent, None, ops)
        assert ops[0].type == GAP_OP_V2
    chain.close()


def _restore(home: Path, snapshots: SnapshotStore, info: SnapshotInfo) -> tuple[bytes, int]:
    """State-sync `info` into a fresh node; its (app hash, layout) after the last chunk."""
    home.mkdir()
    store = CanonicalStore(str(home / "state"))
    app = MemLedgerApp(store, Projection(f"sqlite:///{home / 'p.db'}"))
    snap = pb.Snapshot(height=info.height, format=info.format, chunks=info.chunks,
                       hash=info.hash, metadata=info.metadata())
    offer = app.offer_snapshot(pb.RequestOfferSnapshot(snapshot=snap, app_hash=info.app_hash))
    assert offer.result == pb.ResponseOfferSnapshot.ACCEPT
    for i in range(info.chunks):
        chunk = snapshots.load_chunk(info.height, info.format, i)
        applied = app.apply_snapshot_chunk(pb.RequestApplySnapshotChunk(index=i, chunk=chunk))
        assert applied.result == pb.ResponseApplySnapshotChunk.ACCEPT
    result = (store.last_app_hash, store.prove(b"x").layout)
    app.statesync.close()
    app.verifier.close()
    app.projection.close()
    store.close()
    return result


def test_v6_is_the_latest_and_names_its_layout() -> None:
    assert versions.RULES["bucket_merkle"] == 6 in versions.SUPPORTED_APP_VERSIONS
    assert [versions.hash_layout(v) for v in (1, 5, 6)] == [1, 1, 2]


#: App hash after 24 blocks of the seed-77 shuffled workload at v6. Pinned: a change here
#: means the v6 rules or layout 2 changed.
GOLDEN_V6_APP_HASH_24 = "197fdc54f11692941478adcd4d0bf3b4f34128a15174d3fad8718b4ce0372e43"


def test_v6_workload_is_byte_identical_across_processes_and_restarts(tmp_path: Path) -> None:
    first = run_in_fresh_process(tmp_path / "a", "1", restart_at=-1, app_version=6)
    second = run_in_fresh_process(tmp_path / "b", "999", restart_at=11, app_version=6)
    assert len(first) == 24 and first == second
    assert first["24"] == GOLDEN_V6_APP_HASH_24
