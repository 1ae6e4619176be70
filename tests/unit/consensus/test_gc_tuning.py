"""The app process spaces out cyclic garbage collection (memledger.consensus.main)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from memledger.consensus.main import GC_YOUNG_THRESHOLD, tune_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_tune_gc_freezes_startup_objects_and_raises_the_threshold(restored_gc: None) -> None:
    gc.set_threshold(700, 10, 10)
    tune_gc()
    assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, 20, 20)
    assert gc.get_freeze_count() > 0
    before = gc.get_stats()[0]["collections"]
    junk = [[i] for i in range(GC_YOUNG_THRESHOLD // 2)]  # half a generation of containers
    assert gc.get_stats()[0]["collections"] == before and junk
