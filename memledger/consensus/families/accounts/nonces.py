"""Per-signer replay protection: which nonces a signer may still use (docs/RULES.md, Nonces).

v1-v2 ("last nonce"): a nonce must be strictly greater than the signer's last committed
nonce. Simple, but one signer's concurrent txs then fail whenever a higher nonce reaches a
block before a lower one.

v3+ ("nonce window"): the account keeps the `nonce_window` highest nonces the signer has
used (`recent`, ascending) and a `floor`: every nonce at or below it counts as used. A
nonce is fresh when it is above the floor and not in `recent`. Using it inserts it; when
`recent` grows past the window, its smallest members move into the floor. So any order of
a signer's txs commits as long as no tx falls more than `nonce_window` nonces behind, a
replay (same bytes, or the same nonce re-signed) is refused forever, and the state per
signer stays bounded by the window. Nothing here reads a clock.

CheckTx also passes the nonces of txs this node's mempool already holds for the signer, so
a duplicate nonce is refused at the door and an acknowledged tx is one the window will
still admit when the block executes.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from dataclasses import dataclass, field

from memledger.consensus import params as chain_params
from memledger.consensus import versions
from memledger.consensus.block.context import TxBuffer
from memledger.consensus.codes import Code, TxError
from memledger.consensus.store import records

MAX_NONCE = (1 << 64) - 1


@dataclass(slots=True)
class AccountNonces:
    """A signer's replay state. At v1-v2 only `floor` (the last nonce) is used."""

    floor: int = 0
    recent: list[int] = field(default_factory=list)

    @property
    def highest(self) -> int:
        return self.recent[-1] if self.recent else self.floor


def load(state: TxBuffer, signer: bytes) -> AccountNonces:
    """Read the account; a v1-v2 record `{"nonce": n}` reads as floor n, nothing recent."""
    record = state.get_record(records.account_key(signer))
    if record is None:
        return AccountNonces()
    if "floor" in record:
        return AccountNonces(int(record["floor"]), [int(n) for n in record["recent"]])
    return AccountNonces(int(record["nonce"]))


def last_nonce(state: TxBuffer, signer: bytes) -> int:
    """The highest nonce the signer has used (0 for a new signer)."""
    return load(state, signer).highest


def window_size(state: TxBuffer) -> int:
    """The governed window (absent from params until a chain sets it: the default)."""
    return int(chain_params.value(state, "nonce_window"))


def check_nonce(state: TxBuffer, signer: bytes, nonce: int, app_version: int,
                pending: Sequence[int] | None = None) -> AccountNonces:
    """Raise TxError unless `nonce` is fresh for `signer`; return the account for `advance`.

    `pending` (CheckTx only, ascending) are the nonces of this signer's txs already in the
    mempool.
    """
    account = load(state, signer)
    if not versions.active("nonce_window", app_version):
        if nonce <= account.floor:
            raise TxError(Code.NONCE_REPLAYED,
                          f"nonce {nonce} <= last committed nonce {account.floor}")
        return account
    if nonce <= account.floor:
        raise TxError(Code.NONCE_BELOW_WINDOW,
                      f"nonce {nonce} <= window floor {account.floor}: sign again with a "
                      "fresh nonce")
    recent = account.recent
    at = bisect_left(recent, nonce)
    if at < len(recent) and recent[at] == nonce:
        raise TxError(Code.NONCE_REPLAYED, f"nonce {nonce} already used by this signer")
    if pending is not None:
        _check_against_pending(nonce, len(recent) - at, pending, window_size(state))
    return account


def _check_against_pending(nonce: int, newer_committed: int, pending: Sequence[int],
                           window: int) -> None:
    """Refuse a duplicate of a pending nonce, or one the pending txs could push out."""
    at = bisect_left(pending, nonce)
    if at < len(pending) and pending[at] == nonce:
        raise TxError(Code.NONCE_PENDING,
                      f"nonce {nonce} is already used by a tx in the mempool")
    newer = newer_committed + len(pending) - at
    if newer > window:
        raise TxError(Code.NONCE_BELOW_WINDOW,
                      f"nonce {nonce} is behind {newer} newer nonces of this signer "
                      f"(window {window}): sign again with a fresh nonce")


def advance(state: TxBuffer, signer: bytes, nonce: int, app_version: int,
            account: AccountNonces) -> None:
    """Record `nonce` as used (only ever called after the tx succeeded)."""
    key = records.account_key(signer)
    if not versions.active("nonce_window", app_version):
        state.put_record(key, {"nonce": nonce})
        return
    recent = account.recent
    insort(recent, nonce)
    window = window_size(state)
    if len(recent) > window:
        account.floor = recent[-window - 1]
        del recent[:-window]
    state.put_record(key, {"floor": account.floor, "nonce": recent[-1], "recent": recent})
