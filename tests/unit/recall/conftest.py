"""Fixtures shared by the recall tests."""

from __future__ import annotations

import pytest

from memledger.recall.embedder import Embedder, make_embedder


@pytest.fixture(scope="module")
def wordllama() -> Embedder:
    """The small static embedder: fast enough to load once per test module."""
    embedder = make_embedder("wordllama")
    assert embedder is not None
    return embedder


@pytest.fixture(autouse=True)
def fresh_memories_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests rank and page memories just written, which are `proposed`; reads keep
    only committed ones by default (v10 safe defaults, tested in tests/unit/api and
    tests/integration/test_corrections_node.py). Here the default keeps both, so the
    ranking mechanics are tested over every memory the chains write."""
    from memledger.api import queries

    monkeypatch.setattr(queries, "DEFAULT_STATUSES", ("proposed", "committed"))
