"""One admission at a time per signer, so the backlog limit holds under parallel writes.

The API asks the app how many of a signer's txs its mempool holds, then broadcasts. Two
requests of one signer that both asked before either reached CheckTx would both hear
"room": 150 parallel writes were all acknowledged against a limit of 64, and the extra
ones could push a slower node's acknowledged tx out of the nonce window (docs/RULES.md,
"Why the limit exists"). Holding a per-signer lock from the question until CheckTx has
answered makes the count each request sees include every earlier one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


class SignerLocks:
    """A lock per signer key, kept only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[bytes, anyio.Lock] = {}
        self._users: dict[bytes, int] = {}

    @asynccontextmanager
    async def hold(self, signer: bytes | None) -> AsyncIterator[None]:
        """Hold `signer`'s lock (no lock for a tx whose signer cannot be read: CheckTx
        refuses it, and it takes no backlog room)."""
        if signer is None:
            yield
            return
        lock = self._locks.setdefault(signer, anyio.Lock())
        self._users[signer] = self._users.get(signer, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[signer] -= 1
            if self._users[signer] == 0:
                del self._users[signer], self._locks[signer]

    def __len__(self) -> int:
        """Signers with a lock right now (it returns to 0: no growth per signer seen)."""
        return len(self._locks)
