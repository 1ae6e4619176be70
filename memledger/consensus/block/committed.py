"""Committed state as a read-only view, for CheckTx to run a tx against."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from memledger.consensus.store.overlay import merged_prefix
from memledger.consensus.store.state import CanonicalStore


class CommittedView:
    """Committed state seen as a read-only view (CheckTx runs processTx against it).

    `pending` lays the genesis writes over the store until the first block commits them,
    so CheckTx before block 1 judges against the state that block will run on.
    """

    def __init__(self, store: CanonicalStore,
                 pending: Mapping[bytes, bytes | None] | None = None) -> None:
        self._store = store
        self._pending = pending or {}

    def get(self, key: bytes) -> bytes | None:
        if key in self._pending:
            return self._pending[key]
        return self._store.get(key)

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        if not self._pending:
            return self._store.iter_prefix(prefix)
        return merged_prefix(self._store.iter_prefix(prefix), self._pending, prefix)

    def put(self, key: bytes, value: bytes) -> None:  # pragma: no cover - guarded
        raise RuntimeError("committed view is read-only")

    def delete(self, key: bytes) -> None:  # pragma: no cover - guarded
        raise RuntimeError("committed view is read-only")


class RecordingView(CommittedView):
    """A CommittedView that notes what a check read (memledger.consensus.gate.recheck):
    the keys it got, and whether it iterated a key range (then the reads are not a
    finite key set and `reads` is None)."""

    def __init__(self, store: CanonicalStore,
                 pending: Mapping[bytes, bytes | None] | None = None) -> None:
        super().__init__(store, pending)
        self._keys: set[bytes] = set()
        self._ranged = False

    @property
    def reads(self) -> set[bytes] | None:
        return None if self._ranged else self._keys

    def get(self, key: bytes) -> bytes | None:
        self._keys.add(key)
        if key in self._pending:  # CommittedView.get, inline: this runs per read
            return self._pending[key]
        return self._store.get(key)

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        self._ranged = True
        return super().iter_prefix(prefix)
