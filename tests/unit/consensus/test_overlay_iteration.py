"""Ordered prefix iteration through a block overlay and a tx buffer (the ballot-expiry scan
relies on it): exactly the pairs a dict model of the layered writes holds, in key order."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memledger.consensus.families.context import TxBuffer
from memledger.consensus.store.overlay import merged_prefix
from memledger.consensus.store.state import CanonicalStore

KEYS = st.binary(min_size=1, max_size=3).map(lambda b: b"p/" + b) | st.sampled_from(
    [b"o/1", b"q/", b"p"])
VALUES = st.none() | st.binary(min_size=1, max_size=2)


def _model(base: dict[bytes, bytes],
           *layers: dict[bytes, bytes | None]) -> list[tuple[bytes, bytes]]:
    view: dict[bytes, bytes | None] = dict(base)
    for layer in layers:
        view.update(layer)
    return sorted((k, v) for k, v in view.items() if k.startswith(b"p/") and v is not None)


@settings(max_examples=200, deadline=None)
@given(base=st.dictionaries(KEYS, st.binary(min_size=1, max_size=2)),
       writes=st.dictionaries(KEYS, VALUES))
def test_merged_prefix_is_the_layered_view_in_key_order(
        base: dict[bytes, bytes], writes: dict[bytes, bytes | None]) -> None:
    committed = iter(sorted((k, v) for k, v in base.items() if k.startswith(b"p/")))
    assert list(merged_prefix(committed, writes, b"p/")) == _model(base, writes)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.dictionaries(KEYS, st.binary(min_size=1, max_size=2), max_size=8),
       block=st.dictionaries(KEYS, VALUES, max_size=8),
       tx=st.dictionaries(KEYS, VALUES, max_size=8))
def test_store_overlay_and_buffer_iterate_the_same_view(
        tmp_path: Path, base: dict[bytes, bytes], block: dict[bytes, bytes | None],
        tx: dict[bytes, bytes | None]) -> None:
    store = CanonicalStore(tempfile.mkdtemp(dir=tmp_path))  # one fresh store per example
    try:
        first = store.begin_block()
        for k, v in base.items():
            first.put(k, v)
        store.commit(first, 1, first.app_hash(), 1)
        overlay = store.begin_block()
        for k, maybe in block.items():
            overlay.put(k, maybe) if maybe is not None else overlay.delete(k)
        buffer = TxBuffer(overlay)
        for k, maybe in tx.items():
            buffer.put(k, maybe) if maybe is not None else buffer.delete(k)
        assert list(overlay.iter_prefix(b"p/")) == _model(base, block)
        assert list(buffer.iter_prefix(b"p/")) == _model(base, block, tx)
    finally:
        store.close()
