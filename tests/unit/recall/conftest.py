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
