"""A rebuild from canonical state gives exactly the rows incremental flushes gave, on SQLite
and on PostgreSQL, whether contents are looked up with their memories or arrive later."""

from __future__ import annotations

from pathlib import Path

import pytest

from memledger.projection.writer import Projection
from tests.support.chain import LocalChain
from tests.support.workload import blocks


def _chain_with_history(home: Path, db_url: str | None = None) -> LocalChain:
    chain = LocalChain(home, db_url=db_url, app_state={"app_version": 4,
                                                       "params": {"ballot_expiry": 10}})
    for txs in blocks(chain, seed=5, count=16):  # submits, votes, disputes, co-commits
        chain.block(txs)
    return chain


def _rebuilt(chain: LocalChain, url: str, paired: bool) -> dict[str, list[tuple[object, ...]]]:
    store = chain.app.store
    target = Projection(url)
    try:
        count = target.rebuild(store.iter_prefix(b""), store.last_height, store.last_app_hash,
                               content_of=store.get if paired else None)
        assert count == sum(1 for _ in store.iter_prefix(b""))
        return target.dump(include_receipts=False)
    finally:
        target.close()


@pytest.mark.parametrize("paired", [True, False], ids=["content-looked-up", "content-later"])
def test_sqlite_rebuild_equals_the_flushed_projection(tmp_path: Path, paired: bool) -> None:
    chain = _chain_with_history(tmp_path / "c")
    flushed = chain.app.projection.dump()
    assert flushed["memories"], "the workload must leave memories to compare"
    assert _rebuilt(chain, f"sqlite:///{tmp_path / 'rebuilt.db'}", paired) == flushed


@pytest.mark.postgres
def test_postgres_rebuild_equals_the_flushed_projection(
        tmp_path: Path, fresh_postgres_url: str) -> None:
    chain = _chain_with_history(tmp_path / "c")
    flushed = chain.app.projection.dump()
    assert _rebuilt(chain, fresh_postgres_url, paired=True) == flushed
