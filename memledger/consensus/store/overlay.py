"""A block's uncommitted writes layered over committed state, and what committing them takes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memledger.consensus.store.lmdb_base import StaleOverlayError, check_key, user_meta_key
from memledger.protocol.commitment import LAYOUTS

if TYPE_CHECKING:
    from memledger.consensus.store.state import CanonicalStore


@dataclass(frozen=True, slots=True)
class Prepared:
    """Everything a block's commit writes, computed once against a fixed committed base."""

    changes: list[tuple[bytes, bytes | None]]
    hidx_puts: list[tuple[bytes, bytes]]
    hidx_dels: list[bytes]
    nodes: dict[int, bytes]
    root: bytes
    layout: int


class BlockOverlay:
    """Uncommitted writes of one block, layered over the committed state.

    Only the overlay most recently returned by ``begin_block()`` can be committed, and only
    once; starting a new block discards it (FinalizeBlock may be re-run for a height).
    """

    def __init__(self, store: CanonicalStore, generation: int) -> None:
        self._store = store
        self._gen = generation
        self._writes: dict[bytes, bytes | None] = {}
        self._meta: dict[bytes, bytes | None] = {}
        self._prepared: Prepared | None = None
        self._layout: int | None = None
        self.committed = False

    def get(self, key: bytes) -> bytes | None:
        """Value as this block sees it: its own writes first (deletes shadow), then committed."""
        writes = self._writes
        if key in writes:
            return writes[key]
        return self._store.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        check_key(key)
        if type(value) is not bytes:
            raise TypeError("values must be bytes")
        self._mutable()
        self._writes[key] = value
        self._prepared = None

    def delete(self, key: bytes) -> None:
        check_key(key)
        self._mutable()
        self._writes[key] = None
        self._prepared = None

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """This block's view under prefix, ascending: committed pairs with its writes laid over."""
        return merged_prefix(self._store.iter_prefix(prefix), self._writes, prefix)

    def set_meta(self, name: str, value: bytes | None) -> None:
        """Stage a user meta entry (None deletes it), written atomically with the block."""
        if value is not None and type(value) is not bytes:
            raise TypeError("meta values must be bytes")
        self._mutable()
        self._meta[user_meta_key(name)] = value

    def get_meta(self, name: str) -> bytes | None:
        key = user_meta_key(name)
        if key in self._meta:
            return self._meta[key]
        return self._store.get_meta(name)

    def set_layout(self, layout: int) -> None:
        """Hash the state this block leaves under `layout` (commitment.LAYOUTS).

        A layout other than the committed one rehashes every bucket in this block: the
        one-time cost of the upgrade that moves a chain to it.
        """
        if layout not in LAYOUTS:
            raise ValueError(f"unknown hash layout {layout}")
        self._mutable()
        if layout != self._layout:
            self._layout = layout
            self._prepared = None

    def changes(self) -> list[tuple[bytes, bytes | None]]:
        """Effective changes sorted by key; value None means delete.

        No-ops are dropped: deleting a key absent from committed state, and putting a value
        whose SHA-256 equals the committed one. The result is what commit() writes.
        """
        return list(self._prepare().changes)

    def app_hash(self) -> bytes:
        """Root the state will have once this block commits; committed state is untouched."""
        return self._prepare().root

    def _mutable(self) -> None:
        if self.committed:
            raise StaleOverlayError("overlay already committed")

    def _prepare(self) -> Prepared:
        if self.committed and self._prepared is not None:
            return self._prepared  # changes()/app_hash() stay readable after commit
        self._store._check_current(self)
        if self._prepared is None:
            self._prepared = self._store._prepare(self._writes, self._layout)
        return self._prepared


def merged_prefix(base: Iterator[tuple[bytes, bytes]], writes: Mapping[bytes, bytes | None],
                  prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """`base` (ascending) with `writes` laid over it: the view's pairs under prefix, ascending.

    Writes shadow base entries; a None write hides the key. Deterministic: the result is
    ordered by key bytes whatever order the writes were made in.
    """
    own = sorted(k for k in writes if k.startswith(prefix))
    i = 0
    for key, value in base:
        while i < len(own) and own[i] < key:
            new = writes[own[i]]
            if new is not None:
                yield own[i], new
            i += 1
        if i < len(own) and own[i] == key:
            new = writes[key]
            i += 1
            if new is not None:
                yield key, new
            continue
        yield key, value
    for key in own[i:]:
        new = writes[key]
        if new is not None:
            yield key, new
