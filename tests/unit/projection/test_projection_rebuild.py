"""A rebuild from canonical state gives exactly the rows incremental flushes gave, on SQLite
and on PostgreSQL, whether its records come in one pass or chunk by chunk; and one that is
abandoned leaves the projection as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memledger.consensus.store.snapshot import Snapshot
from memledger.projection.mapping import tags_json
from memledger.projection.rebuild import RebuildWriter
from memledger.projection.schema import memories
from memledger.projection.writer import Projection
from memledger.protocol import records
from tests.support.chain import LocalChain
from tests.support.workload import blocks


def _chain_with_history(home: Path, db_url: str | None = None) -> LocalChain:
    chain = LocalChain(home, db_url=db_url, app_state={"app_version": 4,
                                                       "params": {"ballot_expiry": 10}})
    for txs in blocks(chain, seed=5, count=16):  # submits, votes, disputes, co-commits
        chain.block(txs)
    return chain


def _rebuilt(chain: LocalChain, url: str) -> dict[str, list[tuple[object, ...]]]:
    store = chain.app.store
    target = Projection(url)
    try:
        with store.snapshot() as view:
            count = target.rebuild(view, store.last_height, store.last_app_hash)
        assert count == sum(1 for _ in store.iter_prefix(b""))
        assert target.last_receipt() == (store.last_height, store.last_app_hash.hex())
        return target.dump(include_receipts=False)
    finally:
        target.close()


def test_sqlite_rebuild_equals_the_flushed_projection(tmp_path: Path) -> None:
    chain = _chain_with_history(tmp_path / "c")
    flushed = chain.app.projection.dump()
    assert flushed["memories"], "the workload must leave memories to compare"
    assert _rebuilt(chain, f"sqlite:///{tmp_path / 'rebuilt.db'}") == flushed
    chain.close()


def test_records_fed_in_small_pieces_give_the_same_rows(tmp_path: Path) -> None:
    chain = _chain_with_history(tmp_path / "c")
    target = Projection(f"sqlite:///{tmp_path / 'rebuilt.db'}")
    with chain.app.store.snapshot() as view:
        items = list(view.iter_prefix(b""))
        writer = RebuildWriter(target.engine, batch_records=7)
        for i in range(0, len(items), 5):
            writer.add(items[i:i + 5], view)
        assert writer.finish(view.last_height, view.last_app_hash, view) == len(items)
    assert target.dump() == chain.app.projection.dump()
    target.close()
    chain.close()


class _WithoutContents:
    """A source whose `memc/` records are missing (not valid state, but no row may drop)."""

    def __init__(self, view: Snapshot) -> None:
        self.view = view

    def get(self, key: bytes) -> bytes | None:
        return self.view.get(key)

    def iter_prefix(self, prefix: bytes):  # type: ignore[no-untyped-def]
        return ((k, v) for k, v in self.view.iter_prefix(prefix)
                if not k.startswith(records.CONTENT))


def test_a_memory_without_a_content_record_still_gets_its_row(tmp_path: Path) -> None:
    chain = _chain_with_history(tmp_path / "c")
    flushed = chain.app.projection.dump()
    target = Projection(f"sqlite:///{tmp_path / 'rebuilt.db'}")
    with chain.app.store.snapshot() as view:
        target.rebuild(_WithoutContents(view), view.last_height, view.last_app_hash)
    rebuilt = target.dump()
    content = list(memories.c.keys()).index("content")
    assert [row[0] for row in rebuilt["memories"]] == [row[0] for row in flushed["memories"]]
    assert {row[content] for row in rebuilt["memories"]} == {None}
    target.close()
    chain.close()


def test_an_abandoned_rebuild_leaves_the_projection_as_it_was(tmp_path: Path) -> None:
    chain = _chain_with_history(tmp_path / "c")
    target = Projection(f"sqlite:///{tmp_path / 'rebuilt.db'}")
    with chain.app.store.snapshot() as view:
        target.rebuild(view, view.last_height, view.last_app_hash)
        before = target.dump(include_receipts=True)
        writer = RebuildWriter(target.engine)
        writer.add(list(view.iter_prefix(b""))[:10], view)
        writer.abort()
    assert target.dump(include_receipts=True) == before
    target.close()
    chain.close()


@pytest.mark.postgres
def test_postgres_rebuild_equals_the_flushed_projection(
        tmp_path: Path, fresh_postgres_url: str) -> None:
    chain = _chain_with_history(tmp_path / "c")
    flushed = chain.app.projection.dump()
    assert _rebuilt(chain, fresh_postgres_url) == flushed
    chain.close()


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text()))
def test_tags_column_is_exactly_json_dumps(tags: list[str]) -> None:
    """The fast tags encoding writes the bytes json.dumps wrote before (projections built
    by older and newer nodes compare equal)."""
    assert tags_json(tags) == json.dumps(tags)
