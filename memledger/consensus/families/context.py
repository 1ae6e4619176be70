"""What a handler sees: a per-tx write buffer over the block overlay, plus block facts.

A handler validates everything first and then writes, but the buffer makes that a
guarantee: a rejected tx leaves no trace in the block, whatever the handler did.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from memledger.consensus.store import codec
from memledger.consensus.store.overlay import merged_prefix


class KeyValueView(Protocol):
    """The read/write surface of a block overlay."""

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]: ...



class TxBuffer:
    """Writes of one tx, applied to the parent only when the tx succeeds."""

    def __init__(self, parent: KeyValueView) -> None:
        self._parent = parent
        self._writes: dict[bytes, bytes | None] = {}

    def get(self, key: bytes) -> bytes | None:
        if key in self._writes:
            return self._writes[key]
        return self._parent.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._writes[key] = value

    def delete(self, key: bytes) -> None:
        self._writes[key] = None

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The pairs under prefix as this tx sees them, ascending by key."""
        return merged_prefix(self._parent.iter_prefix(prefix), self._writes, prefix)

    def get_record(self, key: bytes) -> Any:
        raw = self.get(key)
        return None if raw is None else codec.decode(raw)

    def put_record(self, key: bytes, record: Any) -> None:
        self.put(key, codec.encode(record))

    def apply(self) -> None:
        """Push the buffered writes to the parent, in key order (deterministic)."""
        for key in sorted(self._writes):
            value = self._writes[key]
            if value is None:
                self._parent.delete(key)
            else:
                self._parent.put(key, value)
        self._writes.clear()


@dataclass(slots=True)
class BlockInfo:
    """Deterministic facts about the block being executed."""

    height: int
    time_ns: int
    chain_id: str
    app_version: int
    #: CheckTx only. Its block time is not known yet: `time_ns` is the latest it can
    #: plausibly be (the wall clock) and this the earliest (just after the last block's),
    #: so a time window must hold for both ends to be sure to hold in the block.
    earliest_time_ns: int | None = None

    @property
    def earliest_ns(self) -> int:
        """The earliest time this block can carry: its own time, once it has one."""
        return self.time_ns if self.earliest_time_ns is None else self.earliest_time_ns


@dataclass(slots=True)
class TxContext:
    """Everything a handler may use: state buffer, block facts, the verified signer."""

    state: TxBuffer
    block: BlockInfo
    signer: bytes
    nonce: int
    tx_hash: bytes
    events: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)

    @property
    def signer_hex(self) -> str:
        return self.signer.hex()

    def emit(self, event_type: str, /, **attributes: str | int) -> None:
        """Record an ABCI event; attributes keep call order (deterministic)."""
        self.events.append((event_type, [(k, str(v)) for k, v in attributes.items()]))
