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

When governance lowers `nonce_window`, an account is trimmed by its signer's next tx.
From v8 that tx is judged against the account already trimmed to the new window, as the
rule states it; before v8 it was judged against the old, longer `recent` and floor, and
could take a nonce below the new window's floor.

CheckTx also passes the nonces of txs this node's mempool already holds for the signer
(`Mempool`). A duplicate nonce is refused at the door, and a new tx that is already too
far behind. A recheck refuses only what the chain itself would now refuse: a tx this node
acknowledged is never dropped for newer pending txs that *could* push it out, since the
proposer orders each signer's txs by nonce.

The REST API admits a client's tx only while the node holds fewer than a quarter window
of the signer's txs above its oldest pending one (`backlog`): each of those is a newer
nonce that could commit first, so an unbounded backlog lets a burst push its own
acknowledged txs out of the window. That limit is not in CheckTx, because CheckTx also
judges txs gossiped from other nodes, and refusing those would keep a tx away from the
proposers it needs to reach.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence
from dataclasses import dataclass, field

from memledger.consensus import params as chain_params
from memledger.consensus import versions
from memledger.consensus.families.context import TxBuffer
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError

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
        # a copy (advance inserts into it); its items are ints, as only codec.encode,
        # which admits no other number, ever wrote the record
        return AccountNonces(int(record["floor"]), list(record["recent"]))
    return AccountNonces(int(record["nonce"]))


def trimmed(account: AccountNonces, window: int) -> AccountNonces:
    """The account as the current `window` keeps it: when `recent` holds more than
    `window` nonces (governance lowered the window since its last tx), the smallest leave
    it and the floor becomes the largest that left. Nothing is written: `advance` stores
    the same trim with the new nonce in."""
    if len(account.recent) <= window:
        return account
    return AccountNonces(account.recent[-window - 1], account.recent[-window:])


def last_nonce(state: TxBuffer, signer: bytes) -> int:
    """The highest nonce the signer has used (0 for a new signer)."""
    return load(state, signer).highest


def window_size(state: TxBuffer) -> int:
    """The governed window (absent from params until a chain sets it: the default)."""
    return int(chain_params.value(state, "nonce_window"))


@dataclass(frozen=True, slots=True)
class Mempool:
    """What CheckTx knows beyond committed state: the signer's pending nonces (ascending)
    and whether this is a recheck of a tx the node already admitted."""

    pending: Sequence[int]
    recheck: bool = False


def backlog_limit(window: int) -> int:
    """How many of a signer's txs a node's REST API lets into its mempool above the oldest
    pending one: a quarter of the window. Gossip spreads them, so a block carries about
    that many of a signer's txs, and an acknowledged tx falls behind only if about four
    blocks in a row commit without it.
    """
    return max(1, window // 4)


def check_nonce(state: TxBuffer, signer: bytes, nonce: int, app_version: int,
                mempool: Mempool | None = None) -> AccountNonces:
    """Raise TxError unless `nonce` is fresh for `signer`; return the account for `advance`.

    `mempool` is given by CheckTx only (from the nonce-window rule on).
    """
    account = load(state, signer)
    if not versions.active("nonce_window", app_version):
        if nonce <= account.floor:
            raise TxError(Code.NONCE_REPLAYED,
                          f"nonce {nonce} <= last committed nonce {account.floor}")
        return account
    window = window_size(state)
    if versions.active("nonce_window_trimmed_check", app_version):
        account = trimmed(account, window)
    if nonce <= account.floor:
        raise TxError(Code.NONCE_BELOW_WINDOW,
                      f"nonce {nonce} <= window floor {account.floor}: sign again with a "
                      "fresh nonce")
    recent = account.recent
    at = bisect_left(recent, nonce)
    if at < len(recent) and recent[at] == nonce:
        raise TxError(Code.NONCE_REPLAYED, f"nonce {nonce} already used by this signer")
    if mempool is not None:
        _check_against_pending(nonce, recent, mempool, window)
    return account


def _newer(recent: Sequence[int], pending: Sequence[int], nonce: int) -> int:
    """The signer's nonces above `nonce`, committed (in `recent`) or pending."""
    return len(recent) - bisect_left(recent, nonce) + len(pending) - bisect_left(pending, nonce)


def _check_against_pending(nonce: int, recent: Sequence[int], mempool: Mempool,
                           window: int) -> None:
    """Refuse a duplicate of a pending nonce; for a new tx, also one that is too far
    behind."""
    pending = mempool.pending
    at = bisect_left(pending, nonce)
    if at < len(pending) and pending[at] == nonce:
        raise TxError(Code.NONCE_PENDING,
                      f"nonce {nonce} is already used by a tx in the mempool")
    if mempool.recheck:
        return
    newer = _newer(recent, pending, nonce)
    if newer > window:
        raise TxError(Code.NONCE_BELOW_WINDOW,
                      f"nonce {nonce} is behind {newer} newer nonces of this signer "
                      f"(window {window}): sign again with a fresh nonce")


@dataclass(frozen=True, slots=True)
class Backlog:
    """A new tx against its signer's txs in this node's mempool, as the REST API's
    admission sees it. `verdict`: "ok", "full" (no room above the oldest pending tx) or
    "behind" (so many newer nonces already that one more backlog could push it out)."""

    pending: int
    above_oldest: int
    newer: int
    limit: int
    window: int
    verdict: str


def backlog(recent: Sequence[int], pending: Sequence[int], nonce: int,
            window: int) -> Backlog:
    """Whether a new tx with `nonce` may be acknowledged (`backlog_limit`).

    A tx older than every pending one is newer than none of them, so the backlog never
    holds it back; but it must itself stay a full backlog away from the floor.
    """
    above_oldest = max(0, len(pending) - 1)
    limit = backlog_limit(window)
    newer = _newer(recent, pending, nonce)
    if newer + limit > window:
        verdict = "behind"
    elif pending and nonce > pending[0] and above_oldest + 1 > limit:
        verdict = "full"
    else:
        verdict = "ok"
    return Backlog(len(pending), above_oldest, newer, limit, window, verdict)


#: Before the nonce window there is no mempool view, so nothing to bound.
UNBOUNDED = Backlog(pending=0, above_oldest=0, newer=0, limit=0, window=0, verdict="ok")


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
