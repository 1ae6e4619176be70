"""State views for gate-level tests of process_tx."""

from __future__ import annotations


class NoState:
    """A view with no state at all: a tx refused by the gate never reaches it, and a
    refused tx must not write."""

    def get(self, key: bytes) -> bytes | None:
        return None

    def put(self, key: bytes, value: bytes) -> None:
        raise AssertionError("a rejected tx must not write")

    def delete(self, key: bytes) -> None:
        raise AssertionError("a rejected tx must not write")
