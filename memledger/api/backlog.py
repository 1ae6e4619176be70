"""The signer-backlog admission without a round trip per tx, from results the API has.

The backlog rule (docs/RULES.md, "Nonces") is the app's answer to `/mempool/backlog`:
asking it before every broadcast doubled each submit's round trips. But for a signer that
writes through this API, the answer changes only by what this API itself admits, under
that signer's lock (signer_locks.py): each tx CheckTx accepts adds one pending tx, and
each block can only take pending txs away. So the API counts from the app's answer and
CheckTx's results: the count is never below the truth, and only a tx the count certainly
lets through skips the question (a nonce above every nonce known for the signer, so no
newer one; the backlog within the limit). A count that reaches the limit asks the app
again, which gives the true, smaller number; so does one older than MAX_AGE_BLOCKS. Any
refusal comes from the app. Not counted: the same signer's txs that reach this node's
mempool another way (gossip, another API) since the last answer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Room:
    """A signer's backlog as counted since the app's answer at `height`."""

    height: int
    pending: int  # the signer's txs in this node's mempool (the answer's, plus ours)
    top_nonce: int  # the highest nonce known pending for the signer
    limit: int


#: blocks after which a signer's count is asked for again even below the limit
MAX_AGE_BLOCKS = 8


class BacklogView:
    """signer -> Room, for MAX_AGE_BLOCKS after the app's answer."""

    def __init__(self) -> None:
        self._rooms: dict[bytes, Room] = {}
        self.height = 0  # the committed height the follower last saw (0: unknown)

    def new_height(self, height: int) -> None:
        if height == self.height:
            return
        self.height = height
        stale = [k for k, r in self._rooms.items() if not self._fresh(r)]
        for k in stale:
            del self._rooms[k]

    def _fresh(self, room: Room) -> bool:
        return self.height > 0 and 0 <= self.height - room.height <= MAX_AGE_BLOCKS

    def lets_through(self, signer: bytes, nonce: int) -> bool:
        """True when the app's answer would certainly be "ok" for this tx."""
        room = self._rooms.get(signer)
        return (room is not None and self._fresh(room) and nonce > room.top_nonce
                and room.pending <= room.limit)

    def answered(self, signer: bytes, nonce: int, height: int, *, pending: int,
                 newer: int, limit: int, verdict: str) -> None:
        """The app said `verdict` for (signer, nonce) at `height`; CheckTx is next."""
        if verdict != "ok" or newer != 0 or limit <= 0:
            self._rooms.pop(signer, None)
            return
        # pending txs whose nonces are unknown are all below `nonce` (newer == 0)
        self._rooms[signer] = Room(height, pending, nonce - 1, limit)

    def admitted(self, signer: bytes, nonce: int) -> None:
        """CheckTx accepted (signer, nonce): one more pending tx of the signer."""
        room = self._rooms.get(signer)
        if room is not None:
            room.pending += 1
            room.top_nonce = max(room.top_nonce, nonce)

    def forget(self, signer: bytes) -> None:
        self._rooms.pop(signer, None)

    def __len__(self) -> int:
        return len(self._rooms)
