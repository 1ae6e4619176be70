"""Re-submitting a verified bundle's memories into another chain, with provenance.

Each memory becomes a submit signed by the importing key, under its original id, with
its domain, type, confidence, tags and content, and `origin` naming the chain, height,
id and author it was proven at (MemorySubmit.origin, app version 10+). The importing
chain's validators decide it as any other proposal; origin is provenance the bundle
proved, not something the new chain can check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memledger.protocol.codes import Code
from memledger.protocol.envelope import encode_tx
from memledger.protocol.pb import tx_pb2
from memledger.sdk.bundle.verify import VerifiedMemory
from memledger.sdk.models import TxReceipt
from memledger.sdk.txbuilder import TxBuilder

#: refusals that mean the memory's id is taken on the target chain (an earlier import, or
#: another memory): the import goes on without it, so a cut import can simply be re-run
ALREADY_THERE = frozenset({Code.MEMORY_TERMINAL, Code.MEMORY_ID_CONFLICT})


@dataclass(frozen=True)
class ImportResult:
    """What an import sent (one receipt per submitted memory) and the ids it skipped
    because the target chain already holds a memory under them."""

    submitted: list[TxReceipt] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def origin_of(memory: VerifiedMemory) -> tx_pb2.Origin:
    return tx_pb2.Origin(chain_id=memory.chain_id, height=memory.height,
                         memory_id=memory.memory_id, author=str(memory.record.get("author", "")))


def import_tx(builder: TxBuilder, nonce: int, memory: VerifiedMemory) -> bytes:
    """The signed submit that re-creates `memory` on the builder's chain."""
    rec = memory.record
    msg = tx_pb2.MemorySubmit(
        memory_id=memory.memory_id, domain=str(rec["domain"]),
        memory_type=str(rec.get("type", "fact")), content=memory.content,
        content_hash=bytes.fromhex(str(rec["content_hash"])),
        confidence_ppm=int(rec["confidence_ppm"]), tags=sorted(rec.get("tags") or []),
        origin=origin_of(memory))
    body = tx_pb2.TxBody(chain_id=builder.chain_id, nonce=nonce, memory_submit=msg)
    return encode_tx(body, builder.key)
