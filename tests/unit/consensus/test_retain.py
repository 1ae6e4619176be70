"""Block pruning's retain height (memledger/consensus/retain.py) and its wiring in Commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from memledger.consensus.retain import MIN_RETAIN_BLOCKS, retain_height
from memledger.consensus.store.snapshots import SnapshotStore
from memledger.protocol.pb import abci_pb2 as pb
from tests.support.chain import LocalChain


def test_zero_keeps_every_block() -> None:
    assert retain_height(10_000, 0, None) == 0
    assert retain_height(10_000, 0, 9_000) == 0


def test_keeps_the_last_n_blocks() -> None:
    assert retain_height(1_000, 100, None) == 901  # 901..1000: 100 blocks
    assert retain_height(101, 100, None) == 2


def test_nothing_to_prune_while_the_chain_is_short() -> None:
    assert retain_height(100, 100, None) == 0  # would be 1: the whole chain
    assert retain_height(50, 100, None) == 0
    assert retain_height(0, 100, None) == 0


def test_never_above_the_oldest_snapshot() -> None:
    assert retain_height(1_000, 100, 850) == 850  # a peer restoring 850 needs 850..852
    assert retain_height(1_000, 100, 950) == 901  # the snapshot is inside the window
    assert retain_height(1_000, 100, 1) == 0
    assert retain_height(1_000, 100, 0) == 0  # snapshot directory unreadable: keep all


@pytest.mark.parametrize("height", [1, 99, 100, 101, 250, 1_000, 12_345])
@pytest.mark.parametrize("blocks", [100, 150, 1_000])
@pytest.mark.parametrize("oldest", [None, 0, 1, 5, 200, 990, 20_000])
def test_bounds_hold_everywhere(height: int, blocks: int, oldest: int | None) -> None:
    got = retain_height(height, blocks, oldest)
    if got == 0:
        return
    assert 2 <= got <= height - blocks + 1  # at least `blocks` blocks stay
    assert oldest is None or got <= oldest


def test_oldest_snapshot_on_disk(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "chain")
    store = SnapshotStore(tmp_path / "snaps", keep=2)
    assert store.oldest_height() is None
    for _ in range(3):
        chain.block([])
        with chain.app.store.snapshot() as view:
            store.write(view)
    (tmp_path / "snaps" / "1.tmp").mkdir()  # an interrupted write is not offered
    assert store.oldest_height() == 2  # keep=2 pruned height 1
    chain.close()


def test_commit_answers_the_retain_height_and_the_app_hash_ignores_it(tmp_path: Path) -> None:
    pruned, plain = LocalChain(tmp_path / "pruned"), LocalChain(tmp_path / "plain")
    snapshots = SnapshotStore(tmp_path / "snaps", keep=1)
    pruned.app.retain_blocks = MIN_RETAIN_BLOCKS
    pruned.app.snapshots = snapshots
    answers = []
    for height in range(1, MIN_RETAIN_BLOCKS + 31):
        resp = pruned.finalize([])
        answers.append(pruned.app.commit(pb.RequestCommit()).retain_height)
        pruned.height += 1
        assert resp.app_hash == plain.finalize([]).app_hash
        plain.app.commit(pb.RequestCommit())
        plain.height += 1
        if height == 20:
            with pruned.app.store.snapshot() as view:
                snapshots.write(view)  # the snapshot at 20 caps the retain height there
    assert answers[:MIN_RETAIN_BLOCKS] == [0] * MIN_RETAIN_BLOCKS
    # height 101..130: the last 100 blocks (from 2..31), but never past the snapshot
    assert answers[MIN_RETAIN_BLOCKS:] == [min(h - 99, 20) for h in range(101, 131)]
    assert answers[-1] == 20
    pruned.close()
    plain.close()
