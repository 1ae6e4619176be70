"""This node's view of its mempool, per signer: the nonces of txs CheckTx admitted.

Off the consensus path (CheckTx only). CometBFT's mempool only holds txs CheckTx accepted,
and after every Commit it re-runs CheckTx (RECHECK) on what is left, in mempool order,
before any new tx arrives on the same connection. So clearing this view at Commit and
re-adding each tx that passes again keeps it equal to the mempool's content.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Sequence

_EMPTY: tuple[int, ...] = ()


class PendingNonces:
    """signer -> ascending nonces of its txs in this node's mempool."""

    def __init__(self) -> None:
        self._by_signer: dict[bytes, list[int]] = {}

    def for_signer(self, signer: bytes) -> Sequence[int]:
        return self._by_signer.get(signer, _EMPTY)

    def add(self, signer: bytes, nonce: int) -> None:
        insort(self._by_signer.setdefault(signer, []), nonce)

    def clear(self) -> None:
        self._by_signer.clear()

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_signer.values())
