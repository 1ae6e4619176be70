"""Commit durability: failures halt before answering, and the replay converges.

Each scenario runs a chain that fails at one height, "restarts" it (fresh app on the
same stores, as after a process exit), replays the block the way CometBFT's handshake
does, and compares state, app hash and projection with a chain that never failed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memledger.protocol.pb import abci_pb2 as pb
from tests.support.chain import HaltCalled, LocalChain
from tests.support.workload import blocks

FAIL_AT = 4
BLOCKS = 7


def _plan(tmp_path: Path) -> list[list[bytes]]:
    scratch = LocalChain(tmp_path / "scratch")
    plan = blocks(scratch, seed=99, count=BLOCKS)
    scratch.close()
    return plan


def _reference(tmp_path: Path, plan: list[list[bytes]]) -> LocalChain:
    ref = LocalChain(tmp_path / "reference")
    for txs in plan:
        ref.block(txs)
    return ref


def _canonical(chain: LocalChain) -> list[tuple[bytes, bytes]]:
    return list(chain.app.store.iter_prefix(b""))


def _assert_same(chain: LocalChain, ref: LocalChain) -> None:
    assert chain.app.store.last_height == ref.app.store.last_height == BLOCKS
    assert chain.app.store.last_app_hash == ref.app.store.last_app_hash
    assert _canonical(chain) == _canonical(ref)
    assert chain.app.projection.dump() == ref.app.projection.dump()


def _finish(chain: LocalChain, plan: list[list[bytes]]) -> None:
    """Restart and replay from the app's last committed height, as the handshake does."""
    chain.reopen()
    assert chain.app.store.last_height == FAIL_AT - 1
    for txs in plan[FAIL_AT - 1:]:
        chain.block(txs)


def test_projection_flush_failure_halts_without_advancing(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    chain = LocalChain(tmp_path / "node")
    chain.app.faults.fail_flush_height = FAIL_AT
    for txs in plan[: FAIL_AT - 1]:
        chain.block(txs)
    with pytest.raises(HaltCalled):
        chain.block(plan[FAIL_AT - 1])
    assert "projection flush failed" in chain.halts[0]
    assert chain.app.store.last_height == FAIL_AT - 1
    assert chain.app.projection.last_receipt()[0] == FAIL_AT - 1  # type: ignore[index]
    _finish(chain, plan)
    _assert_same(chain, _reference(tmp_path, plan))


def test_crash_between_finalize_and_commit_replays_to_same_hash(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    chain = LocalChain(tmp_path / "node")
    for txs in plan[: FAIL_AT - 1]:
        chain.block(txs)
    first = chain.finalize(plan[FAIL_AT - 1])  # ... and the process dies here
    _finish(chain, plan)
    ref = _reference(tmp_path, plan)
    assert chain.app_hashes[FAIL_AT] == first.app_hash == ref.app_hashes[FAIL_AT]
    _assert_same(chain, ref)


def test_lmdb_commit_failure_after_flush_replays_and_skips_receipt(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    chain = LocalChain(tmp_path / "node")
    for txs in plan[: FAIL_AT - 1]:
        chain.block(txs)

    def broken_commit(*args: object, **kwargs: object) -> None:
        raise OSError("disk full (injected)")

    chain.app.store.commit = broken_commit  # type: ignore[method-assign]
    with pytest.raises(HaltCalled):
        chain.block(plan[FAIL_AT - 1])
    assert "canonical store commit failed" in chain.halts[0]
    # The projection already holds the block's receipt; canonical state does not.
    assert chain.app.projection.last_receipt()[0] == FAIL_AT  # type: ignore[index]
    _finish(chain, plan)
    _assert_same(chain, _reference(tmp_path, plan))


def test_second_finalize_for_same_height_replaces_the_first(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    chain = LocalChain(tmp_path / "node")
    chain.finalize(plan[1])  # a different block proposed at height 1, then abandoned
    for txs in plan:
        chain.block(txs)
    _assert_same(chain, _reference(tmp_path, plan))


def test_projection_with_a_different_hash_halts(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    chain = LocalChain(tmp_path / "node")
    chain.block(plan[0])
    import sqlalchemy as sa

    from memledger.projection.schema import receipts

    with chain.app.projection.engine.begin() as conn:
        conn.execute(receipts.insert().values(height=2, app_hash="00" * 32))
    with pytest.raises(HaltCalled):
        chain.block(plan[1])
    assert "projection has app hash" in chain.halts[0]
    assert chain.app.store.last_height == 1
    with chain.app.projection.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(receipts)).scalar() == 2


def test_info_reports_last_committed_height_and_hash(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    chain = LocalChain(tmp_path / "node")
    for txs in plan[:3]:
        chain.block(txs)
    chain.reopen()
    info = chain.app.info(pb.RequestInfo())
    assert info.last_block_height == 3
    assert info.last_block_app_hash == chain.app_hashes[3]
    assert info.app_version == 1


def test_rebuild_equals_incremental_projection(tmp_path: Path) -> None:
    from memledger.projection.writer import Projection

    plan = _plan(tmp_path)
    ref = _reference(tmp_path, plan)
    rebuilt = Projection(f"sqlite:///{tmp_path / 'rebuilt.db'}")
    store = ref.app.store
    rebuilt.rebuild(store, store.last_height, store.last_app_hash)
    assert rebuilt.dump() == ref.app.projection.dump()
    assert len(rebuilt.dump()["memories"]) > 5
    assert rebuilt.last_receipt() == (BLOCKS, store.last_app_hash.hex())


def test_a_full_canonical_state_halts_saying_what_to_raise(tmp_path: Path) -> None:
    """LMDB's map is a fixed ceiling: reaching it halts with the remedy named, and a
    restart with a larger map (state_max_gib) commits the same block."""
    from memledger.consensus.app import MemLedgerApp
    from memledger.consensus.store.state import CanonicalStore
    from memledger.projection.writer import Projection

    class Sized(LocalChain):
        map_size = 1 << 20  # 1 MiB

        def _open(self) -> MemLedgerApp[Projection]:
            return MemLedgerApp(CanonicalStore(str(self.home / "state"),
                                               map_size=self.map_size),
                                Projection(self.db_url), on_halt=self._halt)

    chain = Sized(tmp_path / "small")
    plan = blocks(chain, seed=3, count=400)
    with pytest.raises(HaltCalled, match="canonical state is full .*raise state_max_gib"):
        for txs in plan:
            chain.block(txs)
    stopped = chain.app.store.last_height
    chain.map_size = 8 << 20
    chain.reopen()
    assert chain.app.store.last_height == stopped
    chain.block(plan[stopped])  # the block that did not fit now commits
    assert chain.app.store.last_height == stopped + 1
    chain.close()
