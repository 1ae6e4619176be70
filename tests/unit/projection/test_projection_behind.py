"""A projection whose database lost commits while the node ran (a failover to a standby,
a restore from a backup) halts the node instead of being flushed on top of, and is
rebuilt at the next start; one that already lost blocks below its last is rebuilt too.

Flushed on top of, it kept its last receipt at canonical state's height and hid the lost
blocks' memories for good: REST answered 404 for acknowledged writes, restarts included.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from memledger.daemon.appproc import catch_up_projection
from memledger.devtools.chain import HaltCalled, LocalChain, seeded_key
from memledger.projection.schema import memories, receipts

KEY = seeded_key("projection-behind")


def _write(chain: LocalChain, memory_id: str) -> None:
    b = chain.builder(KEY)
    assert chain.block([b.submit(chain.next_nonce(KEY), memory_id,
                                 f"the content of {memory_id}")])[0].code == 0


def _lose_blocks_above(chain: LocalChain, height: int) -> None:
    """What a database restored to `height` looks like: later receipts and rows gone."""
    with chain.app.projection.engine.begin() as conn:
        conn.execute(receipts.delete().where(receipts.c.height > height))
        conn.execute(memories.delete().where(memories.c.submitted_height > height))


def _served(chain: LocalChain) -> list[str]:
    with chain.app.projection.engine.connect() as conn:
        return sorted(conn.execute(sa.select(memories.c.id)).scalars())


def test_a_projection_that_lost_its_last_blocks_halts_the_next_commit(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "c")
    for i in range(3):
        _write(chain, f"m{i}")
    _lose_blocks_above(chain, 1)  # blocks 2 and 3 gone, the node still running
    with pytest.raises(HaltCalled):
        _write(chain, "m3")
    assert "the projection's last block is 1, canonical state's is 3" in chain.halts[0]
    assert chain.app.store.last_height == 3  # LMDB keeps every acknowledged write
    chain.reopen()  # the restart, as `memledger start` does: catch up before serving
    assert catch_up_projection(chain.app.store, chain.app.projection)
    assert _served(chain) == ["m0", "m1", "m2"]
    _write(chain, "m3")  # and it goes on
    assert _served(chain) == ["m0", "m1", "m2", "m3"]
    chain.close()


def test_a_projection_with_lost_blocks_below_its_last_is_rebuilt_at_start(
        tmp_path: Path) -> None:
    """The damage an older binary left (it flushed on top): receipts 1..2 and 5, the rows
    of 3 and 4 gone, the last receipt at canonical state's height."""
    chain = LocalChain(tmp_path / "c")
    for i in range(5):
        _write(chain, f"m{i}")
    with chain.app.projection.engine.begin() as conn:
        conn.execute(receipts.delete().where(receipts.c.height.in_([3, 4])))
        conn.execute(memories.delete().where(memories.c.id.in_(["m2", "m3"])))
    chain.reopen()
    assert chain.app.projection.has_gaps()
    assert catch_up_projection(chain.app.store, chain.app.projection)
    assert _served(chain) == ["m0", "m1", "m2", "m3", "m4"]
    assert not chain.app.projection.has_gaps()
    assert not catch_up_projection(chain.app.store, chain.app.projection)  # whole: left be
    chain.close()
