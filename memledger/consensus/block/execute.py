"""processTx: the deterministic path every tx in a block takes (DESIGN §3).

Order: size, decode, canonical form (with the fields the app version knows), chain id,
signature, nonce, then the handler, all
against a per-tx buffer so that a rejected tx changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memledger.consensus.families import registry
from memledger.consensus.families.accounts import nonces
from memledger.consensus.families.context import BlockInfo, KeyValueView, TxBuffer, TxContext
from memledger.consensus.gate.envelope import (
    SignatureCheck,
    SignedTx,
    check_fields_version,
    decode_tx,
)
from memledger.consensus.gate.pending import PendingNonces
from memledger.consensus.gate.txcache import DecodedTxCache
from memledger.protocol.codes import Code, TxError


@dataclass(slots=True)
class TxOutcome:
    """The result of one tx, ready to become an ExecTxResult or ResponseCheckTx."""

    code: Code
    log: str
    events: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    kind: str = ""
    signer: str = ""
    signer_key: bytes = b""
    nonce: int = 0
    tx_hash: bytes = b""


Handler = Callable[[TxContext, Any], None]


def process_tx(
    view: KeyValueView,
    block: BlockInfo,
    raw: bytes,
    *,
    apply: bool = True,
    check: SignatureCheck | None = None,
    decoded: DecodedTxCache | None = None,
    pending: PendingNonces | None = None,
    recheck: bool = False,
) -> TxOutcome:
    """Run one tx; on success its writes reach `view` (unless `apply` is False).

    `decoded` remembers txs that passed the stateless gate (same bytes, same chain id:
    same result), so mempool rechecks and the block do not decode them again. `pending`
    (CheckTx only) is what the mempool already holds, for the nonce check; `recheck` says
    the tx is one CheckTx already admitted.
    """
    signed = None if decoded is None else decoded.get(raw, block.chain_id)
    try:
        if signed is None:
            signed = decode_tx(raw, block.chain_id, check, block.app_version)
            if decoded is not None:
                decoded.put(raw, signed, block.chain_id)
        else:  # decoded once under some version: the version part of the gate again
            check_fields_version(signed.fields_version, block.app_version)
    except TxError as err:
        return TxOutcome(err.code, err.log)
    buffer = TxBuffer(view)
    ctx = TxContext(
        state=buffer, block=block, signer=signed.signer, nonce=signed.nonce,
        tx_hash=signed.tx_hash,
    )
    version = block.app_version
    try:
        account = nonces.check_nonce(
            buffer, signed.signer, signed.nonce, version,
            None if pending is None else nonces.Mempool(pending.for_signer(signed.signer),
                                                        recheck))
        handler = registry.handler_for(signed.kind, version)
        handler(ctx, getattr(signed.body, signed.kind))
        nonces.advance(buffer, signed.signer, signed.nonce, version, account)
    except TxError as err:
        return TxOutcome(err.code, err.log, kind=signed.kind, signer=signed.signer_hex)
    if apply:
        buffer.apply()
    events = [("tx", [("kind", signed.kind), ("signer", signed.signer_hex),
                      ("nonce", str(signed.nonce))])]
    events.extend(ctx.events)
    return TxOutcome(Code.OK, "", events, signed.kind, signed.signer_hex, signed.signer,
                     signed.nonce, signed.tx_hash)


def recheck_nonce(view: KeyValueView, block: BlockInfo, signed: SignedTx,
                  pending: PendingNonces | None) -> TxOutcome:
    """The part of a recheck that can change when the block left the tx's reads alone
    (memledger.consensus.gate.recheck): the nonce rule against what the mempool holds now.
    Gate and handler are not run again; nothing is written."""
    try:
        nonces.check_nonce(
            TxBuffer(view), signed.signer, signed.nonce, block.app_version,
            None if pending is None else nonces.Mempool(pending.for_signer(signed.signer),
                                                        recheck=True))
    except TxError as err:
        return TxOutcome(err.code, err.log, kind=signed.kind, signer=signed.signer_hex)
    return TxOutcome(Code.OK, "", [], signed.kind, signed.signer_hex, signed.signer,
                     signed.nonce, signed.tx_hash)
