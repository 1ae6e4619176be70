"""Per-signer nonces: strictly increasing, gaps allowed, advanced only on success."""

from __future__ import annotations

from abci import records
from abci.codes import Code, TxError
from abci.context import TxBuffer

MAX_NONCE = (1 << 64) - 1


def last_nonce(state: TxBuffer, signer: bytes) -> int:
    record = state.get_record(records.account_key(signer))
    return 0 if record is None else int(record["nonce"])


def check_nonce(state: TxBuffer, signer: bytes, nonce: int) -> None:
    last = last_nonce(state, signer)
    if nonce <= last:
        raise TxError(Code.NONCE_REPLAYED, f"nonce {nonce} <= last committed nonce {last}")


def advance(state: TxBuffer, signer: bytes, nonce: int) -> None:
    state.put_record(records.account_key(signer), {"nonce": nonce})
